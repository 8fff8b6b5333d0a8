// Planning from shapes alone: runs the memory runtime without a device (no
// memory is reserved, no kernel runs, no bytes move), over the very code path
// a training run takes. The per-step accounting it produces is therefore the
// run's, exactly.
//
//   Plan                per-step memory of one training iteration in a mode,
//                       with the allocator's footprint and (on request) the
//                       event log: allocation trace, transfers, compute; or
//                       of a given plan, played to the end even when it does
//                       not fit, with its overshoot and its simulated time
//   MinimumBudget       the smallest device budget a mode runs in (bisection
//                       over budgets, each checked by a plan)
//
// Everything takes a NetworkView: the planner needs no layers and no network
// format.
#ifndef SPILL_MEMORY_PLANNING_PLANNER_H_
#define SPILL_MEMORY_PLANNING_PLANNER_H_

#include <functional>
#include <string>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/allocators/allocator.h"
#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/sim/device_profile.h"
#include "memory/transfer_plan.h"

namespace spill {

class MemoryRuntime;

struct MemoryPlan {
  MemoryLog log;    // per-step records of a training iteration
  size_t peak = 0;  // bytes in use at the busiest moment: the max load
  int peak_step = -1;
  size_t persistent = 0;  // parameters, their gradients, solver state
  // The highest end offset any block reached: what the budget must cover.
  // footprint - peak is the allocator's fragmentation overhead.
  size_t footprint = 0;
  size_t compacted = 0;  // bytes slid down to close holes, per iteration
  int64_t recomputations = 0;
  int64_t mismatches = 0;           // requests served unlike their profile (static allocator)
  std::vector<MemoryEvent> events;  // with options.record_events
  bool fits = true;                 // false: the budget ran out (see `failure`)
  std::string failure;
  // A given plan played to the end: how far past the budget its placements
  // reached at the worst step (per step: log.steps[s].overshoot), and one
  // iteration's time on the device profile it was simulated on.
  size_t overshoot = 0;
  double seconds = 0;

  size_t fragmentation() const { return footprint > peak ? footprint - peak : 0; }
};

// Plans one training iteration (two are run; the second lists the tensors
// live at the peak and gives the records) under `options.device_budget`.
StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options);
// The same, handing the runtime to `inspect` once the iterations have run
// (for what only the allocator knows, such as GTBM's squeeze gap).
StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const std::function<void(const MemoryRuntime&)>& inspect);

// Plans inference: the forward pass alone (Phase::kEval: no gradients,
// nothing kept for a backward pass), as `eval` and `predict` run it, under
// the same options; the records are those of the forward steps.
StatusOr<MemoryPlan> PlanInference(const NetworkView& view, const MemoryOptions& options);

// Scores a plan made elsewhere - by hand, or by a planner that searches -
// exactly: runs `plans` (each step's before and after actions, in
// memory/transfer_plan.h's vocabulary) under `options`' budget, allocator,
// eviction rule and switches, without a device, instead of the plans of
// `options.scheduler`. The parameter transfers of memory.params are added
// as MakeTransferPlans adds them; what the plans leave empty is completed
// (CompletePlans: lifetimes from the schedule, nothing droppable by the
// tensor cache); malformed plans are InvalidArgument.
//
// A plan that needs more than the budget is still played to the end: where
// the runtime would run out of memory (after every room its policies may
// make), the request is placed past the budget, and each step's record
// says how far past it reached (`fits` false, `overshoot` the worst step).
// The log is the full memory curve; `seconds` is the iteration simulated
// (memory/sim/timeline.h) on `profile`, with the cost model's roofline
// times. Events are always recorded.
StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const PhasePlans& plans, const DeviceProfile& profile);
// The same on the `k40-pcie3` profile.
StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const PhasePlans& plans);

// Variable-length sequences: a run whose iteration i sees sequence length
// lengths[i]. `reshape(length)` sets the network's length
// (Net::SetSequenceLength) and returns its view; the runtime is then told
// (MemoryRuntime::Reshape) and plays the iteration, exactly as a run does.
struct LengthsPlan {
  std::vector<MemoryPlan> iterations;  // per iteration: log, peak, events
  // Iterations that planned anew: the runtime made a plan for sizes it had
  // not seen, or the allocator left its profile (a static allocator's
  // re-profiling after a larger request).
  std::vector<bool> replanned;
  int64_t replans = 0;     // MemoryRuntime::replans
  int64_t mismatches = 0;  // the allocator's, over every iteration
  size_t footprint = 0;    // the allocator's highest end offset over the run
  size_t peak = 0;         // the highest bytes in use over the run
  bool fits = true;
  std::string failure;
};
StatusOr<LengthsPlan> PlanLengths(const NetworkView& view, const MemoryOptions& options,
                                  const std::vector<int64_t>& lengths,
                                  const std::function<StatusOr<NetworkView>(int64_t)>& reshape,
                                  Phase phase = Phase::kTrain);

// The smallest budget, to `resolution` bytes, with which `options`' mode runs
// an iteration. Fails when even an unlimited budget does not.
StatusOr<size_t> MinimumBudget(const NetworkView& view, MemoryOptions options,
                               size_t resolution = 0);

// The same for a run over `lengths` (PlanLengths), the network at length
// `start` when the runtime is created: what an allocator keeps from one
// length to the next (the caching allocator's segments, a static profile's
// slots, the holes shorter tensors leave) can need more than the longest
// length alone does.
StatusOr<size_t> MinimumBudgetForLengths(
    const std::function<StatusOr<NetworkView>(int64_t)>& reshape, int64_t start,
    MemoryOptions options, const std::vector<int64_t>& lengths, size_t resolution = 0);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNING_PLANNER_H_
