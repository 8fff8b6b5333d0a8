#include "framework/graph/precision.h"

namespace spill {

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kTf32:
      return "tf32";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& text, const std::string& what) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16, Precision::kTf32}) {
    if (text == PrecisionName(p)) return p;
  }
  return InvalidArgument(what + ": '" + text + "' is not a precision; expected fp32, bf16, fp16 " +
                         "or tf32");
}

std::string PrecisionNote(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "";
    case Precision::kTf32:
      return ", TF32 math";
    default:
      return std::string(", activations in ") + PrecisionName(precision);
  }
}

DType ActivationType(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBF16;
    case Precision::kFp16:
      return DType::kF16;
    default:
      return DType::kF32;
  }
}

}  // namespace spill
