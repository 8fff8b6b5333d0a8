// Fragmentation per step as SVG (`plan --fragmentation-svg`): Dymem's
// Fig. 15, one colour per allocator.
#ifndef SPILL_MEMORY_REPORT_FRAGMENTATION_SVG_H_
#define SPILL_MEMORY_REPORT_FRAGMENTATION_SVG_H_

#include <string>
#include <vector>

#include "memory/fragmentation.h"

namespace spill {

// Two panels over the steps: footprint (MiB) above, U_f per allocation and
// its per-step mean below; one colour per profile.
std::string FragmentationSvg(const std::vector<FragmentationProfile>& profiles,
                             const std::string& title);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_FRAGMENTATION_SVG_H_
