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
// step boundary (j - lms_ahead > i + 2). With memory.lms_count k > 0 only k
// tensors swap - the largest (lms_order: largest) or the earliest written
// (earliest) of those the distances allow - as TFLMS's n_tensors, which
// sweeps a frontier of memory against time. Each tensor is released after its
// last use. Unlike the window scheduler, distances do not adapt to sizes and
// nothing checks the budget ahead: a plan that does not fit fails where an
// allocation does not.
#include <algorithm>

#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/scheduler_registry.h"
#include "memory/schedulers/tensor_sequence.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

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
const SettingSpec kCount = {
    "lms_count", SettingKind::kInt,
    "0",         "lms: at most this many tensors swap, the largest or earliest (lms_order); 0: all",
    0,           kMaxScheduleDistance};
const SettingSpec kOrder = {"lms_order",
                            SettingKind::kChoice,
                            "largest",
                            "lms: which tensors lms_count keeps, the largest or the earliest",
                            0,
                            0,
                            {"largest", "earliest"}};

// The scheduler's settings, read once per plan.
struct LmsSettings {
  int threshold, ahead, count;
  bool largest;

  explicit LmsSettings(const PolicySettings& s)
      : threshold(static_cast<int>(s.Int(kThreshold))),
        ahead(static_cast<int>(s.Int(kAhead))),
        count(static_cast<int>(s.Int(kCount))),
        largest(s.Choice(kOrder) == "largest") {}
};

// Whether tensor `t` swaps between its uses i and j.
bool Swaps(int i, int j, const LmsSettings& lms) {
  return j - i >= lms.threshold && j - lms.ahead > i + 2;
}

// The tensors that may swap: all, or the `count` largest or earliest of them.
std::vector<bool> Swapping(const std::vector<std::vector<int>>& uses, const Schedule& schedule,
                           const LmsSettings& lms) {
  std::vector<TensorId> eligible;
  for (TensorId t = 0; t < static_cast<TensorId>(uses.size()); ++t) {
    for (size_t k = 0; k + 1 < uses[t].size(); ++k) {
      if (Swaps(uses[t][k], uses[t][k + 1], lms)) {
        eligible.push_back(t);
        break;
      }
    }
  }
  if (lms.count > 0 && lms.count < static_cast<int>(eligible.size())) {
    std::stable_sort(eligible.begin(), eligible.end(), [&](TensorId a, TensorId b) {
      return lms.largest ? schedule.tensors[a].bytes > schedule.tensors[b].bytes
                         : uses[a].front() < uses[b].front();
    });
    eligible.resize(lms.count);
  }
  std::vector<bool> swapping(uses.size(), false);
  for (TensorId t : eligible) swapping[t] = true;
  return swapping;
}

TransferPlan PlanLms(const Schedule& schedule, Phase phase, const LmsSettings& lms) {
  const TensorSequence seq = BuildTensorSequence(schedule, phase);
  const int steps = seq.num_steps();
  std::vector<std::vector<int>> uses(schedule.tensors.size());
  for (size_t i = 0; i < seq.tensors.size(); ++i) uses[seq.tensors[i]].push_back(seq.step[i]);
  const std::vector<bool> swapping = Swapping(uses, schedule, lms);
  // Per step, in the order they run: releases and swap-outs of the step's
  // tensors, then waits (freeing memory), then prefetches into it.
  std::vector<std::vector<TransferAction>> leave(steps), wait(steps), fetch(steps);
  for (TensorId t = 0; t < static_cast<TensorId>(uses.size()); ++t) {
    if (!swapping[t]) continue;
    const std::vector<int>& u = uses[t];
    for (size_t k = 0; k + 1 < u.size(); ++k) {
      const int i = u[k], j = u[k + 1];
      if (!Swaps(i, j, lms)) continue;
      leave[i].push_back({TransferOp::kBeginOffload, t});
      wait[i + 1].push_back({TransferOp::kFinishOffload, t});
      fetch[j - lms.ahead - 1].push_back({TransferOp::kPrefetch, t});
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

const bool kLms = RegisterScheduler(
    {"lms",
     "swap-out when the next use is memory.lms_threshold steps away or more, swap-in "
     "memory.lms_ahead steps before it (fixed distances, the LMS baseline); memory.lms_count: "
     "only that many tensors, the largest or earliest (memory.lms_order)",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       const LmsSettings lms(options.settings);
       PhasePlans plans;
       plans.train = PlanLms(*view.schedule, Phase::kTrain, lms);
       plans.eval = PlanLms(*view.schedule, Phase::kEval, lms);
       return plans;
     },
     {kThreshold, kAhead, kCount, kOrder}});

}  // namespace
}  // namespace spill
