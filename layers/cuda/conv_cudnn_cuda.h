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

// Whether results computed in `math` are usable: for float32 operands plain
// float32 arithmetic (TF32 tensor cores only where the process asked for
// them, run.precision tf32); for 16-bit operands any math cuDNN runs them in
// (tensor cores, float32 sums).
bool ConvMathAllowed(cudnnMathType_t math, bool sixteen_bit);

// cuDNN's type for a storage type.
cudnnDataType_t CudnnType(DType dtype);

// The descriptors of one convolution geometry: input, output, bias, filter
// and the convolution. Made by Set, then only read.
class ConvDescriptors {
 public:
  ConvDescriptors() = default;
  ~ConvDescriptors();
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;

  // Describes `g` (which CheckDescriptorLimits has passed) for layer `layer`:
  // x, y, the filter and the bias in g's storage type (float32, or one
  // 16-bit type for input and output alike: the filter and bias are then
  // the layer's 16-bit copies of its float32 parameters), float32 sums.
  Status Set(const ConvGeometry& g, const std::string& layer);
  bool sixteen_bit() const { return dtype != DType::kF32; }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  DType dtype = DType::kF32;
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

// cuDNN's algorithm search, written once over the convolution's operation
// (after PyTorch's algorithm_search<perf_t>): ConvSearch<Perf> names, for
// the forward pass, the filter gradient and the data gradient alike, the
// calls that count, rank (heuristics), size (workspace) and time (Find)
// that operation's algorithms. ForEachConvSearch visits the three, so the
// candidates (QueryConvCandidates) and the calibration
// (conv_calibration_cuda.cc) each say their flow once.

// Device buffers of one geometry's input, output and filter, for timing.
struct ConvBuffers {
  void* x = nullptr;
  void* y = nullptr;
  void* w = nullptr;
};

template <typename Perf>
struct ConvSearch;

template <>
struct ConvSearch<cudnnConvolutionFwdAlgoPerf_t> {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr int kOp = kConvForward;
  static cudnnStatus_t MaxCount(cudnnHandle_t h, int* count) {
    return cudnnGetConvolutionForwardAlgorithmMaxCount(h, count);
  }
  static cudnnStatus_t Heuristics(cudnnHandle_t h, const ConvDescriptors& d, int count,
                                  int* returned, Perf* perf) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, count, returned, perf);
  }
  static cudnnStatus_t Workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes);
  }
  static cudnnStatus_t Find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b,
                            int count, int* returned, Perf* perf, void* workspace, size_t bytes) {
    return cudnnFindConvolutionForwardAlgorithmEx(h, d.x, b.x, d.w, b.w, d.conv, d.y, b.y, count,
                                                  returned, perf, workspace, bytes);
  }
};

template <>
struct ConvSearch<cudnnConvolutionBwdFilterAlgoPerf_t> {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kOp = kConvFilterGrad;
  static cudnnStatus_t MaxCount(cudnnHandle_t h, int* count) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, count);
  }
  static cudnnStatus_t Heuristics(cudnnHandle_t h, const ConvDescriptors& d, int count,
                                  int* returned, Perf* perf) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, count, returned,
                                                         perf);
  }
  static cudnnStatus_t Workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, bytes);
  }
  static cudnnStatus_t Find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b,
                            int count, int* returned, Perf* perf, void* workspace, size_t bytes) {
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, b.x, d.y, b.y, d.conv, d.w, b.w,
                                                         count, returned, perf, workspace, bytes);
  }
};

template <>
struct ConvSearch<cudnnConvolutionBwdDataAlgoPerf_t> {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kOp = kConvDataGrad;
  static cudnnStatus_t MaxCount(cudnnHandle_t h, int* count) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, count);
  }
  static cudnnStatus_t Heuristics(cudnnHandle_t h, const ConvDescriptors& d, int count,
                                  int* returned, Perf* perf) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, count, returned,
                                                       perf);
  }
  static cudnnStatus_t Workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo algo,
                                 size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, bytes);
  }
  static cudnnStatus_t Find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b,
                            int count, int* returned, Perf* perf, void* workspace, size_t bytes) {
    return cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, b.w, d.y, b.y, d.conv, d.x, b.x,
                                                       count, returned, perf, workspace, bytes);
  }
};

// Calls `visit(ConvSearch<Perf>())` for the forward pass, the filter
// gradient and the data gradient, in that order; stops at the first error.
template <typename Visit>
Status ForEachConvSearch(Visit&& visit) {
  SPILL_RETURN_IF_ERROR(visit(ConvSearch<cudnnConvolutionFwdAlgoPerf_t>()));
  SPILL_RETURN_IF_ERROR(visit(ConvSearch<cudnnConvolutionBwdFilterAlgoPerf_t>()));
  return visit(ConvSearch<cudnnConvolutionBwdDataAlgoPerf_t>());
}

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_CONV_CUDNN_CUDA_H_
