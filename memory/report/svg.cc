#include "memory/report/svg.h"

#include <cmath>
#include <cstdio>
#include <iomanip>

namespace spill {
namespace {

// Where axis labels sit relative to the axis, in pixels.
constexpr double kLabelGap = 6, kLabelBaseline = 4, kTickLength = 5;
constexpr double kBottomLabel = 18, kBottomTitle = 34, kLeftTitleX = 20;

void WritePoints(std::ostringstream& out, const Points& points) {
  for (size_t i = 0; i < points.size(); ++i) {
    out << (i ? " " : "") << points[i].first << "," << points[i].second;
  }
}

std::string Label(const AxisSpec& axis, double value) {
  char text[48];
  std::snprintf(text, sizeof(text), axis.format, value / axis.divisor);
  return text;
}

}  // namespace

std::string XmlEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double Scale::operator()(double value) const {
  const double span = hi - lo > 0 ? hi - lo : 1;
  return from + (to - from) * (value - lo) / span;
}

SvgDocument::SvgDocument(double width, double height) {
  out_ << std::fixed << std::setprecision(1);  // a tenth of a pixel is enough
  out_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
       << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
       << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

void SvgDocument::Text(double x, double y, const std::string& text, const std::string& attributes) {
  out_ << "<text x=\"" << x << "\" y=\"" << y << "\""
       << (attributes.empty() ? "" : " " + attributes) << ">" << XmlEscaped(text) << "</text>\n";
}

void SvgDocument::Line(double x1, double y1, double x2, double y2, const std::string& stroke,
                       const std::string& attributes) {
  out_ << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
       << "\" stroke=\"" << stroke << "\"" << (attributes.empty() ? "" : " " + attributes)
       << "/>\n";
}

void SvgDocument::Rect(double x, double y, double width, double height, const std::string& fill,
                       const std::string& tooltip, const std::string& attributes) {
  out_ << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << width << "\" height=\"" << height
       << "\" fill=\"" << fill << "\"" << (attributes.empty() ? "" : " " + attributes);
  if (tooltip.empty()) {
    out_ << "/>\n";
  } else {
    out_ << "><title>" << XmlEscaped(tooltip) << "</title></rect>\n";
  }
}

void SvgDocument::Polyline(const Points& points, const std::string& stroke,
                           const std::string& attributes) {
  out_ << "<polyline fill=\"none\" stroke=\"" << stroke << "\""
       << (attributes.empty() ? "" : " " + attributes) << " points=\"";
  WritePoints(out_, points);
  out_ << "\"/>\n";
}

void SvgDocument::Polygon(const Points& points, const std::string& fill,
                          const std::string& tooltip) {
  out_ << "<polygon points=\"";
  WritePoints(out_, points);
  out_ << "\" fill=\"" << fill << "\"><title>" << XmlEscaped(tooltip) << "</title></polygon>\n";
}

void SvgDocument::Circle(double cx, double cy, double r, const std::string& fill,
                         const std::string& attributes) {
  out_ << "<circle cx=\"" << cx << "\" cy=\"" << cy << "\" r=\"" << r << "\" fill=\"" << fill
       << "\"" << (attributes.empty() ? "" : " " + attributes) << "/>\n";
}

void SvgDocument::LegendEntry(double x, double y, const std::string& colour,
                              const std::string& label, bool square) {
  constexpr double kStroke = 20, kSquare = 12, kGap = 4;
  if (square) {
    Rect(x, y - kSquare + 1, kSquare, kSquare, colour);
    Text(x + kSquare + kGap, y, label);
  } else {
    Line(x, y - 4, x + kStroke, y - 4, colour, "stroke-width=\"2\"");
    Text(x + kStroke + kGap, y, label);
  }
}

std::string SvgDocument::Finish() {
  out_ << "</svg>\n";
  return out_.str();
}

std::vector<double> EvenTicks(double lo, double hi, int count) {
  std::vector<double> ticks;
  for (int i = 0; i <= count; ++i) ticks.push_back(lo + (hi - lo) * i / count);
  return ticks;
}

std::vector<double> RoundTicks(double hi, int most) {
  double step = 1e-3;
  while (hi / step > most) step *= hi / step > 5 * most ? 10 : (hi / step > 2 * most ? 5 : 2);
  std::vector<double> ticks;
  for (double t = 0; t <= hi + 1e-9 * step; t += step) ticks.push_back(t);
  return ticks;
}

void DrawAxis(SvgDocument& svg, const AxisSpec& axis) {
  const Scale& s = axis.scale;
  if (axis.side == AxisSide::kLeft) {
    if (axis.line) svg.Line(axis.at, s.from, axis.at, s.to, "black");
    for (double v : axis.ticks) {
      svg.Text(axis.at - kLabelGap, s(v) + kLabelBaseline, Label(axis, v), "text-anchor=\"end\"");
    }
    const double middle = (s.from + s.to) / 2;
    char rotate[64];
    std::snprintf(rotate, sizeof(rotate), "transform=\"rotate(-90 %.1f %.1f)\"", kLeftTitleX,
                  middle);
    svg.Text(kLeftTitleX, middle, axis.label, std::string(rotate) + " text-anchor=\"middle\"");
    return;
  }
  if (axis.line) svg.Line(s.from, axis.at, s.to, axis.at, "black");
  for (double v : axis.ticks) {
    svg.Line(s(v), axis.at, s(v), axis.at + kTickLength, "#333");
    svg.Text(s(v), axis.at + kBottomLabel, Label(axis, v), "text-anchor=\"middle\"");
  }
  svg.Text((s.from + s.to) / 2, axis.at + kBottomTitle, axis.label, "text-anchor=\"middle\"");
}

}  // namespace spill
