// Small helpers shared by the CUDA layers.
#ifndef SPILL_LAYERS_CUDA_LAYER_UTIL_CUDA_H_
#define SPILL_LAYERS_CUDA_LAYER_UTIL_CUDA_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "framework/base/check.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_device.h"
#include "framework/graph/layer.h"
#include "layers/cuda/stored_cuda.h"

namespace spill {
namespace cuda {

// The CUDA device a layer runs on; anything else is a wiring bug.
inline CudaDevice& DeviceOf(Device* device) {
  SPILL_CHECK(device != nullptr && device->type() == DeviceType::kCuda)
      << "a CUDA layer was given " << (device == nullptr ? "no device" : device->Describe());
  return *static_cast<CudaDevice*>(device);
}

inline cudaStream_t StreamOf(Device* device) { return DeviceOf(device).compute_stream(); }

// Whether backward adds into input gradient i instead of overwriting it.
inline bool Accumulates(const BackwardArgs& args, size_t input) {
  return input < args.accumulate.size() && args.accumulate[input];
}

// The input gradient i when one is wanted, else null.
inline float* InputGrad(const BackwardArgs& args, size_t input) {
  return input < args.input_grads.size() && args.input_grads[input].valid()
             ? args.input_grads[input].data()
             : nullptr;
}

// The gradient of parameter i when one is wanted, else null.
inline float* ParamGrad(const BackwardArgs& args, size_t param) {
  return param < args.param_grads.size() && args.param_grads[param].valid()
             ? args.param_grads[param].data()
             : nullptr;
}

// Each buffer a CUDA layer carves from its workspace starts at a multiple
// of this many bytes from the workspace's start (a fresh cache line).
constexpr size_t kWorkspaceAlign = 256;
inline size_t WorkspaceAligned(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// How `t` is stored, for the kernels that take 16-bit tensors as they are.
inline Stored StoredOf(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kBF16:
      return Stored::kBf16;
    case DType::kF16:
      return Stored::kF16;
    case DType::kF32:
      break;
  }
  return Stored::kF32;
}

// Whether a layer's input and output are stored alike (its kernels take
// one element type): the condition of computes_16_bit for the layers whose
// kernels take 16-bit tensors.
inline bool StoredAlike(const Layer& layer) {
  return layer.input_dtype(0) == layer.output_dtype(0);
}

// Copies the sides, kernel, stride and padding of a layer's window geometry
// (PoolGeometry, ConvGeometry) into a kernel's shape (PoolShape, WindowShape).
template <typename KernelShape, typename Geometry>
void CopyWindow(const Geometry& g, KernelShape* s) {
  s->height = g.height;
  s->width = g.width;
  s->kernel_h = g.kernel[0];
  s->kernel_w = g.kernel[1];
  s->stride_h = g.stride[0];
  s->stride_w = g.stride[1];
  s->pad_h = g.pad[0];
  s->pad_w = g.pad[1];
}

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_LAYER_UTIL_CUDA_H_
