// The exact optimum over the DQN planner's own actions, by exhaustion: every
// combination of keep, offload and drop over the candidates, each completed
// by the fixed rules (rules.h) and scored by the evaluator. 3^K plans for K
// candidates, so only for small networks (K <= kMaxExhaustiveCandidates);
// the reference the learned planner's overhead is measured against.
#ifndef SPILL_MEMORY_PLANNERS_EXHAUSTIVE_H_
#define SPILL_MEMORY_PLANNERS_EXHAUSTIVE_H_

#include <cstdint>

#include "memory/planners/rules.h"

namespace spill {

constexpr int kMaxExhaustiveCandidates = 12;

struct ExhaustiveResult {
  bool feasible = false;
  Decisions decisions;  // the fastest plan within the limit
  double seconds = 0;
  size_t peak = 0;
  int64_t plans = 0;  // combinations scored
};

// InvalidArgument when there are more than kMaxExhaustiveCandidates.
StatusOr<ExhaustiveResult> SolveExhaustive(PlanRules& rules);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_EXHAUSTIVE_H_
