// SVG drawing shared by the plots spill writes: memory per step
// (memory_plot), fragmentation per step (fragmentation_svg) and the
// simulated timeline (timeline_svg). One document builder that escapes text
// once, a linear scale from data to pixels, and one axis helper, so every
// plot labels its axes the same way.
#ifndef SPILL_MEMORY_REPORT_SVG_H_
#define SPILL_MEMORY_REPORT_SVG_H_

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace spill {

// Text safe inside an SVG (XML) or HTML element or attribute.
std::string XmlEscaped(const std::string& text);

// A linear map from the data interval [lo, hi] to pixels [from, to]; for a
// vertical axis `to` lies above `from` (smaller y).
struct Scale {
  double lo = 0, hi = 1;
  double from = 0, to = 1;
  double operator()(double value) const;
};

using Points = std::vector<std::pair<double, double>>;

class SvgDocument {
 public:
  // A white page of the given size in user units (pixels).
  SvgDocument(double width, double height);

  // Text at (x, y); `attributes` are written into the element as they are.
  void Text(double x, double y, const std::string& text, const std::string& attributes = "");
  void Line(double x1, double y1, double x2, double y2, const std::string& stroke,
            const std::string& attributes = "");
  // A rectangle; a non-empty `tooltip` becomes its <title>.
  void Rect(double x, double y, double width, double height, const std::string& fill,
            const std::string& tooltip = "", const std::string& attributes = "");
  void Polyline(const Points& points, const std::string& stroke, const std::string& attributes);
  void Polygon(const Points& points, const std::string& fill, const std::string& tooltip);
  void Circle(double cx, double cy, double r, const std::string& fill,
              const std::string& attributes = "");
  // A legend row: a short stroke (or a square, when `square`) in `colour`,
  // then the label.
  void LegendEntry(double x, double y, const std::string& colour, const std::string& label,
                   bool square = false);

  std::string Finish();

 private:
  std::ostringstream out_;
};

// Which edge of the plot an axis runs along.
enum class AxisSide { kLeft, kBottom };

struct AxisSpec {
  AxisSide side = AxisSide::kLeft;
  Scale scale;                // data to pixels along the axis
  double at = 0;              // the pixel position of the axis line across it
  std::vector<double> ticks;  // data values to label
  double divisor = 1;         // a label shows value / divisor ...
  const char* format = "%g";  // ... printed with this format
  std::string label;          // the axis title
  bool line = true;           // draw the axis line itself
};

// Tick values from lo to hi: `count` + 1 evenly spaced ones.
std::vector<double> EvenTicks(double lo, double hi, int count);
// Tick values from 0 to hi at a 1-2-5 step that gives at most about `most`.
std::vector<double> RoundTicks(double hi, int most);

void DrawAxis(SvgDocument& svg, const AxisSpec& axis);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_SVG_H_
