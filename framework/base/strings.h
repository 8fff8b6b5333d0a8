// Small string helpers every layer of the project uses: lists in messages
// ("known: a, b, c").
#ifndef SPILL_FRAMEWORK_BASE_STRINGS_H_
#define SPILL_FRAMEWORK_BASE_STRINGS_H_

#include <string>

namespace spill {

// The items of `items` (any range of things a std::string can be built
// from) with `separator` between them.
template <typename Range>
std::string Join(const Range& items, const std::string& separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += std::string(item);
    first = false;
  }
  return out;
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_STRINGS_H_
