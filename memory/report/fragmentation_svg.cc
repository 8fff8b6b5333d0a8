#include "memory/report/fragmentation_svg.h"

#include <algorithm>
#include <cstdio>

#include "memory/report/svg.h"

namespace spill {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The plot's geometry, in SVG user units.
constexpr double kWidth = 1000, kLeft = 80, kRight = 280, kTop = 40;
constexpr double kFootprintHeight = 300, kGap = 50, kUnusableHeight = 180, kBottom = 50;
constexpr double kHeadroom = 1.05;  // the highest curve stays below the frame
constexpr int kYTicks = 5;
const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
constexpr int kNumColours = 6;

struct Panels {
  Scale x;          // steps
  Scale footprint;  // bytes, upper panel
  Scale unusable;   // U_f, lower panel
};

// A framed panel with its left axis and the forward/backward divide.
void Panel(SvgDocument& svg, const Panels& p, const AxisSpec& axis) {
  svg.Rect(p.x.from, axis.scale.to, p.x.to - p.x.from, axis.scale.from - axis.scale.to, "none", "",
           "stroke=\"black\"");
  DrawAxis(svg, axis);
  const double middle = p.x(p.x.hi / 2);
  svg.Line(middle, axis.scale.to, middle, axis.scale.from, "#999", "stroke-dasharray=\"4 4\"");
}

void Curves(SvgDocument& svg, const Panels& p, const FragmentationProfile& profile,
            const char* colour) {
  Points footprint;
  for (size_t s = 0; s < profile.footprint.size(); ++s) {
    footprint.push_back({p.x(s), p.footprint(profile.footprint[s])});
  }
  svg.Polyline(footprint, colour, "stroke-width=\"2\"");
  for (const FragmentationProfile::Point& pt : profile.unusable) {
    svg.Circle(p.x(pt.x), p.unusable(pt.unusable_free), 1.5, colour, "fill-opacity=\"0.35\"");
  }
  Points mean;
  for (size_t s = 0; s < profile.step_unusable.size(); ++s) {
    mean.push_back({p.x(s + 0.5), p.unusable(profile.step_unusable[s])});
  }
  svg.Polyline(mean, colour, "stroke-width=\"1.5\"");
}

}  // namespace

std::string FragmentationSvg(const std::vector<FragmentationProfile>& profiles,
                             const std::string& title) {
  double steps = 1, max_bytes = 1;
  for (const FragmentationProfile& p : profiles) {
    steps = std::max(steps, static_cast<double>(p.footprint.size()));
    max_bytes = std::max(max_bytes, static_cast<double>(p.peak));
  }
  const double plot_w = kWidth - kLeft - kRight;
  const double unusable_top = kTop + kFootprintHeight + kGap;
  const double height = unusable_top + kUnusableHeight + kBottom;
  const Panels p{{0, steps, kLeft, kLeft + plot_w},
                 {0, max_bytes * kHeadroom, kTop + kFootprintHeight, kTop},
                 {0, 1, unusable_top + kUnusableHeight, unusable_top}};
  SvgDocument svg(kWidth, height);
  svg.Text(kWidth / 2, 22, title, "text-anchor=\"middle\" font-size=\"15\"");
  Panel(svg, p,
        {AxisSide::kLeft, p.footprint, kLeft, EvenTicks(0, p.footprint.hi, kYTicks), kMiB, "%.0f",
         "footprint (MiB)", false});
  Panel(svg, p,
        {AxisSide::kLeft,
         p.unusable,
         kLeft,
         {0.0, 0.5, 1.0},
         1,
         "%.1f",
         "U_f per allocation",
         false});
  svg.Text(kLeft + plot_w / 2, height - 14, "step (forward 1..N, backward N+1..2N)",
           "text-anchor=\"middle\"");
  for (size_t k = 0; k < profiles.size(); ++k) {
    const FragmentationProfile& profile = profiles[k];
    const char* colour = kColours[k % kNumColours];
    Curves(svg, p, profile, colour);
    char numbers[96];
    std::snprintf(numbers, sizeof(numbers), "peak %.1f MiB, mean U_f %.3f", profile.peak / kMiB,
                  profile.mean_unusable);
    const double ly = kTop + 16 + 36 * k, lx = kLeft + plot_w + 12;
    svg.LegendEntry(lx, ly, colour, profile.label);
    svg.Text(lx + 24, ly + 15, numbers, "font-size=\"11\"");
  }
  return svg.Finish();
}

}  // namespace spill
