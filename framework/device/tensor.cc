#include "framework/device/tensor.h"

namespace spill {

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kPlain:
      return "nchw";
    case Layout::kBlocked16:
      return "nChw16c";
    case Layout::kChannelsLast:
      return "nhwc";
  }
  return "?";
}

size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "fp32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
  }
  return "?";
}

std::string Shape::ToString() const {
  return std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
         "x" + std::to_string(dims[3]);
}

}  // namespace spill
