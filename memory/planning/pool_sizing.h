// Dymem's pool sizing for the GTBM allocator (§3.3.3, §5.5), from plans.
//
// The paper runs a first iteration in an oversized pool, records the
// smallest gap between the main space's two frontiers - the squeeze gap -
// and sizes the pool as
//     main        = (init - squeeze_gap) + beta
//     incremental = the most the incremental space held,
// restarting an iteration that fails with beta more. A plan is that first
// iteration, event for event, without a device, so here the sizing is known
// before training - and so are the numbers the paper's trial and error
// stands for: whether the sized pool runs, the planner's exact minimum
// budget for GTBM, and the smallest beta' with which the pool runs.
#ifndef SPILL_MEMORY_PLANNING_POOL_SIZING_H_
#define SPILL_MEMORY_PLANNING_POOL_SIZING_H_

#include <cstddef>

#include "framework/schedule/network_view.h"
#include "memory/memory_options.h"

namespace spill {

// The paper's choice (Table 2), its "MB" read as MiB.
constexpr size_t kDefaultBeta = size_t{300} << 20;

struct PoolSizing {
  size_t init = 0;         // the profiled iteration's budget
  size_t init_main = 0;    // of which the main space
  size_t squeeze_gap = 0;  // least free gap between the frontiers
  size_t incremental = 0;  // the incremental space's peak
  size_t beta = 0;
  bool runs = false;         // an iteration fits in pool()
  size_t minimum = 0;        // the planner's exact minimum budget for GTBM
  size_t smallest_beta = 0;  // the least beta' (to a block) with which the pool runs

  // The sized pool without beta: GTBM's footprint in the profiled iteration.
  size_t squeezed() const { return init_main - squeeze_gap + incremental; }
  size_t main() const { return init_main - squeeze_gap + beta; }
  size_t pool() const { return main() + incremental; }
};

// Sizes the pool for `options` (whose allocator must be gtbm) from an
// iteration planned at `options.device_budget`, then checks the sized pool,
// finds the exact minimum and the smallest beta'.
StatusOr<PoolSizing> SizeGtbmPool(const NetworkView& view, const MemoryOptions& options,
                                  size_t beta);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNING_POOL_SIZING_H_
