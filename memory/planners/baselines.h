// The baseline planners, as functions for the tools and tests that compare
// planners (each also registers itself as a scheduler: greedy.cc,
// memonger.cc).
#ifndef SPILL_MEMORY_PLANNERS_BASELINES_H_
#define SPILL_MEMORY_PLANNERS_BASELINES_H_

#include "memory/planners/rules.h"

namespace spill {

// greedy.cc: the plan that fits `rules.limit()`, or kOutOfMemory.
StatusOr<Decisions> PlanGreedy(PlanRules& rules);

// memonger.cc: every tensor that can be rebuilt dropped but the outputs of
// every `segment`-th layer on the route (0: ceil(sqrt(layers))), each
// rebuilt, with the rest of its segment, when backward first reads it.
Decisions PlanMemonger(const EvalModel& model, int segment);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_BASELINES_H_
