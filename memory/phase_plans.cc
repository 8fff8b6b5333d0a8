#include "memory/phase_plans.h"

#include <algorithm>
#include <string>
#include <utility>

#include "memory/memory_options.h"
#include "memory/scheduler_registry.h"

namespace spill {

bool HomeOnHost(const Schedule& schedule, const MemoryOptions& options, TensorId id) {
  const TensorInfo& info = schedule.tensors[id];
  if (IsTransient(info.kind) || !options.params.HomeOnHost(info.bytes)) return false;
  // Updated on the device, a gradient is used up there and never kept.
  return !(info.kind == TensorKind::kParamGrad && !options.update_on_host);
}

namespace {

// Parameters that live in host memory come in for each step of their layer
// and go back after it: prefetched one step ahead (or read in by the step,
// where the plan says they come late), given back after the step
// (a copy only when the step changed them), the copy waited for one step
// later. After the layer's backward the solver updates them where the memory
// policy says: on the device (the gradient is then used up and its state
// copied back), or in host memory, once the gradient's copy has arrived -
// or, with memory.updates_after_iteration, once the iteration is over.
void AddLayerParameterTransfers(const Schedule& schedule, const MemoryOptions& options, int layer,
                                const std::vector<const ParameterSlot*>& layer_slots,
                                PhasePlans* plans) {
  std::vector<TensorId> params, states;
  std::vector<const ParameterSlot*> slots;  // trainable parameters living on the host
  for (TensorId p : schedule.layers[layer].params) {
    if (HomeOnHost(schedule, options, p)) params.push_back(p);
  }
  for (const ParameterSlot* slot : layer_slots) {
    if (!HomeOnHost(schedule, options, slot->param)) continue;
    slots.push_back(slot);
    for (TensorId t : slot->state) states.push_back(t);
  }
  if (params.empty()) return;
  auto add = [](std::vector<TransferAction>* list, TransferOp op,
                const std::vector<TensorId>& ids) {
    for (TensorId id : ids) list->push_back({op, id});
  };
  // Those the plan brings in late are read in by their step itself.
  auto ahead = [&params](const TransferPlan& plan, uint8_t visit) {
    std::vector<TensorId> early;
    for (TensorId p : params) {
      if ((plan.LateAt(p) & visit) == 0) early.push_back(p);
    }
    return early;
  };
  for (TransferPlan* plan : {&plans->train, &plans->eval}) {
    const int f = schedule.forward_step[layer];
    const int next = std::min(f + 1, plan->num_steps() - 1);
    if (f > 0) add(&plan->before[f - 1], TransferOp::kPrefetch, ahead(*plan, kLateForward));
    add(&plan->after[f], TransferOp::kBeginOffload, params);
    add(&plan->after[next], TransferOp::kFinishOffload, params);
  }
  TransferPlan& train = plans->train;
  const int b = schedule.backward_step[layer];
  if (!schedule.steps[b].active) return;
  const int next = std::min(b + 1, train.num_steps() - 1);
  add(&train.before[b - 1], TransferOp::kPrefetch, ahead(train, kLateBackward));
  if (options.update_on_host) {
    add(&train.after[b], TransferOp::kBeginOffload, params);  // unchanged: no copy
    add(&train.after[b], TransferOp::kFinishOffload, params);
    for (const ParameterSlot* slot : slots) {
      train.after[b].push_back({TransferOp::kBeginOffload, slot->grad});
      // Updates after the iteration: the gradient waits in host memory
      // (MemoryRuntime::FinishUpdate).
      if (!options.updates_after_iteration) {
        train.after[b].push_back({TransferOp::kUpdate, slot->param});
      }
      train.after[next].push_back({TransferOp::kFinishOffload, slot->grad});
    }
    return;
  }
  add(&train.before[b - 1], TransferOp::kPrefetch, states);
  for (const ParameterSlot* slot : slots)
    train.after[b].push_back({TransferOp::kUpdate, slot->param});
  add(&train.after[b], TransferOp::kBeginOffload, params);
  add(&train.after[b], TransferOp::kBeginOffload, states);
  add(&train.after[next], TransferOp::kFinishOffload, params);
  add(&train.after[next], TransferOp::kFinishOffload, states);
}

}  // namespace

void AddParameterTransfers(const Schedule& schedule, const MemoryOptions& options,
                           PhasePlans* plans) {
  if (options.ranks > 1) {
    // The gradient goes to its reduction as soon as its layer's backward
    // has made it (before it may leave the device).
    for (const ParameterSlot& slot : schedule.parameters) {
      const int b = schedule.backward_step[slot.layer];
      if (schedule.steps[b].active)
        plans->train.after[b].push_back({TransferOp::kReduceScatter, slot.grad});
    }
  }
  if (options.gradients_leave) {
    // Copied out by the step's observer (data parallelism), the gradient
    // leaves with the step; the update makes it again.
    for (const ParameterSlot& slot : schedule.parameters) {
      const int b = schedule.backward_step[slot.layer];
      if (schedule.steps[b].active)
        plans->train.after[b].push_back({TransferOp::kRelease, slot.grad});
    }
  }
  if (options.params_gathered) {
    // A sharded parameter's gather begins one step ahead of each step of
    // its layer (the first step's, when it comes); it goes after the step.
    for (const ParameterSlot& slot : schedule.parameters) {
      const int f = schedule.forward_step[slot.layer];
      const int b = schedule.backward_step[slot.layer];
      for (TransferPlan* plan : {&plans->train, &plans->eval}) {
        if (f > 0) plan->before[f - 1].push_back({TransferOp::kGather, slot.param});
        plan->after[f].push_back({TransferOp::kRelease, slot.param});
      }
      if (!schedule.steps[b].active) continue;
      plans->train.before[b - 1].push_back({TransferOp::kGather, slot.param});
      plans->train.after[b].push_back({TransferOp::kRelease, slot.param});
    }
  }
  if (options.params.kind != ParamPlacement::Kind::kHost &&
      options.params.kind != ParamPlacement::Kind::kAbove) {
    return;
  }
  std::vector<std::vector<const ParameterSlot*>> by_layer(schedule.layers.size());
  for (const ParameterSlot& slot : schedule.parameters) by_layer[slot.layer].push_back(&slot);
  for (int layer : schedule.route) {
    AddLayerParameterTransfers(schedule, options, layer, by_layer[layer], plans);
  }
}

namespace {

Status CompletePlan(const Schedule& schedule, const MemoryOptions& options, Phase phase,
                    TransferPlan* plan) {
  const char* name = phase == Phase::kTrain ? "train" : "eval";
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  const size_t tensors = schedule.tensors.size();
  plan->phase = phase;
  if (plan->before.empty() && plan->after.empty()) plan->Resize(steps);
  if (plan->num_steps() != steps || static_cast<int>(plan->after.size()) != steps) {
    return InvalidArgument("plan: the " + std::string(name) + " plan lists " +
                           std::to_string(plan->before.size()) + " steps before and " +
                           std::to_string(plan->after.size()) + " after; the schedule has " +
                           std::to_string(steps));
  }
  if (!plan->streamed.empty() && static_cast<int>(plan->streamed.size()) != steps) {
    return InvalidArgument("plan: the " + std::string(name) + " plan streams " +
                           std::to_string(plan->streamed.size()) + " steps; the schedule has " +
                           std::to_string(steps) + " (one entry per step, or none)");
  }
  if (!plan->algorithms.empty() && static_cast<int>(plan->algorithms.size()) != steps) {
    return InvalidArgument("plan: the " + std::string(name) + " plan gives algorithms for " +
                           std::to_string(plan->algorithms.size()) + " steps; the schedule has " +
                           std::to_string(steps) + " (one entry per step, or none)");
  }
  for (int s = 0; s < static_cast<int>(plan->streamed.size()); ++s) {
    if (plan->streamed[s].images < 0) {
      return InvalidArgument("plan: step " + std::to_string(s + 1) + " of the " + name +
                             " plan is streamed in slices of " +
                             std::to_string(plan->streamed[s].images) + " images");
    }
  }
  for (int s = 0; s < steps; ++s) {
    for (const auto& [when, list] :
         {std::pair{"before", &plan->before[s]}, {"after", &plan->after[s]}}) {
      for (const TransferAction& a : *list) {
        const std::string where = "plan: " + std::string(name) + " step " + std::to_string(s + 1) +
                                  " " + when + ": " + TransferOpName(a.op);
        if (a.tensor < 0 || static_cast<size_t>(a.tensor) >= tensors) {
          return InvalidArgument(where + " of tensor " + std::to_string(a.tensor) +
                                 ", which the schedule does not have (" + std::to_string(tensors) +
                                 " tensors)");
        }
        const bool before = std::string(when) == "before";
        if ((a.op == TransferOp::kPrefetch || a.op == TransferOp::kRebuild ||
             a.op == TransferOp::kGather) &&
            !before) {
          return InvalidArgument(where + " '" + schedule.tensors[a.tensor].name +
                                 "': acts before a step only");
        }
        if (a.op == TransferOp::kReduceScatter && before) {
          return InvalidArgument(where + " '" + schedule.tensors[a.tensor].name +
                                 "': acts after a step only");
        }
        if (a.op == TransferOp::kGather && !options.params_gathered) {
          return InvalidArgument(where + " '" + schedule.tensors[a.tensor].name +
                                 "': gathers only sharded parameters (distributed.zero 3)");
        }
        if (a.op == TransferOp::kUpdate &&
            (!HomeOnHost(schedule, options, a.tensor) ||
             std::none_of(schedule.parameters.begin(), schedule.parameters.end(),
                          [&](const ParameterSlot& p) { return p.param == a.tensor; }))) {
          return InvalidArgument(where + " '" + schedule.tensors[a.tensor].name +
                                 "': updates only parameters that live in host memory");
        }
      }
    }
  }
  if (plan->liveness.last_use.empty()) plan->liveness = AnalyzeLiveness(schedule, phase);
  if (plan->liveness.last_use.size() != tensors || plan->liveness.num_steps != steps) {
    return InvalidArgument("plan: the " + std::string(name) +
                           " plan's lifetimes are not the schedule's tensors and steps");
  }
  RecomputePlan& r = plan->recompute;
  if (r.droppable.empty()) r.droppable.assign(tensors, false);
  if (r.segment.empty()) r.segment.assign(tensors, -1);
  if (r.droppable.size() != tensors || r.segment.size() != tensors) {
    return InvalidArgument("plan: the " + std::string(name) +
                           " plan's recomputation sets are not the schedule's tensors");
  }
  if (!plan->late_parameters.empty() && plan->late_parameters.size() != tensors) {
    return InvalidArgument("plan: the " + std::string(name) + " plan's late parameters list " +
                           std::to_string(plan->late_parameters.size()) +
                           " tensors; the network has " + std::to_string(tensors));
  }
  for (int seg : r.segment) {
    if (seg >= static_cast<int>(r.keep.size())) {
      return InvalidArgument("plan: the " + std::string(name) + " plan names segment " +
                             std::to_string(seg) + " of " + std::to_string(r.keep.size()));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CompletePlans(const Schedule& schedule, const MemoryOptions& options, PhasePlans* plans) {
  SPILL_RETURN_IF_ERROR(CompletePlan(schedule, options, Phase::kTrain, &plans->train));
  return CompletePlan(schedule, options, Phase::kEval, &plans->eval);
}

StatusOr<PhasePlans> MakeTransferPlans(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(const SchedulerInfo* info, Schedulers().Get(options.scheduler));
  SPILL_ASSIGN_OR_RETURN(PhasePlans plans, info->plan(view, options));
  AddParameterTransfers(*view.schedule, options, &plans);
  return plans;
}

}  // namespace spill
