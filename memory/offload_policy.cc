#include "memory/offload_policy.h"

#include <algorithm>

namespace spill {
namespace {

// The step at which to prefetch a tensor first needed at backward step `use`:
// `ahead` checkpoint steps earlier, or the start of backward.
int IssueStep(int use, const std::vector<int>& checkpoint_steps, int ahead, int first_backward) {
  if (ahead <= 0) return use;
  auto it = std::lower_bound(checkpoint_steps.begin(), checkpoint_steps.end(), use);
  int before = static_cast<int>(it - checkpoint_steps.begin());  // checkpoints strictly before use
  if (before < ahead) return first_backward;
  return checkpoint_steps[before - ahead];
}

}  // namespace

OffloadPlan PlanOffload(const Schedule& schedule, const Liveness& liveness,
                        const std::vector<LayerCost>& costs, const std::vector<bool>& droppable,
                        int prefetch_ahead, bool eager) {
  const int n = schedule.num_layers(), steps = 2 * n;
  const size_t count = schedule.tensors.size();
  OffloadPlan plan;
  plan.checkpoint.assign(count, false);
  plan.begin_after.resize(steps);
  plan.finish_after.resize(steps);
  plan.prefetch_at.resize(steps);
  plan.first_backward_use.assign(count, -1);
  std::vector<int> last_forward_use(count, -1), producer_step(count, -1);
  for (int s = 0; s < n; ++s) {
    for (TensorId t : schedule.steps[s].writes) {
      if (producer_step[t] < 0) producer_step[t] = s;
      last_forward_use[t] = s;
    }
    for (TensorId t : schedule.steps[s].reads) last_forward_use[t] = s;
  }
  for (int s = n; s < steps; ++s) {
    for (TensorId t : schedule.steps[s].reads) {
      if (plan.first_backward_use[t] < 0) plan.first_backward_use[t] = s;
    }
  }
  // A dropped tensor is rebuilt from its producer's inputs where it is needed.
  auto earlier = [](int a, int b) { return a < 0 ? b : (b < 0 ? a : std::min(a, b)); };
  for (TensorId d = static_cast<TensorId>(count) - 1; d >= 0; --d) {
    if (droppable.empty() || !droppable[d] || plan.first_backward_use[d] < 0) continue;
    const LayerTensors& lt = schedule.layers[schedule.tensors[d].layer];
    for (const std::vector<TensorId>* group : {&lt.inputs, &lt.aux}) {
      for (TensorId x : *group) {
        plan.first_backward_use[x] =
            earlier(plan.first_backward_use[x], plan.first_backward_use[d]);
      }
    }
  }
  std::vector<int> checkpoint_steps;
  for (int s = n; s < steps; ++s) {
    const Step& step = schedule.steps[s];
    if (step.active && costs[step.layer] == LayerCost::kCheckpoint) checkpoint_steps.push_back(s);
  }
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    const TensorInfo& info = schedule.tensors[t];
    const bool from_forward = info.kind == TensorKind::kActivation || info.kind == TensorKind::kAux;
    if (!from_forward || plan.first_backward_use[t] < 0 || producer_step[t] < 0) continue;
    if (liveness.last_use[t] < n)
      last_forward_use[t] = std::max(last_forward_use[t], liveness.last_use[t]);
    const bool checkpoint =
        info.kind == TensorKind::kActivation && costs[info.layer] == LayerCost::kCheckpoint;
    if (eager && !checkpoint) continue;
    if (eager) {
      plan.checkpoint[t] = true;
      plan.begin_after[producer_step[t]].push_back(t);
      plan.finish_after[last_forward_use[t]].push_back(t);
    }
    int issue = IssueStep(plan.first_backward_use[t], checkpoint_steps, prefetch_ahead, n);
    plan.prefetch_at[issue].push_back(t);
  }
  return plan;
}

}  // namespace spill
