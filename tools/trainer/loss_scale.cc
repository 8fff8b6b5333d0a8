#include "tools/trainer/loss_scale.h"

#include <cmath>
#include <cstdio>

namespace spill {

std::string CheckLossScale(double scale) {
  int exponent = 0;
  const bool power_of_two = std::isfinite(scale) && std::frexp(scale, &exponent) == 0.5;
  char text[64];
  std::snprintf(text, sizeof(text), "%g", scale);
  if (!power_of_two) {
    return std::string(text) + " is not a power of two (the scaling must be exact: 1024, 65536)";
  }
  if (scale < kMinLossScale || scale > kMaxLossScale) {
    return std::string(text) + " is outside [2^-24, 2^64]";
  }
  return "";
}

Status LossScaler::Update(bool finite, int64_t step) {
  if (finite) {
    skipped_in_a_row_ = 0;
    if (config_.growth_interval > 0 && ++clean_steps_ >= config_.growth_interval &&
        scale_ * 2 <= kMaxLossScale) {
      scale_ *= 2;
      clean_steps_ = 0;
    }
    return Status::Ok();
  }
  ++skipped_in_a_row_;
  clean_steps_ = 0;
  scale_ /= 2;
  if (scale_ >= kMinLossScale) return Status::Ok();
  return InvalidArgument(
      "fp16 loss scaling: at step " + std::to_string(step) + ", after " +
      std::to_string(skipped_in_a_row_) +
      " steps in a row whose gradients held inf or NaN, the loss scale fell below 2^-24 - "
      "the gradients are not finite at any scale (a diverged network: lower the learning "
      "rate, or train in bf16, which has float32's range)");
}

}  // namespace spill
