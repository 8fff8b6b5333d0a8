// Offload policy (SuperNeurons §3.3.1): which tensors go to host memory and
// when they come back. A pure function of the schedule.
//
// Checkpoint tensors are the outputs of checkpoint layers (convolution, fully
// connected, input) that backward needs. Eagerly (offload without the
// tensor cache):
//   * the copy to host starts right after the step that produces the tensor,
//     on the copy queue, overlapping the forward steps that still read it;
//   * its device block is given back after its last forward reader (the
//     runtime waits there for the copy if it is still running);
//   * in backward, it is prefetched `prefetch_ahead` checkpoint layers before
//     the first step that needs it, so the copy overlaps the backward
//     computation of the checkpoints in between.
// With the tensor cache on, nothing is offloaded eagerly: tensors leave the
// device only when an allocation needs their room, and `prefetch_at` still
// brings back, ahead of use, whatever the cache sent to the host.
#ifndef SPILL_MEMORY_OFFLOAD_POLICY_H_
#define SPILL_MEMORY_OFFLOAD_POLICY_H_

#include <vector>

#include "framework/schedule/declarations.h"
#include "framework/schedule/schedule.h"
#include "memory/liveness.h"

namespace spill {

struct OffloadPlan {
  std::vector<bool> checkpoint;                     // per tensor: offloaded eagerly
  std::vector<std::vector<TensorId>> begin_after;   // per step: start copying out after it
  std::vector<std::vector<TensorId>> finish_after;  // per step: give the device block back after it
  std::vector<std::vector<TensorId>> prefetch_at;   // per step: bring back before it
  std::vector<int> first_backward_use;              // per tensor; -1 if none
};

// `costs` holds each layer's LayerCost. `droppable` (empty without
// recomputation) marks tensors rebuilt in backward: their producers' inputs
// are needed where they are. `eager` false: no begin/finish points, prefetch
// points for every forward tensor (for the tensor cache).
OffloadPlan PlanOffload(const Schedule& schedule, const Liveness& liveness,
                        const std::vector<LayerCost>& costs, const std::vector<bool>& droppable,
                        int prefetch_ahead, bool eager);

}  // namespace spill

#endif  // SPILL_MEMORY_OFFLOAD_POLICY_H_
