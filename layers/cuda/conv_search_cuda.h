// cuDNN's algorithm search, written once over the convolution's operation
// (after PyTorch's algorithm_search<perf_t>): ConvSearch<Perf> names, for
// the forward pass, the filter gradient and the data gradient alike, the
// calls that count, rank (heuristics), size (workspace) and time (Find)
// that operation's algorithms. ForEachConvSearch visits the three, so the
// candidates (conv_cudnn_cuda.cc) and the calibration
// (conv_calibration_cuda.cc) each say their flow once.
#ifndef SPILL_LAYERS_CUDA_CONV_SEARCH_CUDA_H_
#define SPILL_LAYERS_CUDA_CONV_SEARCH_CUDA_H_

#include <cudnn.h>

#include "framework/base/status.h"
#include "layers/conv_candidates.h"
#include "layers/cuda/conv_cudnn_cuda.h"

namespace spill {
namespace cuda {

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

#endif  // SPILL_LAYERS_CUDA_CONV_SEARCH_CUDA_H_
