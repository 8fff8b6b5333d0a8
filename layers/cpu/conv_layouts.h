// Convolutions between tensors in either layout (framework/device/tensor.h)
// and any storage type (DType). An algorithm that computes in blocked layouts
// itself (dnnl) gets blocked operands as they are, and one that takes 16-bit
// operands (dnnl_bf16) gets those as they are; the others compute on plain
// float32 copies in the workspace, ahead of their own workspace, so each of
// them gives the same bits in every layout, and in 16 bits the bits of
// float32 operands rounded as the executor rounds them
// (framework/graph/conversions.h). Every caller of the algorithms goes
// through here: the convolution layer, the timer and the benchmarks.
#ifndef SPILL_LAYERS_CPU_CONV_LAYOUTS_H_
#define SPILL_LAYERS_CPU_CONV_LAYOUTS_H_

#include <cstddef>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {

// Whether this machine's convolutions compute fastest in the blocked layout
// (oneDNN on AVX-512), so that layers should keep activations in it.
bool BlockedLayoutsPay();

// Whether this processor has bfloat16 products (AVX-512 BF16 or newer), so
// that oneDNN computes convolutions in bfloat16 natively (dnnl_bf16).
bool Bf16Arithmetic();

// Whether it has AMX tiles for bfloat16, on which oneDNN's bfloat16
// convolutions and matrix products compute in channels-last: bfloat16
// activations then lie channels-last between convolutions.
bool Bf16Tiles();

// The workspace of `a` for `op` on `g`, plain copies included.
size_t ConvWorkspaceBytes(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op);

// ConvAlgorithm's operations on operands in g's layouts and dtypes (x, dx:
// g.input_dtype; y, dy: g.output_dtype; the weights, bias and their
// gradients float32); `workspace` holds ConvWorkspaceBytes(a, g, op) bytes.
void ConvForward(const ConvAlgorithm& a, const ConvGeometry& g, const void* x, const float* w,
                 const float* bias, void* y, void* workspace);
void ConvBackwardData(const ConvAlgorithm& a, const ConvGeometry& g, const void* dy, const float* w,
                      void* dx, bool accumulate, void* workspace);
void ConvBackwardFilter(const ConvAlgorithm& a, const ConvGeometry& g, const void* x,
                        const void* dy, float* dw, float* db, bool accumulate, double* bias_sums,
                        void* workspace);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CONV_LAYOUTS_H_
