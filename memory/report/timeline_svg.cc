#include "memory/report/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include "framework/base/units.h"
#include "memory/report/svg.h"

namespace spill {
namespace {

constexpr double kWidth = 1200, kLeft = 150, kRight = 20, kTop = 40, kRightAxis = 100;
constexpr double kLaneHeight = 26, kLaneGap = 6, kMemoryHeight = 220, kAxisHeight = 40;
constexpr double kLegendRow = 20, kLegendKind = 100, kLegendCategory = 160;
constexpr double kMillisecondsPerSecond = 1e3;
constexpr int kMostTimeTicks = 10;

const char* SliceColour(const std::string& category) {
  if (category == "forward") return "#4e79a7";
  if (category == "backward") return "#59a14f";
  if (category == "recompute") return "#e15759";
  if (category == "update") return "#9c755f";
  if (category == "offload") return "#f28e2b";
  if (category == "prefetch") return "#76b7b2";
  if (category == "compact") return "#b07aa1";
  if (category == "map") return "#edc948";
  return "#bab0ac";  // waits
}

// Memory categories in greys (persistent) and warm colours (transient),
// apart from the slice colours above.
const char* const kCategoryColours[kNumCategories] = {"#5f5f5f", "#8f8f8f", "#bdbdbd",
                                                      "#edc948", "#ff9da7", "#9d7660"};

void DrawLanes(SvgDocument& svg, const Timeline& timeline, const Scale& x) {
  for (Lane lane : kLanes) {
    const double y = kTop + static_cast<int>(lane) * (kLaneHeight + kLaneGap);
    svg.Text(kLeft - 8, y + kLaneHeight * 0.65, LaneName(lane), "text-anchor=\"end\"");
    svg.Rect(kLeft, y, x.to - x.from, kLaneHeight, "#f4f4f4");
    for (const TimelineSlice& s : timeline.slices) {
      if (s.lane != lane) continue;
      const double left = x(s.start), w = std::max(0.5, x(s.start + s.duration) - left);
      char tip[96];
      std::snprintf(tip, sizeof(tip), ": %.3f ms at %.3f ms", s.duration * kMillisecondsPerSecond,
                    s.start * kMillisecondsPerSecond);
      svg.Rect(left, y, w, kLaneHeight, SliceColour(s.category), s.name + tip);
    }
  }
}

// Of samples that fall on the same tenth of a pixel, the last one shows.
std::vector<MemorySample> Visible(const Timeline& timeline, const Scale& x) {
  std::vector<MemorySample> shown;
  const std::vector<MemorySample>& all = timeline.memory;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i + 1 == all.size() ||
        std::lround(10 * x(all[i + 1].time)) != std::lround(10 * x(all[i].time))) {
      shown.push_back(all[i]);
    }
  }
  return shown;
}

// Device bytes on the left axis, host bytes (dashed) on the right one: the
// host can hold far more than the device.
void DrawMemory(SvgDocument& svg, const Timeline& timeline, const Scale& x, double top) {
  size_t most = 1, most_host = 1;
  for (const MemorySample& m : timeline.memory) {
    size_t total = 0;
    for (size_t b : m.device) total += b;
    most = std::max(most, total);
    most_host = std::max(most_host, m.host);
  }
  const Scale device{0, static_cast<double>(most), top + kMemoryHeight, top};
  const Scale host{0, static_cast<double>(most_host), top + kMemoryHeight, top};
  const std::vector<MemorySample> shown = Visible(timeline, x);
  // Stacked categories, drawn as steps from the top of the stack down.
  for (int c = kNumCategories - 1; c >= 0; --c) {
    Points points = {{x(x.lo), device(0)}};
    double previous = device(0);
    for (const MemorySample& m : shown) {
      double stacked = 0;
      for (int k = 0; k <= c; ++k) stacked += m.device[k];
      points.push_back({x(m.time), previous});
      points.push_back({x(m.time), device(stacked)});
      previous = device(stacked);
    }
    points.push_back({x(x.hi), previous});
    points.push_back({x(x.hi), device(0)});
    svg.Polygon(points, kCategoryColours[c], MemoryCategoryName(static_cast<MemoryCategory>(c)));
  }
  Points offloaded;
  for (const MemorySample& m : shown) offloaded.push_back({x(m.time), host(m.host)});
  svg.Polyline(offloaded, "#222", "stroke-dasharray=\"4 3\"");
  const double right = kWidth - kRight + 6;
  svg.Text(kLeft - 8, top + 12, FormatBytes(static_cast<double>(most)), "text-anchor=\"end\"");
  svg.Text(kLeft - 8, top + 28, "device", "text-anchor=\"end\"");
  svg.Text(kLeft - 8, top + kMemoryHeight, "0", "text-anchor=\"end\"");
  svg.Text(right, top + 12, FormatBytes(static_cast<double>(most_host)));
  svg.Text(right, top + 28, "host (dashed)");
}

// Slice kinds on the first row, memory categories on the second.
void DrawLegend(SvgDocument& svg, double top) {
  double x = kLeft;
  for (const char* kind : {"forward", "backward", "recompute", "update", "offload", "prefetch",
                           "compact", "map", "wait"}) {
    svg.LegendEntry(x, top + 11, SliceColour(kind), kind, true);
    x += kLegendKind;
  }
  x = kLeft;
  for (int c = 0; c < kNumCategories; ++c) {
    svg.LegendEntry(x, top + kLegendRow + 11, kCategoryColours[c],
                    MemoryCategoryName(static_cast<MemoryCategory>(c)), true);
    x += kLegendCategory;
  }
}

}  // namespace

std::string TimelineSvg(const Timeline& timeline) {
  const double seconds = std::max(timeline.seconds, 1e-9);
  const Scale x{0, seconds, kLeft, kWidth - kRight};
  const double memory_top = kTop + std::size(kLanes) * (kLaneHeight + kLaneGap) + 10;
  const double axis_top = memory_top + kMemoryHeight + 4;
  const double height = axis_top + kAxisHeight + 2 * kLegendRow + 10;
  SvgDocument svg(kWidth + kRightAxis, height);
  char title[64];
  std::snprintf(title, sizeof(title), " - %.1f ms per iteration",
                timeline.seconds * kMillisecondsPerSecond);
  svg.Text(kLeft, 24, timeline.title + title, "font-size=\"15\"");
  DrawLanes(svg, timeline, x);
  DrawMemory(svg, timeline, x, memory_top);
  const double ms = seconds * kMillisecondsPerSecond;
  std::vector<double> ticks;
  for (double t : RoundTicks(ms, kMostTimeTicks)) ticks.push_back(t / kMillisecondsPerSecond);
  DrawAxis(svg, {AxisSide::kBottom, x, axis_top, ticks, 1 / kMillisecondsPerSecond, "%g",
                 "milliseconds", false});
  DrawLegend(svg, axis_top + kAxisHeight);
  return svg.Finish();
}

}  // namespace spill
