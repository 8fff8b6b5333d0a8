// Learning-rate schedules, as a function of the step (iteration) number:
//   constant                   lr
//   step       every `step_size` steps multiply by `gamma`
//   multistep  multiply by `gamma` at each of `milestones`
//   cosine     from lr down to `min_lr` over the run (after warmup)
// Any of them may start with a linear warmup over `warmup` steps from
// lr * `warmup_factor`. Configs may give these in epochs; the trainer turns
// epochs into steps.
#ifndef SPILL_FRAMEWORK_SOLVER_LR_SCHEDULE_H_
#define SPILL_FRAMEWORK_SOLVER_LR_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

struct LrSchedule {
  std::string type = "constant";  // constant | step | multistep | cosine
  double lr = 0.1;
  double gamma = 0.1;
  int64_t step_size = 0;
  std::vector<int64_t> milestones;
  double min_lr = 0.0;
  int64_t total_steps = 0;  // cosine: length of the run
  int64_t warmup = 0;       // steps of linear warmup
  double warmup_factor = 0.1;

  Status Validate() const;
  double At(int64_t step) const;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SOLVER_LR_SCHEDULE_H_
