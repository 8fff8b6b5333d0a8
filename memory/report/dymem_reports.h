// What `plan` reports for Dymem's questions: fragmentation per step under
// several allocators in one pool (footprint and U_f, like the paper's
// Fig. 15), and GTBM's pool sizing with beta (memory/planning/pool_sizing.h).
#ifndef SPILL_MEMORY_REPORT_DYMEM_REPORTS_H_
#define SPILL_MEMORY_REPORT_DYMEM_REPORTS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/fragmentation.h"
#include "memory/memory_options.h"
#include "memory/planning/pool_sizing.h"

namespace spill {

struct FragmentationComparison {
  size_t pool = 0;  // the one budget every allocator ran in
  std::vector<FragmentationProfile> profiles;
  std::vector<std::string> failures;  // allocators that did not fit in the pool
};

// `options`' iteration, without compaction, under each of `allocators` in
// one pool: `pool`, or when 0 the largest of their unlimited footprints,
// grown until every one fits (so that U_f is measured against the same free
// memory).
StatusOr<FragmentationComparison> CompareFragmentation(const NetworkView& view,
                                                       MemoryOptions options,
                                                       const std::vector<std::string>& allocators,
                                                       size_t pool);

std::string FragmentationText(const FragmentationComparison& comparison);
std::string PoolSizingText(const PoolSizing& sizing);
nlohmann::ordered_json PoolSizingJson(const PoolSizing& sizing);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_DYMEM_REPORTS_H_
