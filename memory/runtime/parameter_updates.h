// ParameterUpdates: where each parameter tensor lives between uses and the
// state of this iteration's solver step (see runtime_parameters.cc for how
// the runtime places parameters and runs the step where the plan says).
#ifndef SPILL_MEMORY_RUNTIME_PARAMETER_UPDATES_H_
#define SPILL_MEMORY_RUNTIME_PARAMETER_UPDATES_H_

#include <unordered_map>
#include <vector>

#include "framework/base/status.h"
#include "framework/schedule/tensor_store.h"
#include "memory/memory_options.h"

namespace spill {

class ParameterUpdates {
 public:
  ParameterUpdates(const Schedule& schedule, const MemoryOptions& options);

  // Parameters, gradients and state that live in host memory between uses.
  bool home_host(TensorId id) const { return home_host_[id]; }
  // Trainable parameters gathered from the ranks' pieces for each step
  // that reads them (memory.params_gathered).
  bool gathered(TensorId id) const { return gathered_[id]; }
  // The Schedule::parameters index of parameter `id`.
  int slot_of(TensorId id) const { return slot_of_.at(id); }

  // This iteration's solver step (null when none was handed over).
  const SlotUpdate& update() const { return update_; }
  void Begin(SlotUpdate update) { update_ = std::move(update); }
  bool updated(int slot) const { return updated_[slot]; }
  void MarkUpdated(int slot) { updated_[slot] = true; }
  // A failure after a step (FinishStep returns none), reported next.
  const Status& failure() const { return failure_; }
  void set_failure(Status status) { failure_ = std::move(status); }
  // The iteration's solver step is over: no update, nothing updated or
  // failed.
  void Finish();

 private:
  std::vector<bool> home_host_;
  std::vector<bool> gathered_;
  std::unordered_map<TensorId, int> slot_of_;  // parameter -> Schedule::parameters index
  SlotUpdate update_;
  std::vector<bool> updated_;  // per slot, in this iteration
  Status failure_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_PARAMETER_UPDATES_H_
