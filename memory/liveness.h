// Liveness analysis over the step schedule (SuperNeurons §3.2).
//
// A transient tensor (activation, saved aux, activation gradient) is live from
// the first step that writes it to the last step that reads or writes it. The
// in set of a step holds the tensors live before it, the out set those live
// after it; a tensor leaves at the end of its last step. Persistent tensors
// (parameters, their gradients, solver state) are live throughout and are not
// listed. For evaluation only the forward steps run, so tensors saved for
// backward die with their last forward reader.
//
// Pure function of the schedule: no device, no sizes involved. O(steps x
// tensors per step); the paper's O(N^2) in/out construction is not needed to
// get the same sets.
#ifndef SPILL_MEMORY_LIVENESS_H_
#define SPILL_MEMORY_LIVENESS_H_

#include <vector>

#include "framework/schedule/declarations.h"
#include "framework/schedule/schedule.h"

namespace spill {

struct Liveness {
  std::vector<int> first_use;  // per tensor; -1 when unused in this phase
  std::vector<int> last_use;
  std::vector<std::vector<TensorId>> dies_after;  // per step: tensors whose last step it is
  int num_steps = 0;

  // Tensors live just before / after `step` (sorted ids).
  std::vector<TensorId> InSet(int step) const;
  std::vector<TensorId> OutSet(int step) const;
};

Liveness AnalyzeLiveness(const Schedule& schedule, Phase phase);

}  // namespace spill

#endif  // SPILL_MEMORY_LIVENESS_H_
