// The embedding's id test, one definition for the CPU and the CUDA kernels
// (compiled for both by nvcc, for the host alone by g++).
#ifndef SPILL_LAYERS_EMBEDDING_MATH_H_
#define SPILL_LAYERS_EMBEDDING_MATH_H_

#include <cstdint>

#include "layers/activation_math.h"

namespace spill {

// The table row of an id, or -1 when it is not a whole number in
// [0, vocabulary) (NaN included: every comparison with it is false).
SPILL_HOST_DEVICE inline int64_t EmbeddingRow(float id, int64_t vocabulary) {
  return id >= 0 && id < static_cast<float>(vocabulary) &&
                 id == static_cast<float>(static_cast<int64_t>(id))
             ? static_cast<int64_t>(id)
             : -1;
}

}  // namespace spill

#endif  // SPILL_LAYERS_EMBEDDING_MATH_H_
