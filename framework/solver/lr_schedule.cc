#include "framework/solver/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace spill {

Status LrSchedule::Validate() const {
  if (type != "constant" && type != "step" && type != "multistep" && type != "cosine") {
    return InvalidArgument("unknown learning-rate schedule '" + type +
                           "'; expected constant, step, multistep or cosine");
  }
  if (lr <= 0) return InvalidArgument("the learning rate must be positive");
  if (type == "step" && step_size <= 0)
    return InvalidArgument("a step schedule needs step_size > 0");
  if (type == "multistep" && !std::is_sorted(milestones.begin(), milestones.end())) {
    return InvalidArgument("multistep milestones must be increasing");
  }
  if (type == "cosine" && total_steps <= warmup) {
    return InvalidArgument("a cosine schedule needs a run longer than its warmup");
  }
  if (warmup < 0 || warmup_factor <= 0 || warmup_factor > 1) {
    return InvalidArgument("warmup must be >= 0 steps with a factor in (0, 1]");
  }
  return Status::Ok();
}

double LrSchedule::At(int64_t step) const {
  double rate = lr;
  if (type == "step") {
    rate = lr * std::pow(gamma, static_cast<double>(step / step_size));
  } else if (type == "multistep") {
    int64_t passed =
        std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin();
    rate = lr * std::pow(gamma, static_cast<double>(passed));
  } else if (type == "cosine") {
    double progress = std::min(1.0, static_cast<double>(std::max<int64_t>(step - warmup, 0)) /
                                        static_cast<double>(total_steps - warmup));
    rate = min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
  if (step < warmup) {
    double t = static_cast<double>(step) / static_cast<double>(warmup);
    rate *= warmup_factor + (1.0 - warmup_factor) * t;
  }
  return rate;
}

}  // namespace spill
