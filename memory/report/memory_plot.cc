#include "memory/report/memory_plot.h"

#include <algorithm>
#include <cstdio>

#include "memory/report/svg.h"

namespace spill {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The plot's geometry, in SVG user units.
constexpr double kWidth = 1000, kHeight = 480, kLeft = 80, kRight = 270, kTop = 40, kBottom = 50;
constexpr double kHeadroom = 1.05;  // the highest curve stays below the top edge
constexpr int kYTicks = 5;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
constexpr int kNumColours = 6;

}  // namespace

std::string MemoryPlotSvg(const std::vector<MemoryLog>& logs, const std::string& title) {
  size_t max_steps = 1;
  double max_bytes = 1;
  for (const MemoryLog& log : logs) {
    max_steps = std::max(max_steps, log.steps.size());
    for (const StepRecord& r : log.steps)
      max_bytes = std::max(max_bytes, static_cast<double>(r.peak));
  }
  const double plot_w = kWidth - kLeft - kRight, bottom = kHeight - kBottom;
  const Scale x{0, std::max<double>(1, max_steps - 1), kLeft, kLeft + plot_w};
  const Scale y{0, max_bytes * kHeadroom, bottom, kTop};
  SvgDocument svg(kWidth, kHeight);
  svg.Text(kWidth / 2, 22, title, "text-anchor=\"middle\" font-size=\"15\"");
  AxisSpec bytes{AxisSide::kLeft,      y, kLeft, EvenTicks(0, y.hi, kYTicks), kMiB, "%.0f",
                 "device memory (MiB)"};
  DrawAxis(svg, bytes);
  AxisSpec steps{
      AxisSide::kBottom, x, bottom, {}, 1, "%g", "step (forward 1..N, backward N+1..2N)"};
  DrawAxis(svg, steps);
  if (max_steps > 1) {  // the forward/backward divide
    const double middle = x((max_steps - 1) / 2.0);
    svg.Line(middle, kTop, middle, bottom, "#999", "stroke-dasharray=\"4 4\"");
  }
  for (size_t k = 0; k < logs.size(); ++k) {
    const char* colour = kColours[k % kNumColours];
    Points curve;
    for (const StepRecord& r : logs[k].steps) curve.push_back({x(r.step), y(r.peak)});
    svg.Polyline(curve, colour, "stroke-width=\"2\"");
    char peak[48];
    std::snprintf(peak, sizeof(peak), " %.1f MiB", logs[k].peak / kMiB);
    svg.LegendEntry(kLeft + plot_w + 12, kTop + 16 + 20 * k, colour, logs[k].mode + peak);
  }
  return svg.Finish();
}

}  // namespace spill
