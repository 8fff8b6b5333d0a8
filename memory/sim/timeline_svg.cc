#include "memory/sim/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <vector>

#include "framework/units.h"

namespace spill {
namespace {

constexpr double kWidth = 1200, kLeft = 110, kRight = 20, kTop = 40, kRightAxis = 100;
constexpr double kLaneHeight = 26, kLaneGap = 6, kMemoryHeight = 220, kAxisHeight = 40;
constexpr double kLegendRow = 20, kLegendKind = 100, kLegendCategory = 160;
constexpr double kMillisecondsPerSecond = 1e3;

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

std::string Escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

struct Frame {
  double seconds;  // the time axis' extent
  double X(double t) const { return kLeft + (kWidth - kLeft - kRight) * t / seconds; }
};

void DrawLanes(const Timeline& timeline, const Frame& frame, std::ostringstream& svg) {
  for (Lane lane : {Lane::kCompute, Lane::kCopy, Lane::kHost}) {
    const double y = kTop + static_cast<int>(lane) * (kLaneHeight + kLaneGap);
    svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << y + kLaneHeight * 0.65
        << "\" text-anchor=\"end\">" << LaneName(lane) << "</text>\n";
    svg << "<rect x=\"" << kLeft << "\" y=\"" << y << "\" width=\"" << kWidth - kLeft - kRight
        << "\" height=\"" << kLaneHeight << "\" fill=\"#f4f4f4\"/>\n";
    for (const TimelineSlice& s : timeline.slices) {
      if (s.lane != lane) continue;
      const double x = frame.X(s.start), w = std::max(0.5, frame.X(s.start + s.duration) - x);
      char tip[96];
      std::snprintf(tip, sizeof(tip), ": %.3f ms at %.3f ms", s.duration * kMillisecondsPerSecond,
                    s.start * kMillisecondsPerSecond);
      svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\""
          << kLaneHeight << "\" fill=\"" << SliceColour(s.category) << "\"><title>"
          << Escaped(s.name) << tip << "</title></rect>\n";
    }
  }
}

// Device bytes on the left axis, host bytes (dashed) on the right one: the
// host can hold far more than the device.
void DrawMemory(const Timeline& timeline, const Frame& frame, double top, std::ostringstream& svg) {
  size_t most = 1, most_host = 1;
  for (const MemorySample& m : timeline.memory) {
    size_t total = 0;
    for (size_t b : m.device) total += b;
    most = std::max(most, total);
    most_host = std::max(most_host, m.host);
  }
  auto y = [&](double bytes, size_t scale) { return top + kMemoryHeight * (1 - bytes / scale); };
  // Of samples that fall on the same tenth of a pixel, the last one shows.
  std::vector<MemorySample> shown;
  for (size_t i = 0; i < timeline.memory.size(); ++i) {
    const bool last = i + 1 == timeline.memory.size();
    if (last || std::lround(10 * frame.X(timeline.memory[i + 1].time)) !=
                    std::lround(10 * frame.X(timeline.memory[i].time))) {
      shown.push_back(timeline.memory[i]);
    }
  }
  // Stacked categories, drawn as steps from the top of the stack down.
  for (int c = kNumCategories - 1; c >= 0; --c) {
    std::ostringstream points;
    points << std::fixed << std::setprecision(1);
    points << frame.X(0) << "," << y(0, most) << " ";
    double previous = y(0, most);
    for (const MemorySample& m : shown) {
      double stacked = 0;
      for (int k = 0; k <= c; ++k) stacked += m.device[k];
      points << frame.X(m.time) << "," << previous << " " << frame.X(m.time) << ","
             << y(stacked, most) << " ";
      previous = y(stacked, most);
    }
    points << frame.X(frame.seconds) << "," << previous << " " << frame.X(frame.seconds) << ","
           << y(0, most);
    svg << "<polygon points=\"" << points.str() << "\" fill=\"" << kCategoryColours[c]
        << "\"><title>" << MemoryCategoryName(static_cast<MemoryCategory>(c))
        << "</title></polygon>\n";
  }
  std::ostringstream host;
  host << std::fixed << std::setprecision(1);
  for (const MemorySample& m : shown) {
    host << frame.X(m.time) << "," << y(m.host, most_host) << " ";
  }
  svg << "<polyline points=\"" << host.str()
      << "\" fill=\"none\" stroke=\"#222\" stroke-dasharray=\"4 3\"><title>host memory "
         "(offloaded)</title></polyline>\n";
  const double right = kWidth - kRight + 6;
  svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << top + 12 << "\" text-anchor=\"end\">"
      << FormatBytes(static_cast<double>(most)) << "</text>\n"
      << "<text x=\"" << kLeft - 8 << "\" y=\"" << top + 28
      << "\" text-anchor=\"end\">device</text>\n"
      << "<text x=\"" << kLeft - 8 << "\" y=\"" << top + kMemoryHeight
      << "\" text-anchor=\"end\">0</text>\n"
      << "<text x=\"" << right << "\" y=\"" << top + 12 << "\">"
      << FormatBytes(static_cast<double>(most_host)) << "</text>\n"
      << "<text x=\"" << right << "\" y=\"" << top + 28 << "\">host (dashed)</text>\n";
}

void DrawAxis(const Frame& frame, double top, std::ostringstream& svg) {
  const double ms = frame.seconds * kMillisecondsPerSecond;
  double tick = 1e-3;
  while (ms / tick > 10) tick *= ms / tick > 50 ? 10 : (ms / tick > 20 ? 5 : 2);
  for (double t = 0; t <= ms + 1e-9; t += tick) {
    const double x = frame.X(t / kMillisecondsPerSecond);
    char label[32];
    std::snprintf(label, sizeof(label), "%g", t);
    svg << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\"" << top + 5
        << "\" stroke=\"#333\"/><text x=\"" << x << "\" y=\"" << top + 18
        << "\" text-anchor=\"middle\">" << label << "</text>\n";
  }
  svg << "<text x=\"" << kWidth / 2 << "\" y=\"" << top + 34
      << "\" text-anchor=\"middle\">milliseconds</text>\n";
}

void LegendItem(double x, double y, const char* colour, const char* label,
                std::ostringstream& svg) {
  svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"12\" height=\"12\" fill=\"" << colour
      << "\"/><text x=\"" << x + 16 << "\" y=\"" << y + 11 << "\">" << label << "</text>\n";
}

// Slice kinds on the first row, memory categories on the second.
void DrawLegend(double top, std::ostringstream& svg) {
  double x = kLeft;
  for (const char* kind : {"forward", "backward", "recompute", "update", "offload", "prefetch",
                           "compact", "map", "wait"}) {
    LegendItem(x, top, SliceColour(kind), kind, svg);
    x += kLegendKind;
  }
  x = kLeft;
  for (int c = 0; c < kNumCategories; ++c) {
    LegendItem(x, top + kLegendRow, kCategoryColours[c],
               MemoryCategoryName(static_cast<MemoryCategory>(c)), svg);
    x += kLegendCategory;
  }
}

}  // namespace

std::string TimelineSvg(const Timeline& timeline) {
  const Frame frame{std::max(timeline.seconds, 1e-9)};
  const double memory_top = kTop + 3 * (kLaneHeight + kLaneGap) + 10;
  const double axis_top = memory_top + kMemoryHeight + 4;
  const double height = axis_top + kAxisHeight + 2 * kLegendRow + 10;
  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1);  // a tenth of a pixel is enough
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth + kRightAxis
      << "\" height=\"" << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  char title[64];
  std::snprintf(title, sizeof(title), " - %.1f ms per iteration",
                timeline.seconds * kMillisecondsPerSecond);
  svg << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"15\">" << Escaped(timeline.title)
      << title << "</text>\n";
  DrawLanes(timeline, frame, svg);
  DrawMemory(timeline, frame, memory_top, svg);
  DrawAxis(frame, axis_top, svg);
  DrawLegend(axis_top + kAxisHeight, svg);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace spill
