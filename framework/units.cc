#include "framework/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace spill {

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
                                {"KiB", 1024.0},
                                {"MiB", 1048576.0},
                                {"GiB", 1073741824.0},
                                {"TiB", 1099511627776.0},
                                {"K", 1024.0},
                                {"M", 1048576.0},
                                {"G", 1073741824.0}};
  for (const Unit& u : kUnits) {
    if (unit == u.name) return static_cast<size_t>(std::llround(value * u.scale));
  }
  return InvalidArgument("'" + text + "': unknown unit '" + unit +
                         "' (use B, KB, MB, GB, KiB, MiB or GiB)");
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
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
