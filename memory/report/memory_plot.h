// Memory per step as SVG: one curve per memory log, like figure 10 of the
// SuperNeurons paper (`plan --svg`).
#ifndef SPILL_MEMORY_REPORT_MEMORY_PLOT_H_
#define SPILL_MEMORY_REPORT_MEMORY_PLOT_H_

#include <string>
#include <vector>

#include "memory/memory_log.h"

namespace spill {

// An SVG line plot of each log's peak per step, with its mode and peak in
// the legend.
std::string MemoryPlotSvg(const std::vector<MemoryLog>& logs, const std::string& title);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_MEMORY_PLOT_H_
