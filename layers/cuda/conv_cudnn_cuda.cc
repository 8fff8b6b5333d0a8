#include "layers/cuda/conv_cudnn_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <vector>

#include "framework/cuda/cuda_device.h"

namespace spill {
namespace cuda {
namespace {

struct NamedAlgo {
  int algo;
  const char* name;
};

const NamedAlgo kForwardAlgos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "cudnn_fwd_implicit_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "cudnn_fwd_implicit_precomp_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "cudnn_fwd_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "cudnn_fwd_direct"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "cudnn_fwd_fft"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "cudnn_fwd_fft_tiling"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "cudnn_fwd_winograd"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "cudnn_fwd_winograd_nonfused"},
};
const NamedAlgo kFilterAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "cudnn_bwd_filter_algo_0"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "cudnn_bwd_filter_algo_1"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "cudnn_bwd_filter_fft"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "cudnn_bwd_filter_algo_3"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, "cudnn_bwd_filter_winograd"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "cudnn_bwd_filter_winograd_nonfused"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "cudnn_bwd_filter_fft_tiling"},
};
const NamedAlgo kDataAlgos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "cudnn_bwd_data_algo_0"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "cudnn_bwd_data_algo_1"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "cudnn_bwd_data_fft"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "cudnn_bwd_data_fft_tiling"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "cudnn_bwd_data_winograd"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "cudnn_bwd_data_winograd_nonfused"},
};

template <size_t N>
const char* Lookup(const NamedAlgo (&table)[N], int algo) {
  for (const NamedAlgo& a : table) {
    if (a.algo == algo) return a.name;
  }
  return nullptr;
}

// The usable algorithms among cuDNN's heuristic results, in their order,
// each once. Preferred: deterministic ones with plain float math; where none
// is, the best of what there is (the descriptor's FMA math still applies).
// `workspace(algo, &bytes)` returns false where the size query fails.
template <typename Perf, typename WorkspaceFn>
std::vector<ConvCandidate> UsableAlgorithms(int op, const Perf* perf, int returned,
                                            bool sixteen_bit, WorkspaceFn workspace) {
  std::vector<ConvCandidate> tiers[4];  // math & deterministic, math, deterministic, any
  for (int r = 0; r < returned; ++r) {
    const Perf& p = perf[r];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const int algo = static_cast<int>(p.algo);
    size_t bytes = 0;
    if (!workspace(p.algo, &bytes)) continue;
    const bool math = ConvMathAllowed(p.mathType, sixteen_bit);
    const bool deterministic = p.determinism == CUDNN_DETERMINISTIC;
    const bool in_tier[4] = {math && deterministic, math, deterministic, true};
    for (int t = 0; t < 4; ++t) {
      if (!in_tier[t]) continue;
      bool seen = false;
      for (const ConvCandidate& a : tiers[t]) seen = seen || a.algo == algo;
      if (!seen) tiers[t].push_back({algo, ConvAlgoName(op, algo), bytes});
    }
  }
  for (auto& tier : tiers) {
    if (!tier.empty()) return tier;
  }
  return {};
}

// The handle used to query cuDNN while layers are shaped, when no device
// exists yet: made once on the current GPU, kept for the life of the
// process (destroying it during static destruction could outlive the CUDA
// runtime), and used only under `mutex`, which also serialises the cache's
// queries.
struct QueryContext {
  std::mutex mutex;
  bool tried = false;
  cudnnHandle_t handle = nullptr;
  std::string why;  // why there is no handle
  ConvCandidateCache cache;
};

QueryContext& Query() {
  static QueryContext* context = new QueryContext();
  return *context;
}

// Under Query().mutex.
cudnnHandle_t QueryHandleLocked(QueryContext& q) {
  if (q.tried) return q.handle;
  q.tried = true;
  if (!CudaAvailable(&q.why)) return nullptr;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    q.why = std::string("cudnnCreate failed: ") + cudnnGetErrorString(status);
    cudaGetLastError();  // clear a sticky runtime error, if any
    return nullptr;
  }
  q.handle = handle;
  return handle;
}

}  // namespace

std::string ConvAlgoName(int op, int algo) {
  const char* name = op == kConvForward      ? Lookup(kForwardAlgos, algo)
                     : op == kConvFilterGrad ? Lookup(kFilterAlgos, algo)
                                             : Lookup(kDataAlgos, algo);
  if (name != nullptr) return name;
  const char* prefix = op == kConvForward      ? "cudnn_fwd_algo_"
                       : op == kConvFilterGrad ? "cudnn_bwd_filter_algo_"
                                               : "cudnn_bwd_data_algo_";
  return prefix + std::to_string(algo);
}

bool ConvMathAllowed(cudnnMathType_t math, bool sixteen_bit) {
  return math == CUDNN_DEFAULT_MATH || math == CUDNN_FMA_MATH ||
         ((Tf32() || sixteen_bit) && math == CUDNN_TENSOR_OP_MATH);
}

cudnnDataType_t CudnnType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kF16:
      return CUDNN_DATA_HALF;
    case DType::kF32:
      break;
  }
  return CUDNN_DATA_FLOAT;
}

