// The baseline planners and the search that starts from greedy's plan, as
// functions for the tools and tests that compare planners (each also
// registers itself as a scheduler: greedy.cc, memonger.cc, search.cc).
#ifndef SPILL_MEMORY_PLANNERS_BASELINES_H_
#define SPILL_MEMORY_PLANNERS_BASELINES_H_

#include "memory/planners/rules.h"

namespace spill {

// greedy.cc: the plan that fits `rules.limit()`, or kOutOfMemory.
StatusOr<Decisions> PlanGreedy(PlanRules& rules);
// The same moves from `choices` (a valid choice per tensor) rather than from
// keeping everything; no plan is reported as `planner`'s.
StatusOr<Decisions> PlanGreedyFrom(PlanRules& rules, Choices choices,
                                   const char* planner = "greedy");

// search.cc: the fastest plan the search finds within `rules.limit()` -
// greedy's seeds, descent, `evaluations` steps of annealing drawn from
// `seed`, descent - or kOutOfMemory when no seed fits. `model` is the one
// `rules` plans on: the search also gives steps their lean algorithms
// (EvalModel::lean), and leaves the model with the plan's, for
// ToPhasePlans.
StatusOr<Decisions> PlanSearch(PlanRules& rules, EvalModel& model, int evaluations, uint64_t seed);

// memonger.cc: every tensor that can be rebuilt dropped but the outputs of
// every `segment`-th layer on the route (0: ceil(sqrt(layers))), each
// rebuilt, with the rest of its segment, when backward first reads it.
Decisions PlanMemonger(const EvalModel& model, int segment);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_BASELINES_H_
