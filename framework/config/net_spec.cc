// The parts of the network format shared by the parser and the network:
// source locations, references to layer outputs, and name suggestions.
#include "framework/config/net_spec.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "framework/base/units.h"

namespace spill {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

void SplitReference(const std::string& ref, std::string* layer, int* output) {
  size_t colon = ref.rfind(':');
  *output = 0;
  if (colon != std::string::npos && colon + 1 < ref.size() &&
      ref.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    *layer = ref.substr(0, colon);
    // An index too large for an int names no output of any layer: INT_MAX
    // makes the network's wiring check report it.
    auto index = ParseInt64(ref.substr(colon + 1));
    *output = index.ok() && *index < INT_MAX ? static_cast<int>(*index) : INT_MAX;
    return;
  }
  *layer = ref;
}

}  // namespace spill
