// Convolutions between tensors in either layout (framework/device/tensor.h). An
// algorithm that computes in blocked layouts itself (dnnl) gets the operands
// as they are; the others compute on plain copies of the blocked operands in
// the workspace, ahead of their own workspace, so each of them gives the
// same bits in every layout. Every caller of the algorithms goes through
// here: the convolution layer, the timer and the benchmarks.
#ifndef SPILL_LAYERS_CPU_CONV_LAYOUTS_H_
#define SPILL_LAYERS_CPU_CONV_LAYOUTS_H_

#include <cstddef>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {

// Whether this machine's convolutions compute fastest in the blocked layout
// (oneDNN on AVX-512), so that layers should keep activations in it.
bool BlockedLayoutsPay();

// The workspace of `a` for `op` on `g`, plain copies included.
size_t ConvWorkspaceBytes(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op);

// ConvAlgorithm's operations on operands in g's layouts; `workspace` holds
// ConvWorkspaceBytes(a, g, op) bytes.
void ConvForward(const ConvAlgorithm& a, const ConvGeometry& g, const float* x, const float* w,
                 const float* bias, float* y, void* workspace);
void ConvBackwardData(const ConvAlgorithm& a, const ConvGeometry& g, const float* dy,
                      const float* w, float* dx, bool accumulate, void* workspace);
void ConvBackwardFilter(const ConvAlgorithm& a, const ConvGeometry& g, const float* x,
                        const float* dy, float* dw, float* db, bool accumulate, double* bias_sums,
                        void* workspace);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CONV_LAYOUTS_H_
