// cuDNN's side of the GPU convolution (layers/cuda/convolution_cuda.h): the
// descriptors of one geometry, the algorithms cuDNN offers for them, and
// the process-wide handle and cache through which layers ask while they
// are shaped, before any device exists.
//
// A geometry's candidates are the usable algorithms among cuDNN's heuristic
// results (cudnnGet*Algorithm_v7), in their order, each with its workspace
// (cudnnGet*WorkspaceSize): deterministic ones with plain float32 FMA math
// where cuDNN offers any (recomputation must reproduce outputs bit for bit;
// no TF32), else the best of what there is. They are asked once per
// geometry and process (layers/conv_candidates.h's cache).
#ifndef SPILL_LAYERS_CUDA_CONV_CUDNN_CUDA_H_
#define SPILL_LAYERS_CUDA_CONV_CUDNN_CUDA_H_

#include <cudnn.h>

#include <string>

#include "framework/base/status.h"
#include "layers/conv_candidates.h"

// For code that reports a cuDNN failure as a Status instead of aborting.
#define SPILL_CUDNN_RETURN_IF_ERROR(call)                                      \
  do {                                                                         \
    cudnnStatus_t spill_cudnn_status_ = (call);                                \
    if (spill_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                         \
      return Internal(std::string(#call) +                                     \
                      " failed: " + cudnnGetErrorString(spill_cudnn_status_)); \
    }                                                                          \
  } while (0)

namespace spill {
namespace cuda {

// "cudnn_fwd_implicit_gemm", ...: the names candidates go by (and
// `memory.workspace: pin:NAME` pins).
std::string ConvAlgoName(int op, int algo);

// Plain float32 arithmetic: no TF32 tensor cores.
bool ConvMathAllowed(cudnnMathType_t math);

// The descriptors of one convolution geometry: input, output, bias, filter
// and the convolution. Made by Set, then only read.
class ConvDescriptors {
 public:
  ConvDescriptors() = default;
  ~ConvDescriptors();
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  // Describes `g` (which CheckDescriptorLimits has passed) for layer `layer`.
  Status Set(const ConvGeometry& g, const std::string& layer);

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// The candidates cuDNN offers for `d`, asked on `handle`.
StatusOr<ConvCandidates> QueryConvCandidates(cudnnHandle_t handle, const ConvDescriptors& d);

// Whether cuDNN can be asked (a GPU is usable); else `why` says why not.
bool ConvQueryAvailable(std::string* why);

// The candidates of geometry `g` described by `d`, from the process-wide
// cache, asked of cuDNN on the current GPU on the first request.
// kUnimplemented, saying why, when no GPU can be used.
StatusOr<ConvCandidates> CachedConvCandidates(const ConvGeometry& g, const ConvDescriptors& d);

// The process-wide cache (for statistics).
const ConvCandidateCache& ConvCandidateCacheInUse();

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_CONV_CUDNN_CUDA_H_