ConvDescriptors::~ConvDescriptors() {
  if (conv) cudnnDestroyConvolutionDescriptor(conv);
  if (w) cudnnDestroyFilterDescriptor(w);
  if (bias) cudnnDestroyTensorDescriptor(bias);
  if (y) cudnnDestroyTensorDescriptor(y);
  if (x) cudnnDestroyTensorDescriptor(x);
}

Status ConvDescriptors::Set(const ConvGeometry& g, const std::string& layer) {
  SPILL_RETURN_IF_ERROR(CheckDescriptorLimits(layer, g));
  for (int64_t v :
       {g.stride[0], g.stride[1], g.pad[0], g.pad[1], g.dilation[0], g.dilation[1], g.groups}) {
    if (v < 0 || v > INT_MAX) {
      return InvalidArgument("convolution '" + layer +
                             "': a stride, pad, dilation or group count of " + std::to_string(v) +
                             " exceeds cuDNN's int range");
    }
  }
  if (g.input_dtype != g.output_dtype) {
    return InvalidArgument("convolution '" + layer +
                           "': cuDNN takes input and output of one type, not " +
                           DTypeName(g.input_dtype) + " and " + DTypeName(g.output_dtype));
  }
  dtype = g.input_dtype;
  const cudnnDataType_t type = CudnnType(dtype);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  if (!x) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&x));
  if (!y) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&y));
  if (!bias) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&bias));
  if (!w) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&w));
  if (!conv) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv));
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, i(g.batch),
                                                         i(g.channels), i(g.height), i(g.width)));
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
      y, CUDNN_TENSOR_NCHW, type, i(g.batch), i(g.filters), i(g.out_height), i(g.out_width)));
  SPILL_CUDNN_RETURN_IF_ERROR(
      cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, type, 1, i(g.filters), 1, 1));
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, i(g.filters),
                                                         i(g.channels_per_group()), i(g.kernel[0]),
                                                         i(g.kernel[1])));
  // Sums in float32 whatever the storage (cuDNN's PSEUDO_HALF and
  // PSEUDO_BFLOAT16 configurations in 16 bits).
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
      conv, i(g.pad[0]), i(g.pad[1]), i(g.stride[0]), i(g.stride[1]), i(g.dilation[0]),
      i(g.dilation[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(conv, i(g.groups)));
  // Float32: plain FMA arithmetic, or TF32 tensor cores where the process
  // asked for them (run.precision tf32): CUDNN_DEFAULT_MATH permits them. 16
  // bits: tensor cores wherever cuDNN has them.
  const cudnnMathType_t math = sixteen_bit() ? CUDNN_TENSOR_OP_MATH
                               : Tf32()      ? CUDNN_DEFAULT_MATH
                                             : CUDNN_FMA_MATH;
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv, math));
  int n = 0, c = 0, h = 0, wd = 0;
  SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd));
  if (n != g.batch || c != g.filters || h != g.out_height || wd != g.out_width) {
    return Internal("cuDNN computes a " + Shape(n, c, h, wd).ToString() +
                    " output for convolution '" + layer + "', the layer " +
                    Shape(g.batch, g.filters, g.out_height, g.out_width).ToString());
  }
  return Status::Ok();
}

StatusOr<ConvCandidates> QueryConvCandidates(cudnnHandle_t handle, const ConvDescriptors& d) {
  ConvCandidates found;
  SPILL_RETURN_IF_ERROR(ForEachConvSearch([&](auto search) -> Status {
    using Search = decltype(search);
    int count = 0;
    SPILL_CUDNN_RETURN_IF_ERROR(Search::MaxCount(handle, &count));
    std::vector<typename Search::Perf> perf(std::max(count, 1));
    int returned = 0;
    SPILL_CUDNN_RETURN_IF_ERROR(Search::Heuristics(handle, d, count, &returned, perf.data()));
    found.ops[Search::kOp] =
        UsableAlgorithms(Search::kOp, perf.data(), returned, d.sixteen_bit(),
                         [&](typename Search::Algo algo, size_t* bytes) {
                           return Search::Workspace(handle, d, algo, bytes) == CUDNN_STATUS_SUCCESS;
                         });
    return Status::Ok();
  }));
  return found;
}

bool ConvQueryAvailable(std::string* why) {
  QueryContext& q = Query();
  std::lock_guard<std::mutex> lock(q.mutex);
  if (QueryHandleLocked(q) != nullptr) return true;
  *why = q.why;
  return false;
}

StatusOr<ConvCandidates> CachedConvCandidates(const ConvGeometry& g, const ConvDescriptors& d) {
  QueryContext& q = Query();
  std::lock_guard<std::mutex> lock(q.mutex);
  cudnnHandle_t handle = QueryHandleLocked(q);
  if (handle == nullptr) return Unimplemented(q.why);
  return q.cache.Get(g, [&](const ConvGeometry&) { return QueryConvCandidates(handle, d); });
}

const ConvCandidateCache& ConvCandidateCacheInUse() { return Query().cache; }

}  // namespace cuda
}  // namespace spill
