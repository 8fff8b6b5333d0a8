// A timeline drawn as SVG: the compute, copy and host lanes (one box per
// slice, coloured by kind, with a tooltip), above the device memory in use
// by category (stacked) and the host bytes holding offloaded tensors, on one
// time axis.
#ifndef SPILL_MEMORY_REPORT_TIMELINE_SVG_H_
#define SPILL_MEMORY_REPORT_TIMELINE_SVG_H_

#include <string>

#include "memory/sim/timeline.h"

namespace spill {

std::string TimelineSvg(const Timeline& timeline);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_TIMELINE_SVG_H_
