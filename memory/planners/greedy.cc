// greedy: cheapest overhead per byte freed at the peak, until the plan fits
// (the baseline "(d)" the DQN planner is judged against).
//
// From the plan that keeps everything, repeatedly: find the step at which
// the projected memory peaks; for every tensor still kept that is live there
// and could be gone (written before it, read again in backward after it),
// try offloading it and dropping it, each completed by the fixed rules of
// rules.h and scored by the evaluator; take the one that adds the least
// simulated time per byte it frees at that step. Stop when the peak is
// within memory.planner.limit (or the device budget); when nothing frees a
// byte there, it is out of memory. Deterministic; O(moves x candidates)
// evaluations.
#include <algorithm>

#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {

StatusOr<Decisions> PlanGreedy(PlanRules& rules) {
  const EvalModel& m = rules.model();
  Choices choices(m.schedule->tensors.size(), TensorChoice::kKeep);
  Decisions decisions;
  for (;;) {
    const Evaluation now = rules.Evaluate(choices, &decisions);
    if (rules.Fits(now)) return decisions;
    const int peak = now.peak_step;
    double best_score = 0;
    size_t best_freed = 0;
    TensorId best = kNoTensor;
    TensorChoice best_choice = TensorChoice::kKeep;
    for (TensorId t : m.candidates) {
      if (choices[t] != TensorChoice::kKeep || m.last_forward_use[t] >= peak ||
          m.first_backward_use[t] <= peak) {
        continue;
      }
      for (TensorChoice c : {TensorChoice::kOffload, TensorChoice::kDrop}) {
        if (!(c == TensorChoice::kOffload ? m.offloadable[t] : m.droppable[t])) continue;
        choices[t] = c;
        const Evaluation& e = rules.Evaluate(choices);
        choices[t] = TensorChoice::kKeep;
        if (e.step_peak[peak] >= now.step_peak[peak]) continue;
        const size_t freed = now.step_peak[peak] - e.step_peak[peak];
        const double score = std::max(0.0, e.seconds - now.seconds) / static_cast<double>(freed);
        if (best == kNoTensor || score < best_score ||
            (score == best_score && freed > best_freed)) {
          best = t;
          best_choice = c;
          best_score = score;
          best_freed = freed;
        }
      }
    }
    if (best == kNoTensor) {
      return NoPlanWithin("greedy", m, rules.limit(), now.peak,
                          "nothing kept at its peak step " + std::to_string(peak + 1) +
                              " can leave the device there");
    }
    choices[best] = best_choice;
  }
}

namespace {

const bool kGreedy = RegisterScheduler(
    {"greedy",
     "offloads or drops, one tensor at a time, the one that adds the least simulated time per "
     "byte it frees at the peak, until the plan fits memory.planner.limit",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
       PlanRules rules(model, PlannerLimit(options));
       SPILL_ASSIGN_OR_RETURN(Decisions d, PlanGreedy(rules));
       return ToPhasePlans(model, d);
     },
     {PlannerSettingKeys().limit, PlannerSettingKeys().profile, MinOffloadSetting()}});

}  // namespace
}  // namespace spill
