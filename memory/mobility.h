// Tensor mobility (Dymem §3.3.2, Algorithm 3) and Dymem's offload set: pure
// functions of the step schedule and what each layer declares of its outputs
// (MemoryTraits, framework/schedule/declarations.h) - no list of layer types.
//
// Mobility says how long a tensor stays and so where the GTBM allocator
// (memory/allocators/gtbm_allocator.h) puts it:
//   movable     a single consumer that runs right after the tensor is
//               written, or a single consumer that is not a join: the hole
//               it leaves coalesces with its neighbours' soon (low end);
//   temporary   several consumers in the pass (a fork in forward; a gradient
//               with contributions from several branches in backward), or a
//               single consumer that is a join not run next (a branch output
//               waiting for the other branches): it outlives the movables
//               around it (high end, freed last-in first-out);
//   reclaimed   the outputs of layers whose outputs are small (fully
//               connected, softmax loss, dropout) and their gradients, and
//               every tensor smaller than `min_offload_bytes`: small and
//               never offloaded (the incremental space, a stack);
//   persistent  parameters, their gradients and solver state (low end, first).
// The class depends on the pass a tensor is allocated in: an Inception
// branch's output waits for the concat in forward (temporary), while its
// gradient is read at once by the branch's backward (movable). A forward
// tensor allocated in backward (prefetched or rebuilt) is movable however
// many backward steps read it: Algorithm 2 brings such tensors back in the
// order they are used, so they leave first in, first out - a stack (the high
// end) strands them, best fit among the movables reuses their holes (the
// GTBM allocator stacks one only when it leaves before the stack's top). Where
// the paper's Algorithm 3 is garbled, the choices of the design notes (§1.5)
// hold; besides, a tensor that no step of its pass reads (saved for backward
// only) waits, so it is temporary.
#ifndef SPILL_MEMORY_MOBILITY_H_
#define SPILL_MEMORY_MOBILITY_H_

#include <cstddef>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/settings.h"

namespace spill {

enum class Mobility { kPersistent, kMovable, kTemporary, kReclaimed };
const char* MobilityName(Mobility mobility);

struct MobilityClasses {
  std::vector<Mobility> forward;   // per tensor: allocated in a forward step
  std::vector<Mobility> backward;  // per tensor: allocated in a backward step

  Mobility Of(TensorId id, Pass pass) const {
    return pass == Pass::kForward ? forward[id] : backward[id];
  }
};

// memory.min_offload: tensors smaller than this are neither offloaded (the
// dymem and vdnn schedulers) nor placed by mobility (GTBM's reclaimed
// class). Each policy that reads it lists this spec.
const SettingSpec& MinOffloadSetting();

MobilityClasses ClassifyMobility(const NetworkView& view, size_t min_offload_bytes);

// Dymem's offload set (§3.2.1): forward tensors that backward needs, of at
// least `min_offload_bytes`, produced or first read by a layer of feature
// maps (a convolution, pooling, activation, normalization or concat layer) -
// never the outputs of layers with small outputs (fully connected, softmax,
// dropout: under 1 % of the memory).
std::vector<bool> DymemOffloadSet(const NetworkView& view, size_t min_offload_bytes);

// vDNN's (vDNN_conv): the inputs of convolutions (MemoryTraits::convolution),
// where backward needs them
// and they are at least `min_offload_bytes`.
std::vector<bool> ConvInputOffloadSet(const NetworkView& view, size_t min_offload_bytes);

}  // namespace spill

#endif  // SPILL_MEMORY_MOBILITY_H_
