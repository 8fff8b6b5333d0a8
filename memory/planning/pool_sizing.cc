#include "memory/planning/pool_sizing.h"

#include <algorithm>

#include "memory/allocators/gtbm_allocator.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"

namespace spill {
namespace {

// Where beta' is looked for when even beta does not run: doublings of beta.
constexpr int kMaxDoublings = 20;

StatusOr<bool> Runs(const NetworkView& view, MemoryOptions options, size_t budget) {
  options.device_budget = budget;
  options.record_events = false;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
  return plan.fits;
}

// The least extra (whole blocks) over `base` with which a plan fits; `known`
// is one that does (0: none known yet).
StatusOr<size_t> SmallestExtra(const NetworkView& view, const MemoryOptions& options, size_t base,
                               size_t known) {
  SPILL_ASSIGN_OR_RETURN(bool at_base, Runs(view, options, base));
  if (at_base) return size_t{0};
  size_t lo = 0, hi = std::max(known, kPoolBlockBytes);
  for (int i = 0;; ++i) {
    SPILL_ASSIGN_OR_RETURN(bool fits, Runs(view, options, base + hi));
    if (fits) break;
    if (i == kMaxDoublings) return OutOfMemory("no beta up to " + std::to_string(hi) + " runs");
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > kPoolBlockBytes) {
    const size_t mid = RoundToBlocks(lo + (hi - lo) / 2);
    if (mid >= hi) break;
    SPILL_ASSIGN_OR_RETURN(bool fits, Runs(view, options, base + mid));
    (fits ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

StatusOr<PoolSizing> SizeGtbmPool(const NetworkView& view, const MemoryOptions& options,
                                  size_t beta) {
  const AllocatorInfo* info = FindAllocator(options.allocator);
  if (info == nullptr || !info->sizes_pool) {
    return InvalidArgument("the " + options.allocator + " allocator does not size its pool");
  }
  PoolSizing sizing;
  sizing.init = options.device_budget;
  sizing.beta = RoundToBlocks(beta);
  SPILL_ASSIGN_OR_RETURN(MemoryPlan profiled, Plan(view, options, [&](const MemoryRuntime& r) {
                           const auto& gtbm = dynamic_cast<const GtbmAllocator&>(r.allocator());
                           sizing.init_main = gtbm.main_size();
                           sizing.squeeze_gap = gtbm.squeeze_gap();
                           sizing.incremental = gtbm.incremental_peak();
                         }));
  if (!profiled.fits) {
    return OutOfMemory("the profiled iteration does not fit in its pool: " + profiled.failure);
  }
  SPILL_ASSIGN_OR_RETURN(sizing.runs, Runs(view, options, sizing.pool()));
  SPILL_ASSIGN_OR_RETURN(sizing.minimum, MinimumBudget(view, options, kPoolBlockBytes));
  const size_t base = sizing.init_main - sizing.squeeze_gap + sizing.incremental;
  SPILL_ASSIGN_OR_RETURN(sizing.smallest_beta,
                         SmallestExtra(view, options, base, sizing.runs ? sizing.beta : 0));
  return sizing;
}

}  // namespace spill
