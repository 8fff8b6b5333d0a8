// The tensor sequence of one phase of an iteration (the window paper's
// "variable-sequence"): step by step, the transient tensors each step reads
// (inputs, saved tensors, gradients it adds into) and then writes, each once
// per step. Persistent tensors (parameters, their gradients, solver state)
// stay on the device and are not in it. Plain data from the schedule, for
// the schedulers that swap any transient tensor (window, lms).
//
// Also the device memory those schedulers must leave to what they do not
// schedule: the persistent tensors and the largest workspace any step needs
// under the workspace policy.
#ifndef SPILL_MEMORY_SCHEDULERS_TENSOR_SEQUENCE_H_
#define SPILL_MEMORY_SCHEDULERS_TENSOR_SEQUENCE_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "framework/schedule/network_view.h"
#include "framework/schedule/schedule.h"
#include "memory/memory_options.h"
#include "memory/workspace_selector.h"

namespace spill {

struct TensorSequence {
  std::vector<TensorId> tensors;  // the sequence, step after step
  std::vector<int> step;          // the step of each entry
  std::vector<size_t> step_end;   // per step: one past its last entry
  std::vector<size_t> bytes;      // per tensor id: device bytes the allocator takes

  int num_steps() const { return static_cast<int>(step_end.size()); }
  size_t step_begin(int s) const { return s == 0 ? 0 : step_end[s - 1]; }
};

// How many device bytes a tensor takes (pool blocks, or the allocator's own
// rounding: memory/allocators/allocator.h ChargedBytes).
using Charge = std::function<size_t(size_t bytes, bool persistent)>;
// Pool blocks.
size_t BlockCharge(size_t bytes, bool persistent);

TensorSequence BuildTensorSequence(const Schedule& schedule, Phase phase,
                                   const Charge& charge = BlockCharge);

// The device memory the tensors that persist across iterations take under
// the allocator `options` name, placed as the runtime places them (in
// tensor order, before the first iteration): the allocator's footprint.
// `view` must outlive the call (allocators that place by what a tensor is
// read it).
StatusOr<size_t> PersistentFootprint(const NetworkView& view, const MemoryOptions& options);

// The largest workspace a step of `phase` can run with under `policy`: per
// step, what the policy chooses when no memory is free beyond it (the
// declared workspace where the view has no algorithm catalog).
size_t WorkspaceReserve(const NetworkView& view, Phase phase, const WorkspacePolicy& policy,
                        const Charge& charge = BlockCharge);

}  // namespace spill

#endif  // SPILL_MEMORY_SCHEDULERS_TENSOR_SEQUENCE_H_
