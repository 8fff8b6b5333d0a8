#include "framework/device/tensor.h"

namespace spill {

const char* LayoutName(Layout layout) { return layout == Layout::kBlocked16 ? "nChw16c" : "nchw"; }

std::string Shape::ToString() const {
  return std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
         "x" + std::to_string(dims[3]);
}

}  // namespace spill
