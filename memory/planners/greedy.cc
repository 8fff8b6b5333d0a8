// greedy: cheapest overhead per byte freed at the peak, until the plan fits
// (the baseline "(d)" the DQN planner is judged against).
//
// From the plan that keeps everything, repeatedly: find the step at which
// the projected memory peaks; try every move that may free bytes there
// (MovesAt: offload or drop a tensor kept there that could be gone, turn a
// dropped tensor into an offloaded one, offload a tensor with the dropped
// ones whose rebuilds hold it), each completed by the fixed rules of
// rules.h and scored by the evaluator; take the one that adds the least
// simulated time per byte it frees at that step. Stop when the peak is
// within memory.planner.limit (or the device budget); when nothing frees a
// byte there, it is out of memory. Deterministic; O(moves x candidates)
// evaluations.
#include <algorithm>
#include <utility>
#include <vector>

#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {

namespace {

// A move: tensors and the choice each takes.
using Move = std::vector<std::pair<TensorId, TensorChoice>>;

// The moves that may free bytes at step `peak` of a plan: offloading or
// dropping a tensor kept there that could be gone (written before it, read
// again after it; or, offloaded, between two backward reads around it);
// turning a dropped tensor into an offloaded one (its rebuild brings its
// sources back with it, and they stay until they are read); and offloading a kept tensor together
// with the dropped ones whose rebuilds hold it on the device (neither frees a byte alone).
std::vector<Move> MovesAt(const EvalModel& m, const Choices& choices, int peak,
                          const std::vector<std::vector<TensorId>>& dependents) {
  std::vector<Move> moves;
  for (TensorId t : m.candidates) {
    if (choices[t] == TensorChoice::kOffload || m.leaves_after[t] >= peak) continue;
    // Offloaded, it may leave again between two backward reads.
    const bool again = m.again_after[t] >= 0 && m.again_after[t] < peak &&
                       peak < m.again_needed_at[t] && m.offloadable[t];
    // A dropped tensor's rebuild, even before the peak, may have brought
    // sources back that are still there.
    if (choices[t] == TensorChoice::kKeep && m.needed_at[t] <= peak) {
      if (again) moves.push_back({{t, TensorChoice::kOffload}});
      continue;
    }
    if (m.offloadable[t]) moves.push_back({{t, TensorChoice::kOffload}});
    if (m.droppable[t] && choices[t] != TensorChoice::kDrop) {
      moves.push_back({{t, TensorChoice::kDrop}});
    }
    if (!m.offloadable[t] || choices[t] != TensorChoice::kKeep) continue;
    Move together = {{t, TensorChoice::kOffload}};
    for (TensorId d : dependents[t]) {
      if (choices[d] == TensorChoice::kDrop && m.offloadable[d]) {
        together.push_back({d, TensorChoice::kOffload});
      }
    }
    if (together.size() > 1) moves.push_back(together);
  }
  return moves;
}

// Per tensor: the candidates whose rebuild reads it.
std::vector<std::vector<TensorId>> Dependents(const EvalModel& m) {
  std::vector<std::vector<TensorId>> dependents(m.schedule->tensors.size());
  for (TensorId t : m.candidates) {
    for (TensorId x : m.sources[t]) dependents[x].push_back(t);
  }
  return dependents;
}

}  // namespace

StatusOr<Decisions> PlanGreedy(PlanRules& rules) {
  return PlanGreedyFrom(rules,
                        Choices(rules.model().schedule->tensors.size(), TensorChoice::kKeep));
}

StatusOr<Decisions> PlanGreedyFrom(PlanRules& rules, Choices choices, const char* planner) {
  const EvalModel& m = rules.model();
  const std::vector<std::vector<TensorId>> dependents = Dependents(m);
  Decisions decisions;
  for (;;) {
    const Evaluation now = rules.Evaluate(choices, &decisions);
    if (rules.Fits(now)) return decisions;
    const int peak = now.peak_step;
    double best_score = 0;
    size_t best_freed = 0;
    Move best;
    for (const Move& move : MovesAt(m, choices, peak, dependents)) {
      Choices tried = choices;
      for (const auto& [t, c] : move) tried[t] = c;
      const Evaluation& e = rules.Evaluate(tried);
      if (e.step_peak[peak] >= now.step_peak[peak]) continue;
      const size_t freed = now.step_peak[peak] - e.step_peak[peak];
      const double score = std::max(0.0, e.seconds - now.seconds) / static_cast<double>(freed);
      if (best.empty() || score < best_score || (score == best_score && freed > best_freed)) {
        best = move;
        best_score = score;
        best_freed = freed;
      }
    }
    if (best.empty()) {
      const std::string small = BelowMinimumAt(m, peak);
      return NoPlanWithin(planner, m, rules.limit(), now.peak,
                          "nothing kept at its peak step " + std::to_string(peak + 1) +
                              " can leave the device there" + (small.empty() ? "" : "; " + small));
    }
    for (const auto& [t, c] : best) choices[t] = c;
  }
}

namespace {

const bool kGreedy = RegisterScheduler(
    {"greedy",
     "offloads or drops, one tensor at a time, the one that adds the least simulated time per "
     "byte it frees at the peak, until the plan fits memory.planner.limit",
     [](const NetworkView& view, const MemoryOptions& options) {
       return PlanOnModel(view, options, [&](EvalModel& model) -> StatusOr<PhasePlans> {
         PlanRules rules(model, PlannerLimit(options));
         SPILL_ASSIGN_OR_RETURN(Decisions d, PlanGreedy(rules));
         return ToPhasePlans(model, d);
       });
     },
     {PlannerSettingKeys().limit, PlannerSettingKeys().profile, MinOffloadSetting()}});

}  // namespace
}  // namespace spill
