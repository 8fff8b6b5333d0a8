// Monotone feasibility: more memory never fails.
//
// A policy's plan is a function of the budget, and not a monotone one: an
// allocator's placements, a lazy release that waits until an allocation
// fails, a scheduler that plans by the budget or a static allocator's
// profile all decide differently under a larger pool, and a few of those
// decisions can leave no room where a smaller budget had some (ResNet-50 at
// batch 32 under dymem runs in 760 MiB but not in 785 MiB). No policy here
// promises monotonicity by construction, so the guarantee is made once, for
// all of them:
//
//   Let M be the minimum budget (MinimumBudget, what `plan --minimum`
//   reports: a budget whose plan fits, the one below it by the search's
//   resolution does not). Every budget B >= M runs, with a device footprint
//   of at most B. When the policy's own plan at B fits, it runs as planned;
//   otherwise it runs with the layout of F(B), the largest budget in [M, B]
//   the same search finds whose own plan fits (a bisection between M and B,
//   to the minimum's resolution), inside the budget B: footprint at most
//   F(B) <= B. A budget below M runs exactly when the policy's own plan at it
//   fits. So from M on, a budget that runs means every larger budget runs.
//
// Plans equal runs, so the planner, `train` and `plan --device-memory` make
// the same choice: they all go through PlanRunnable. The guarantee covers
// training iterations (what a plan plans); evaluation runs as before.
#ifndef SPILL_MEMORY_PLANNING_FEASIBILITY_H_
#define SPILL_MEMORY_PLANNING_FEASIBILITY_H_

#include "memory/planning/planner.h"

namespace spill {

struct RunnablePlan {
  MemoryPlan plan;  // of the layout that runs (fits == false: none does)
  // The budget that plan was made at: options.device_budget, or F(B) when
  // the policy's own plan at the budget does not fit.
  size_t layout_budget = 0;
  size_t requested_budget = 0;
  bool fallback() const { return layout_budget != requested_budget; }
};

// The plan that runs at options.device_budget (see the header). When none
// does (a budget below the minimum) the plan is the policy's own, with its
// failure. Costs one plan when the policy's own plan fits, and the minimum
// search plus a bisection when it does not.
StatusOr<RunnablePlan> PlanRunnable(const NetworkView& view, const MemoryOptions& options);
// The same with the minimum already known (MinimumBudget of `options`).
StatusOr<RunnablePlan> PlanRunnable(const NetworkView& view, const MemoryOptions& options,
                                    size_t minimum);

// The device budget a run of `options` uses: options.device_budget, or the
// fallback's F(B). kOutOfMemory with the policy's failure when no budget up
// to options.device_budget runs.
StatusOr<size_t> RunnableBudget(const NetworkView& view, const MemoryOptions& options);

// One line for users about a fallback ("" when there is none).
std::string DescribeFallback(const RunnablePlan& runnable);

// Out-of-memory diagnosis, for ExplainOutOfMemory. When host memory rather
// than device memory ran out (the plan fits with unlimited host memory, or
// fits as it is, so the host tier itself failed - a full disk under
// `file:DIR`): what is needed and what to raise; "" otherwise.
std::string HostShortage(const NetworkView& view, const MemoryOptions& options);
// The advice for a scheduler that plans in a share of the device budget
// below 1x (a `searchable` setting: memory.window_budget): the minimum at 1x
// as well, since a tiny share is what is short, not the budget ("" otherwise).
std::string ShareAdvice(const NetworkView& view, const MemoryOptions& options, size_t minimum);

// For kOutOfMemory, a report for users: host memory short (HostShortage), or
// the smallest device budget that would work and the advice above; other
// statuses pass through.
Status ExplainOutOfMemory(const Status& status, const NetworkView& view,
                          const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNING_FEASIBILITY_H_
