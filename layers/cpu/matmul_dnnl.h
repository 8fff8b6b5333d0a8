// oneDNN's matrix product in bfloat16: the CPU's bf16 arithmetic rate, as the
// time models see it (tools/common/timeline_tools.cc calibrates the "cpu"
// device profile with it).
#ifndef SPILL_LAYERS_CPU_MATMUL_DNNL_H_
#define SPILL_LAYERS_CPU_MATMUL_DNNL_H_

#include <cstdint>

namespace spill {
namespace cpu {

// C (m x n, float32) = A (m x k) B (k x n): row-major, bfloat16 operands (the
// upper halves of float32s), float32 sums. The primitive is built once per
// shape. Call only where Bf16Arithmetic() (layers/cpu/conv_layouts.h): oneDNN
// would emulate it elsewhere.
void MatmulBf16(int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b, float* c);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_MATMUL_DNNL_H_
