#include "framework/base/units.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace spill {
namespace {

std::string Quoted(const std::string& text) {
  constexpr size_t kShown = 60;  // long values are cut in messages
  return "'" + (text.size() > kShown ? text.substr(0, kShown) + "..." : text) + "'";
}

bool IsDecimal(const std::string& text) {
  size_t i = (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// Sizes up to 2^62 bytes convert to size_t exactly enough and far from overflow.
constexpr double kMaxByteSize = 4611686018427387904.0;

}  // namespace

StatusOr<int64_t> ParseInt64(const std::string& text) {
  if (text.empty() || !IsDecimal(text)) {
    return InvalidArgument("not an integer: " + Quoted(text));
  }
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') {
    return InvalidArgument("integer out of the 64-bit range: " + Quoted(text));
  }
  return static_cast<int64_t>(value);
}

StatusOr<double> ParseFiniteDouble(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) {
    return InvalidArgument("not a number: " + Quoted(text));
  }
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (*end != '\0') return InvalidArgument("not a number: " + Quoted(text));
  if (!std::isfinite(value) || (errno == ERANGE && std::fabs(value) > 1)) {
    return InvalidArgument("not a finite number: " + Quoted(text));
  }
  return value;
}

StatusOr<bool> ParseBool(const std::string& text) {
  for (const char* yes : {"true", "True", "TRUE", "yes", "Yes", "YES"}) {
    if (text == yes) return true;
  }
  for (const char* no : {"false", "False", "FALSE", "no", "No", "NO"}) {
    if (text == no) return false;
  }
  return InvalidArgument("not true or false: " + Quoted(text));
}

StatusOr<size_t> ParseBytes(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  double value = std::strtod(begin, &end);
  if (end == begin || value < 0 || !std::isfinite(value)) {
    return InvalidArgument("'" + text + "' is not a byte size (e.g. 2GiB, 512MiB, 1000000)");
  }
  std::string unit(end);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit kUnits[] = {{"", 1},
                                {"B", 1},
                                {"KB", 1e3},
                                {"MB", 1e6},
                                {"GB", 1e9},
                                {"TB", 1e12},
                                {"PB", 1e15},
                                {"KiB", 1024.0},
                                {"MiB", 1048576.0},
                                {"GiB", 1073741824.0},
                                {"TiB", 1099511627776.0},
                                {"PiB", 1125899906842624.0},
                                {"K", 1024.0},
                                {"M", 1048576.0},
                                {"G", 1073741824.0}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    if (value * u.scale > kMaxByteSize) {
      return InvalidArgument("'" + text + "' is larger than any byte size spill handles (4 EiB)");
    }
    return static_cast<size_t>(std::llround(value * u.scale));
  }
  return InvalidArgument("'" + text + "': unknown unit '" + unit +
                         "' (use B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB or PiB)");
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLargest = sizeof(units) / sizeof(units[0]) - 1;
  int u = 0;
  while (bytes >= 1024 && u < kLargest) {
    bytes /= 1024;
    ++u;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buffer;
}

std::string FormatMiB(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f MiB", bytes / 1048576.0);
  return buffer;
}

}  // namespace spill
