#include "memory/fragmentation.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace spill {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The plot's geometry, in SVG user units.
constexpr double kWidth = 1000, kLeft = 80, kRight = 280, kTop = 40;
constexpr double kFootprintHeight = 300, kGap = 50, kUnusableHeight = 180, kBottom = 50;
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
constexpr int kNumColors = 6;

struct Axes {
  double steps;
  double max_bytes;
  double plot_w() const { return kWidth - kLeft - kRight; }
  double x(double step) const { return kLeft + plot_w() * step / std::max(1.0, steps); }
  double y_bytes(double bytes) const {
    return kTop + kFootprintHeight * (1 - bytes / (max_bytes * 1.05));
  }
  double y_unusable(double u) const {
    return kTop + kFootprintHeight + kGap + kUnusableHeight * (1 - u);
  }
};

void Frame(std::ostringstream& svg, const Axes& a, double top, double height, const char* label) {
  svg << "<rect x=\"" << kLeft << "\" y=\"" << top << "\" width=\"" << a.plot_w() << "\" height=\""
      << height << "\" fill=\"none\" stroke=\"black\"/>\n"
      << "<text x=\"20\" y=\"" << top + height / 2 << "\" transform=\"rotate(-90 20 "
      << top + height / 2 << ")\" text-anchor=\"middle\">" << label << "</text>\n";
  // The forward/backward divide.
  const double mid = a.x(a.steps / 2);
  svg << "<line x1=\"" << mid << "\" y1=\"" << top << "\" x2=\"" << mid << "\" y2=\""
      << top + height << "\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n";
}

void Ticks(std::ostringstream& svg, const Axes& a) {
  char label[32];
  for (int i = 0; i <= 5; ++i) {
    const double bytes = a.max_bytes * 1.05 * i / 5;
    std::snprintf(label, sizeof(label), "%.0f", bytes / kMiB);
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << a.y_bytes(bytes) + 4
        << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
  for (double u : {0.0, 0.5, 1.0}) {
    std::snprintf(label, sizeof(label), "%.1f", u);
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << a.y_unusable(u) + 4
        << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
}

void Curves(std::ostringstream& svg, const Axes& a, const FragmentationProfile& p,
            const char* color) {
  svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
  for (size_t s = 0; s < p.footprint.size(); ++s) {
    svg << a.x(s) << "," << a.y_bytes(p.footprint[s]) << " ";
  }
  svg << "\"/>\n";
  for (const FragmentationProfile::Point& pt : p.unusable) {
    svg << "<circle cx=\"" << a.x(pt.x) << "\" cy=\"" << a.y_unusable(pt.unusable_free)
        << "\" r=\"1.5\" fill=\"" << color << "\" fill-opacity=\"0.35\"/>\n";
  }
  svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
  for (size_t s = 0; s < p.step_unusable.size(); ++s) {
    svg << a.x(s + 0.5) << "," << a.y_unusable(p.step_unusable[s]) << " ";
  }
  svg << "\"/>\n";
}

}  // namespace

FragmentationProfile MeasureFragmentation(const std::vector<MemoryEvent>& events, int steps,
                                          const std::string& label) {
  FragmentationProfile p;
  p.label = label;
  p.footprint.assign(steps, 0);
  p.step_unusable.assign(steps, 0);
  std::vector<int> allocations(steps, 0);
  for (const MemoryEvent& e : events) {
    if (e.type == MemoryEventType::kAlloc && e.step >= 0 && e.step < steps) ++allocations[e.step];
  }
  size_t extent = 0;
  int step = -1, seen = 0, total = 0;
  for (const MemoryEvent& e : events) {
    if (e.type != MemoryEventType::kAlloc && e.type != MemoryEventType::kFree) continue;
    if (e.step >= 0 && e.step < steps) {
      // Steps without allocations or frees span what the last event left.
      while (step < e.step) {
        ++step;
        p.footprint[step] = extent;
        seen = 0;
      }
    }
    extent = e.extent;
    if (e.step < 0 || e.step >= steps) continue;
    p.footprint[e.step] = std::max(p.footprint[e.step], extent);
    if (e.type != MemoryEventType::kAlloc) continue;
    ++seen;
    ++total;
    p.unusable.push_back(
        {e.step + static_cast<double>(seen) / (allocations[e.step] + 1), e.unusable_free});
    p.step_unusable[e.step] += e.unusable_free / allocations[e.step];
    p.mean_unusable += e.unusable_free;
  }
  while (++step < steps) p.footprint[step] = extent;
  if (total > 0) p.mean_unusable /= total;
  for (int s = 0; s < steps; ++s) {
    if (p.footprint[s] > p.peak) {
      p.peak = p.footprint[s];
      p.peak_step = s;
    }
  }
  if (p.peak_step >= 0) p.peak_unusable = p.step_unusable[p.peak_step];
  return p;
}

std::string FragmentationSvg(const std::vector<FragmentationProfile>& profiles,
                             const std::string& title) {
  Axes a{1, 1};
  for (const FragmentationProfile& p : profiles) {
    a.steps = std::max(a.steps, static_cast<double>(p.footprint.size()));
    a.max_bytes = std::max(a.max_bytes, static_cast<double>(p.peak));
  }
  const double height = kTop + kFootprintHeight + kGap + kUnusableHeight + kBottom;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << title << "</text>\n";
  Frame(svg, a, kTop, kFootprintHeight, "footprint (MiB)");
  Frame(svg, a, kTop + kFootprintHeight + kGap, kUnusableHeight, "U_f per allocation");
  Ticks(svg, a);
  svg << "<text x=\"" << kLeft + a.plot_w() / 2 << "\" y=\"" << height - 14
      << "\" text-anchor=\"middle\">step (forward 1..N, backward N+1..2N)</text>\n";
  for (size_t k = 0; k < profiles.size(); ++k) {
    const FragmentationProfile& p = profiles[k];
    const char* color = kColors[k % kNumColors];
    Curves(svg, a, p, color);
    char numbers[96];
    std::snprintf(numbers, sizeof(numbers), "peak %.1f MiB, mean U_f %.3f", p.peak / kMiB,
                  p.mean_unusable);
    const double ly = kTop + 16 + 36 * k, lx = kLeft + a.plot_w() + 12;
    svg << "<line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 20 << "\" y2=\""
        << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n<text x=\"" << lx + 24
        << "\" y=\"" << ly << "\">" << p.label << "</text>\n<text x=\"" << lx + 24 << "\" y=\""
        << ly + 15 << "\" font-size=\"11\">" << numbers << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace spill
