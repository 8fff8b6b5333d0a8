#include "tools/bench/frontier_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace spill {
namespace {

constexpr double kWidth = 720, kHeight = 460;
constexpr double kLeft = 70, kRight = 190, kTop = 40, kBottom = 55;  // margins, px
constexpr int kTicks = 5;
// One per planner frontier_main measures (eleven), so that none share one.
constexpr const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf",
                                   "#7f7f7f", "#bcbd22", "#000000", "#aec7e8"};

// A round axis maximum at or above `value` (1, 2 or 5 times a power of ten).
double NiceCeiling(double value) {
  if (value <= 0) return 1;
  const double power = std::pow(10, std::floor(std::log10(value)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    if (step * power >= value) return step * power;
  }
  return 10 * power;
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

std::string FrontierSvg(const std::vector<FrontierSeries>& series, const std::string& title) {
  double max_x = 0, max_y = 0;
  for (const FrontierSeries& s : series) {
    for (const FrontierPoint& p : s.points) {
      max_x = std::max(max_x, 100 * p.reduction);
      max_y = std::max(max_y, 100 * p.overhead);
    }
  }
  max_x = NiceCeiling(max_x);
  max_y = NiceCeiling(max_y);
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](double reduction) { return kLeft + 100 * reduction / max_x * plot_w; };
  auto y = [&](double overhead) {
    return kTop + plot_h - std::max(0.0, 100 * overhead) / max_y * plot_h;
  };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"14\">" << title << "</text>\n";
  for (int i = 0; i <= kTicks; ++i) {
    const double fx = max_x * i / kTicks, fy = max_y * i / kTicks;
    const double px = kLeft + plot_w * i / kTicks, py = kTop + plot_h - plot_h * i / kTicks;
    svg << "<line x1=\"" << px << "\" y1=\"" << kTop << "\" x2=\"" << px << "\" y2=\""
        << kTop + plot_h << "\" stroke=\"#eee\"/>\n";
    svg << "<line x1=\"" << kLeft << "\" y1=\"" << py << "\" x2=\"" << kLeft + plot_w << "\" y2=\""
        << py << "\" stroke=\"#eee\"/>\n";
    svg << "<text x=\"" << px << "\" y=\"" << kTop + plot_h + 18 << "\" text-anchor=\"middle\">"
        << Number(fx) << "</text>\n";
    svg << "<text x=\"" << kLeft - 8 << "\" y=\"" << py + 4 << "\" text-anchor=\"end\">"
        << Number(fy) << "</text>\n";
  }
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\""
      << plot_h << "\" fill=\"none\" stroke=\"black\"/>\n";
  svg << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 12
      << "\" text-anchor=\"middle\">memory reduction relative to liveness (%)</text>\n";
  svg << "<text transform=\"translate(18," << kTop + plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">overhead in iteration time (%)</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::vector<FrontierPoint> points = series[i].points;
    std::sort(points.begin(), points.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
      return a.reduction < b.reduction;
    });
    if (points.size() > 1) {
      svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
      for (const FrontierPoint& p : points) svg << x(p.reduction) << "," << y(p.overhead) << " ";
      svg << "\"/>\n";
    }
    for (const FrontierPoint& p : points) {
      svg << "<circle cx=\"" << x(p.reduction) << "\" cy=\"" << y(p.overhead)
          << "\" r=\"3.5\" fill=\"" << color << "\"/>\n";
    }
    const double ly = kTop + 16 + 20.0 * static_cast<double>(i);
    svg << "<circle cx=\"" << kWidth - kRight + 20 << "\" cy=\"" << ly - 4 << "\" r=\"4\" fill=\""
        << color << "\"/>\n";
    svg << "<text x=\"" << kWidth - kRight + 32 << "\" y=\"" << ly << "\">" << series[i].name
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace spill
