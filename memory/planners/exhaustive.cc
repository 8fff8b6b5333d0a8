#include "memory/planners/exhaustive.h"

#include <vector>

namespace spill {

StatusOr<ExhaustiveResult> SolveExhaustive(PlanRules& rules) {
  const EvalModel& m = rules.model();
  const int k = static_cast<int>(m.candidates.size());
  if (k > kMaxExhaustiveCandidates) {
    return InvalidArgument("exhaustive search: " + std::to_string(k) + " candidates; at most " +
                           std::to_string(kMaxExhaustiveCandidates));
  }
  std::vector<std::vector<TensorChoice>> options(k);
  for (int i = 0; i < k; ++i) {
    const TensorId t = m.candidates[i];
    options[i] = {TensorChoice::kKeep};
    if (m.offloadable[t]) options[i].push_back(TensorChoice::kOffload);
    if (m.droppable[t]) options[i].push_back(TensorChoice::kDrop);
  }
  ExhaustiveResult best;
  Choices choices(m.schedule->tensors.size(), TensorChoice::kKeep);
  std::vector<int> digit(k, 0);
  Decisions decisions;
  for (;;) {
    for (int i = 0; i < k; ++i) choices[m.candidates[i]] = options[i][digit[i]];
    const Evaluation& e = rules.Evaluate(choices, &decisions);
    ++best.plans;
    if (rules.Fits(e) && (!best.feasible || e.seconds < best.seconds)) {
      best.feasible = true;
      best.decisions = decisions;
      best.seconds = e.seconds;
      best.peak = e.peak;
    }
    int i = 0;  // the next combination, as a mixed-radix counter
    while (i < k && ++digit[i] == static_cast<int>(options[i].size())) digit[i++] = 0;
    if (i == k) break;
  }
  return best;
}

}  // namespace spill
