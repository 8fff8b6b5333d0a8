// lms: swaps at fixed distances in steps, like IBM's Large Model Support
// (Le et al. 2019) - the baseline the window scheduler is measured against.
//
// For every transient tensor and every pair of consecutive uses i < j in the
// phase (tensor_sequence.h), when j - i >= memory.lms_threshold:
//   after step i      its swap-out begins;
//   after step i + 1  it is waited for and the device memory freed;
//   before step j - memory.lms_ahead  it is prefetched, if it fits then
//                     (otherwise it comes back on demand at step j).
// A swap only happens when the tensor is off the device for at least one
// step boundary (j - lms_ahead > i + 2). Each tensor is released after its
// last use. Unlike the window scheduler, distances do not adapt to sizes and
// nothing checks the budget ahead: a plan that does not fit fails where an
// allocation does not.
#include <algorithm>

#include "memory/liveness.h"
#include "memory/schedulers/tensor_sequence.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

TransferPlan PlanLms(const Schedule& schedule, Phase phase, int threshold, int ahead) {
  const TensorSequence seq = BuildTensorSequence(schedule, phase);
  const int steps = seq.num_steps();
  std::vector<std::vector<int>> uses(schedule.tensors.size());
  for (size_t i = 0; i < seq.tensors.size(); ++i) uses[seq.tensors[i]].push_back(seq.step[i]);
  // Per step, in the order they run: releases and swap-outs of the step's
  // tensors, then waits (freeing memory), then prefetches into it.
  std::vector<std::vector<TransferAction>> leave(steps), wait(steps), fetch(steps);
  for (TensorId t = 0; t < static_cast<TensorId>(uses.size()); ++t) {
    const std::vector<int>& u = uses[t];
    for (size_t k = 0; k + 1 < u.size(); ++k) {
      const int i = u[k], j = u[k + 1];
      if (j - i < threshold || j - ahead <= i + 2) continue;
      leave[i].push_back({TransferOp::kBeginOffload, t});
      wait[i + 1].push_back({TransferOp::kFinishOffload, t});
      fetch[j - ahead - 1].push_back({TransferOp::kPrefetch, t});
    }
  }
  TransferPlan plan;
  plan.phase = phase;
  plan.liveness = AnalyzeLiveness(schedule, phase);
  plan.recompute.droppable.assign(schedule.tensors.size(), false);
  plan.recompute.segment.assign(schedule.tensors.size(), -1);
  plan.Resize(steps);
  for (int s = 0; s < steps; ++s) {
    for (TensorId t : plan.liveness.dies_after[s])
      plan.after[s].push_back({TransferOp::kRelease, t});
    for (const auto* list : {&leave[s], &wait[s], &fetch[s]}) {
      plan.after[s].insert(plan.after[s].end(), list->begin(), list->end());
    }
  }
  return plan;
}

constexpr int64_t kMaxScheduleDistance = 1 << 20;  // steps

const SettingSpec kThreshold = {
    "lms_threshold",
    SettingKind::kInt,
    "4",
    "lms: a tensor leaves the device after a use when its next use is this many steps away",
    2,
    kMaxScheduleDistance};
const SettingSpec kAhead = {"lms_ahead", SettingKind::kInt,
                            "2",         "lms: it comes back this many steps before that use",
                            0,           kMaxScheduleDistance};

const bool kLms = RegisterScheduler(
    {"lms",
     "swap-out when the next use is memory.lms_threshold steps away or more, swap-in "
     "memory.lms_ahead steps before it (fixed distances, the LMS baseline)",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       const int threshold = static_cast<int>(options.settings.Int(kThreshold));
       const int ahead = static_cast<int>(options.settings.Int(kAhead));
       PhasePlans plans;
       plans.train = PlanLms(*view.schedule, Phase::kTrain, threshold, ahead);
       plans.eval = PlanLms(*view.schedule, Phase::kEval, threshold, ahead);
       return plans;
     },
     {kThreshold, kAhead}});

}  // namespace
}  // namespace spill
