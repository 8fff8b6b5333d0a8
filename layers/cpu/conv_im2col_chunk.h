// The chunked im2col engine behind im2col_chunk and im2col_batch.
#ifndef SPILL_LAYERS_CPU_CONV_IM2COL_CHUNK_H_
#define SPILL_LAYERS_CPU_CONV_IM2COL_CHUNK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {

// im2col over `images` images at a time; 0 makes one chunk of the whole batch.
std::unique_ptr<ConvAlgorithm> NewIm2colChunked(const std::string& name, int64_t images);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CONV_IM2COL_CHUNK_H_
