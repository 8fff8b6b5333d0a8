#include "memory/runtime/parameter_updates.h"

#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/transfer_plan.h"

namespace spill {

ParameterUpdates::ParameterUpdates(const Schedule& schedule, const MemoryOptions& options)
    : home_host_(schedule.tensors.size(), false),
      gathered_(schedule.tensors.size(), false),
      updated_(schedule.parameters.size(), false) {
  for (TensorId id = 0; id < static_cast<TensorId>(home_host_.size()); ++id) {
    home_host_[id] = HomeOnHost(schedule, options, id);
  }
  for (size_t i = 0; i < schedule.parameters.size(); ++i) {
    slot_of_[schedule.parameters[i].param] = static_cast<int>(i);
    gathered_[schedule.parameters[i].param] = options.params_gathered;
  }
}

void ParameterUpdates::Finish() {
  update_ = nullptr;
  updated_.assign(updated_.size(), false);
  failure_ = Status::Ok();
}

}  // namespace spill
