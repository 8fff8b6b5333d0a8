// superneurons: the SuperNeurons memory schedule, composed from the option
// switches - each technique a producer of the same transfer plan.
//
// Training, after each step, in this order:
//   1. eager offload (offload without the tensor cache): checkpoint outputs
//      start copying to host right after the step that produces them and give
//      their device block back after their last forward reader;
//   2. eager recomputation (recompute without the cache): cheap layers'
//      outputs are dropped after their last forward use; in memory-centric
//      segments, whatever a backward step read is dropped again after it;
//   3. liveness: each tensor is released after its last use (the sources of
//      a dropped tensor live until it has been dropped).
// Before each training step, once its own tensors are in place: tensors on
// the host come back `prefetch_ahead` checkpoint layers ahead of their first
// backward use (with the cache, whatever it sent to the host).
// With the cache on, nothing leaves on a schedule: the cache evicts on demand.
// Evaluation: liveness releases only.
#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/offload_policy.h"
#include "memory/recompute_policy.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

constexpr int64_t kMaxPrefetchAhead = 1024;  // checkpoint layers

const SettingSpec kPrefetchAhead = [] {
  SettingSpec s = {"prefetch_ahead",
                   SettingKind::kInt,
                   "1",
                   "prefetch offloaded tensors this many checkpoint layers ahead",
                   0,
                   kMaxPrefetchAhead};
  s.use = SettingUse::kWithOffload;
  return s;
}();
const SettingSpec kRecomputeStrategy = [] {
  SettingSpec s = {"recompute_strategy",
                   SettingKind::kChoice,
                   "cost_aware",
                   "which outputs recomputation drops: cost_aware, speed or memory",
                   0,
                   0,
                   {"cost_aware", "speed", "memory"}};
  s.training_only = true;
  s.use = SettingUse::kWithRecompute;
  return s;
}();

void AddAll(const std::vector<TensorId>& ids, TransferOp op, std::vector<TransferAction>* list) {
  for (TensorId id : ids) list->push_back({op, id});
}

TransferPlan EvalPlan(const Schedule& schedule, const MemoryOptions& options) {
  TransferPlan plan;
  plan.phase = Phase::kEval;
  plan.liveness = AnalyzeLiveness(schedule, Phase::kEval);
  plan.Resize(plan.liveness.num_steps);
  plan.evict_on_demand = options.cache;
  if (options.liveness) {
    for (int s = 0; s < plan.num_steps(); ++s) {
      AddAll(plan.liveness.dies_after[s], TransferOp::kRelease, &plan.after[s]);
    }
  }
  return plan;
}

// Memory-centric segments keep nothing between backward steps.
void AddMemoryCentricDrops(const Schedule& schedule, const RecomputePlan& recompute,
                           TransferPlan* plan) {
  for (int s = schedule.num_layers(); s < plan->num_steps(); ++s) {
    for (TensorId id : schedule.steps[s].reads) {
      const int seg = recompute.segment[id];
      if (seg >= 0 && !recompute.keep[seg]) plan->after[s].push_back({TransferOp::kDrop, id});
    }
  }
}

TransferPlan TrainPlan(const NetworkView& view, const MemoryOptions& options) {
  const Schedule& schedule = *view.schedule;
  std::vector<LayerCost> costs;
  std::vector<bool> is_loss;
  for (const LayerSummary& l : view.layers) {
    costs.push_back(l.cost);
    is_loss.push_back(l.is_loss);
  }
  const bool lazy = options.cache;
  TransferPlan plan;
  plan.phase = Phase::kTrain;
  plan.evict_on_demand = lazy;
  const Liveness liveness = AnalyzeLiveness(schedule, Phase::kTrain);
  const RecomputeStrategy strategy =
      *ParseRecomputeStrategy(options.settings.Choice(kRecomputeStrategy));
  plan.recompute =
      PlanRecompute(schedule, liveness, costs, is_loss, strategy, options.recompute && !lazy);
  plan.liveness = ExtendLiveness(liveness, plan.recompute);
  const OffloadPlan offload =
      PlanOffload(schedule, plan.liveness, costs,
                  options.recompute ? plan.recompute.droppable : std::vector<bool>(),
                  static_cast<int>(options.settings.Int(kPrefetchAhead)), options.offload && !lazy);
  plan.Resize(plan.liveness.num_steps);
  const bool eager = !lazy && (options.offload || options.recompute);
  for (int s = 0; s < plan.num_steps(); ++s) {
    if (eager) {
      AddAll(offload.begin_after[s], TransferOp::kBeginOffload, &plan.after[s]);
      AddAll(offload.finish_after[s], TransferOp::kFinishOffload, &plan.after[s]);
      AddAll(plan.recompute.drop_after[s], TransferOp::kDrop, &plan.after[s]);
    }
    if (options.offload) AddAll(offload.prefetch_at[s], TransferOp::kPrefetch, &plan.before[s]);
  }
  if (eager && options.recompute) AddMemoryCentricDrops(schedule, plan.recompute, &plan);
  if (options.liveness) {
    for (int s = 0; s < plan.num_steps(); ++s) {
      AddAll(plan.liveness.dies_after[s], TransferOp::kRelease, &plan.after[s]);
    }
  }
  return plan;
}

const bool kSuperNeurons = RegisterScheduler(
    {"superneurons",
     "liveness, eager offload with prefetch ahead, cost-aware recomputation and the tensor cache, "
     "as the memory switches say",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       PhasePlans plans;
       plans.train = TrainPlan(view, options);
       plans.eval = EvalPlan(*view.schedule, options);
       return plans;
     },
     {kPrefetchAhead, kRecomputeStrategy}});

}  // namespace
}  // namespace spill
