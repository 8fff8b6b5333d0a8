// knobs: a scheduler with two settings, added in the tests alone - this file
// and its BUILD target are all a new policy with settings costs. Its keys
// come with it: memory.knob_distance and memory.knob_min_bytes in YAML,
// --knob-distance and --knob-min-bytes as flags, checked, described and in
// --help, with nothing edited anywhere else.
//
// Like lms, at fixed distances: a transient tensor of at least
// `knob_min_bytes` whose next use is `knob_distance` steps away or more is
// offloaded after a use, waited for after the next step, and prefetched
// before the step ahead of its next use; every tensor is released after its
// last use.
#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/scheduler_registry.h"
#include "memory/schedulers/tensor_sequence.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

const SettingSpec kDistance = {"knob_distance",
                               SettingKind::kInt,
                               "4",
                               "knobs: offload when the next use is this many steps away",
                               3,
                               100};
const SettingSpec kMinBytes = {"knob_min_bytes",
                               SettingKind::kBytes,
                               "1KiB",
                               "knobs: offload no tensor smaller than this",
                               0,
                               0};

TransferPlan PlanKnobs(const Schedule& schedule, Phase phase, int distance, size_t min_bytes) {
  const TensorSequence seq = BuildTensorSequence(schedule, phase);
  std::vector<std::vector<int>> uses(schedule.tensors.size());
  for (size_t i = 0; i < seq.tensors.size(); ++i) uses[seq.tensors[i]].push_back(seq.step[i]);
  TransferPlan plan;
  plan.phase = phase;
  plan.liveness = AnalyzeLiveness(schedule, phase);
  plan.Resize(seq.num_steps());
  for (TensorId t = 0; t < static_cast<TensorId>(uses.size()); ++t) {
    if (schedule.tensors[t].bytes < min_bytes) continue;
    for (size_t k = 0; k + 1 < uses[t].size(); ++k) {
      const int i = uses[t][k], j = uses[t][k + 1];
      if (j - i < distance) continue;
      plan.after[i].push_back({TransferOp::kBeginOffload, t});
      plan.after[i + 1].push_back({TransferOp::kFinishOffload, t});
      plan.before[j - 1].push_back({TransferOp::kPrefetch, t});
    }
  }
  for (int s = 0; s < plan.num_steps(); ++s) {
    for (TensorId t : plan.liveness.dies_after[s])
      plan.after[s].push_back({TransferOp::kRelease, t});
  }
  return plan;
}

const bool kKnobs = RegisterScheduler(
    {"knobs",
     "a test scheduler with two settings (offloads at a fixed distance above a size)",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       const int distance = static_cast<int>(options.settings.Int(kDistance));
       const size_t min_bytes = options.settings.Bytes(kMinBytes);
       PhasePlans plans;
       plans.train = PlanKnobs(*view.schedule, Phase::kTrain, distance, min_bytes);
       plans.eval = PlanKnobs(*view.schedule, Phase::kEval, distance, min_bytes);
       return plans;
     },
     {kDistance, kMinBytes}});

}  // namespace
}  // namespace spill
