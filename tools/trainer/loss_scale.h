// fp16's dynamic loss scaling (run.precision: fp16). Half precision's
// smallest normal number is 2^-14: the gradients of activations, often much
// smaller, would flush to zero. So the losses' gradients are multiplied by
// the loss scale S (BackwardArgs::loss_scale), every activation gradient
// carries S along, and the float32 parameter gradients are divided by S
// again before the update (Solver::UnscaleGradients). S is a power of two,
// so both multiplications are exact.
//
// The scale adapts as PyTorch's GradScaler does: when any gradient is inf or
// NaN (S too large: a 16-bit gradient overflowed) the step is skipped - no
// parameter or solver state changes - and S halves; after `growth_interval`
// clean steps in a row S doubles. A scale that halves below kMinLossScale
// means the gradients are not finite at any scale: training stops with an
// error rather than skipping every step. bf16 has float32's range and needs
// none of this.
#ifndef SPILL_TOOLS_TRAINER_LOSS_SCALE_H_
#define SPILL_TOOLS_TRAINER_LOSS_SCALE_H_

#include <cstdint>
#include <string>

#include "framework/base/status.h"

namespace spill {

// 2^-24, the smallest fp16 subnormal: below it no scale helps.
constexpr double kMinLossScale = 1.0 / (1 << 24);
// 2^64: beyond it every scaled gradient of a float32 loss overflows fp16.
constexpr double kMaxLossScale = 18446744073709551616.0;

struct LossScaleConfig {
  double initial = 65536;          // run.loss_scale, a power of two
  int64_t growth_interval = 2000;  // run.loss_scale_growth; 0: the scale never grows
};

// "" when `scale` is a power of two within [kMinLossScale, kMaxLossScale],
// else what is wrong with it.
std::string CheckLossScale(double scale);

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& config) : config_(config), scale_(config.initial) {}

  double scale() const { return scale_; }
  // Clean steps in a row since the scale last changed.
  int64_t clean_steps() const { return clean_steps_; }

  // After step `step` (1-based): `finite` whether every gradient was. An
  // error when the scale falls below kMinLossScale.
  Status Update(bool finite, int64_t step);

  // Restores the state a checkpoint saved.
  void Restore(double scale, int64_t clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

 private:
  LossScaleConfig config_;
  double scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_in_a_row_ = 0;  // for the message when the scale underflows
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_LOSS_SCALE_H_
