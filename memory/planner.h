// Planning from shapes alone: runs the memory runtime without a device (no
// memory is reserved, no kernel runs, no bytes move), over the very code path
// a training run takes. The per-step accounting it produces is therefore the
// run's, exactly.
//
//   Plan            per-step memory of one training iteration in a mode
//   MinimumBudget   the smallest device budget a mode runs in (bisection
//                   over budgets, each checked by a plan)
//   ExplainOutOfMemory  turns a runtime's kOutOfMemory into a report that
//                   adds that minimum
#ifndef SPILL_MEMORY_PLANNER_H_
#define SPILL_MEMORY_PLANNER_H_

#include "framework/net.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"

namespace spill {

struct MemoryPlan {
  MemoryLog log;    // per-step records of a training iteration
  size_t peak = 0;  // bytes in use at the busiest moment
  int peak_step = -1;
  size_t persistent = 0;  // parameters, their gradients, solver state
  size_t high_water = 0;  // highest pool offset used (>= peak: fragmentation)
  int64_t recomputations = 0;
  bool fits = true;  // false: the budget ran out (see `failure`)
  std::string failure;
};

// Plans one training iteration (two are run; the second lists the tensors
// live at the peak) under `options.device_budget`.
StatusOr<MemoryPlan> Plan(const Net& net, const MemoryOptions& options);

// The smallest budget, to `resolution` bytes, with which `options`' mode runs
// an iteration. Fails when even an unlimited budget does not.
StatusOr<size_t> MinimumBudget(const Net& net, MemoryOptions options, size_t resolution = 0);

// For kOutOfMemory, appends the smallest budget that would work to the
// message; other statuses pass through.
Status ExplainOutOfMemory(const Status& status, const Net& net, const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNER_H_
