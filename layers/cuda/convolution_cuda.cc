// convolution on the GPU with cuDNN (see convolution_cuda.h).
//
// Descriptors are made once, when the layer is shaped, and only read
// afterwards. The candidate lists (algorithm, name, workspace) are fixed at
// the same time, so indices chosen by the memory runtime stay valid; only the
// candidates' times change, when CalibrateCudaConvolutions measures them
// (under the layer's mutex).
#include "layers/cuda/convolution_cuda.h"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "framework/device_registry.h"
#include "framework/layer_registry.h"
#include "framework/logging.h"
#include "framework/units.h"
#include "layers/convolution_layer.h"
#include "layers/cuda/layer_util_cuda.h"

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
namespace {

// The operations of a convolution, as indices into per-operation lists.
enum ConvOpIndex { kFwd = 0, kBwdFilter = 1, kBwdData = 2, kNumOps = 3 };

// Candidates not yet measured: cuDNN's heuristic order, 1 ms per rank.
constexpr double kRankSeconds = 1e-3;

std::string AlgoName(int op, int algo) {
  const char* name = nullptr;
  switch (op) {
    case kFwd:
      switch (static_cast<cudnnConvolutionFwdAlgo_t>(algo)) {
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
          name = "cudnn_fwd_implicit_gemm";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
          name = "cudnn_fwd_implicit_precomp_gemm";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
          name = "cudnn_fwd_gemm";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
          name = "cudnn_fwd_direct";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
          name = "cudnn_fwd_fft";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
          name = "cudnn_fwd_fft_tiling";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
          name = "cudnn_fwd_winograd";
          break;
        case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
          name = "cudnn_fwd_winograd_nonfused";
          break;
        default:
          break;
      }
      return name ? name : "cudnn_fwd_algo_" + std::to_string(algo);
    case kBwdFilter:
      switch (static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo)) {
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
          name = "cudnn_bwd_filter_algo_0";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
          name = "cudnn_bwd_filter_algo_1";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
          name = "cudnn_bwd_filter_fft";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
          name = "cudnn_bwd_filter_algo_3";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
          name = "cudnn_bwd_filter_winograd";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
          name = "cudnn_bwd_filter_winograd_nonfused";
          break;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
          name = "cudnn_bwd_filter_fft_tiling";
          break;
        default:
          break;
      }
      return name ? name : "cudnn_bwd_filter_algo_" + std::to_string(algo);
    default:
      switch (static_cast<cudnnConvolutionBwdDataAlgo_t>(algo)) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
          name = "cudnn_bwd_data_algo_0";
          break;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
          name = "cudnn_bwd_data_algo_1";
          break;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
          name = "cudnn_bwd_data_fft";
          break;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
          name = "cudnn_bwd_data_fft_tiling";
          break;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
          name = "cudnn_bwd_data_winograd";
          break;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
          name = "cudnn_bwd_data_winograd_nonfused";
          break;
        default:
          break;
      }
      return name ? name : "cudnn_bwd_data_algo_" + std::to_string(algo);
  }
}

const char* OpName(int op) {
  return op == kFwd ? "forward" : op == kBwdFilter ? "filter gradient" : "data gradient";
}

// One usable algorithm of one operation.
struct ConvAlgo {
  int algo = 0;
  std::string name;
  size_t workspace = 0;
};

// The handle used to query cuDNN's heuristics while layers are shaped, when
// no device exists yet: made once on the current GPU, kept for the life of
// the process (destroying it during static destruction could outlive the
// CUDA runtime), and used only under `mutex`.
struct QueryContext {
  std::mutex mutex;
  bool tried = false;
  cudnnHandle_t handle = nullptr;
  std::string why;  // why there is no handle
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
  cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    q.why = std::string("cudnnCreate failed: ") + cudnnGetErrorString(status);
    cudaGetLastError();  // clear a sticky runtime error, if any
    return nullptr;
  }
  q.handle = handle;
  return handle;
}

bool MathAllowed(cudnnMathType_t math) {
  return math == CUDNN_DEFAULT_MATH || math == CUDNN_FMA_MATH;
}

// The usable algorithms among cuDNN's heuristic results, in their order,
// each once. Preferred: deterministic ones with plain float math; where none
// is, the best of what there is (the descriptor's FMA math still applies).
// `workspace(algo, &bytes)` returns false where the size query fails.
template <typename Perf, typename WorkspaceFn>
std::vector<ConvAlgo> UsableAlgorithms(int op, const Perf* perf, int returned,
                                       WorkspaceFn workspace) {
  std::vector<ConvAlgo> tiers[4];  // math & deterministic, math, deterministic, any
  for (int r = 0; r < returned; ++r) {
    const Perf& p = perf[r];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    const int algo = static_cast<int>(p.algo);
    size_t bytes = 0;
    if (!workspace(p.algo, &bytes)) continue;
    const bool math = MathAllowed(p.mathType), deterministic = p.determinism == CUDNN_DETERMINISTIC;
    const bool in_tier[4] = {math && deterministic, math, deterministic, true};
    for (int t = 0; t < 4; ++t) {
      if (!in_tier[t]) continue;
      bool seen = false;
      for (const ConvAlgo& a : tiers[t]) seen = seen || a.algo == algo;
      if (!seen) tiers[t].push_back({algo, AlgoName(op, algo), bytes});
    }
  }
  for (auto& tier : tiers) {
    if (!tier.empty()) return tier;
  }
  return {};
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

// A cudaMalloc'd scratch buffer for calibration.
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;

  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (data != nullptr) cudaFree(data);
  }
  bool Allocate(size_t size) {
    if (size == 0) return true;
    if (cudaMalloc(&data, size) != cudaSuccess) {
      cudaGetLastError();  // clear the error
      data = nullptr;
      return false;
    }
    bytes = size;
    return true;
  }
};

class CudaConvolutionLayer : public ConvolutionLayer {
 public:
  explicit CudaConvolutionLayer(LayerParams& params) : ConvolutionLayer(params) {}

  ~CudaConvolutionLayer() override {
    if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
    if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
    if (bias_desc_) cudnnDestroyTensorDescriptor(bias_desc_);
    if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
    if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
  }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    SPILL_RETURN_IF_ERROR(ConvolutionLayer::Reshape(inputs, outputs));
    std::lock_guard<std::mutex> lock(mutex_);
    prepared_ = false;
    for (auto& list : algos_) list.clear();
    for (auto& list : seconds_) list.clear();
    QueryContext& q = Query();
    std::lock_guard<std::mutex> query_lock(q.mutex);
    cudnnHandle_t handle = QueryHandleLocked(q);
    if (handle == nullptr) {
      // No GPU: plans can still be made, from cuDNN's usual zero-workspace
      // algorithms; running the layer is an error.
      why_ = q.why;
      algos_[kFwd] = {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                       AlgoName(kFwd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM), 0}};
      algos_[kBwdFilter] = {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                             AlgoName(kBwdFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1), 0}};
      algos_[kBwdData] = {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                           AlgoName(kBwdData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1), 0}};
    } else {
      SPILL_RETURN_IF_ERROR(SetDescriptors());
      SPILL_RETURN_IF_ERROR(QueryAlgorithms(handle));
      prepared_ = true;
    }
    for (int op = 0; op < kNumOps; ++op) {
      for (size_t r = 0; r < algos_[op].size(); ++r) seconds_[op].push_back(kRankSeconds * (1 + r));
    }
    return Status::Ok();
  }

  int num_algorithm_ops(Pass pass) const override {
    return pass == Pass::kForward ? 1 : (propagate_down(0) ? 2 : 1);
  }

  std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op) const override {
    if (op < 0 || op >= num_algorithm_ops(pass)) return {};
    const int index = OpIndex(pass, op);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<AlgorithmCandidate> candidates;
    for (size_t r = 0; r < algos_[index].size(); ++r) {
      candidates.push_back({algos_[index][r].name, seconds_[index][r], algos_[index][r].workspace});
    }
    return candidates;
  }

  // The workspace of the default (first) candidates.
  size_t workspace_bytes(Pass pass) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t bytes = 0;
    for (int op = 0; op < num_algorithm_ops(pass); ++op) {
      const std::vector<ConvAlgo>& list = algos_[OpIndex(pass, op)];
      if (!list.empty()) bytes = std::max(bytes, list[0].workspace);
    }
    return bytes;
  }

  void Forward(const ForwardArgs& args) const override {
    CheckPrepared();
    CudaDevice& device = cuda::DeviceOf(args.device);
    const ConvAlgo& a = Chosen(kFwd, args.algorithms, 0, args.workspace);
    const float one = 1.0f, zero = 0.0f;
    SPILL_CUDNN_CHECK(cudnnConvolutionForward(
        device.cudnn(), &one, x_desc_, args.inputs[0].data(), w_desc_, args.params[0].data(),
        conv_desc_, static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), args.workspace.data,
        args.workspace.bytes, &zero, y_desc_, args.outputs[0].data()));
    if (bias_) {
      SPILL_CUDNN_CHECK(cudnnAddTensor(device.cudnn(), &one, bias_desc_, args.params[1].data(),
                                       &one, y_desc_, args.outputs[0].data()));
    }
  }

  // Operation 0: the filter (and bias) gradient; 1: the data gradient.
  void Backward(const BackwardArgs& args) const override {
    CheckPrepared();
    CudaDevice& device = cuda::DeviceOf(args.device);
    const float one = 1.0f, zero = 0.0f;
    const float* dy = args.output_grads[0].data();
    if (float* dw = cuda::ParamGrad(args, 0)) {
      const ConvAlgo& a = Chosen(kBwdFilter, args.algorithms, 0, args.workspace);
      SPILL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          device.cudnn(), &one, x_desc_, args.inputs[0].data(), y_desc_, dy, conv_desc_,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), args.workspace.data,
          args.workspace.bytes, &zero, w_desc_, dw));
    }
    if (bias_) {
      if (float* db = cuda::ParamGrad(args, 1)) {
        SPILL_CUDNN_CHECK(
            cudnnConvolutionBackwardBias(device.cudnn(), &one, y_desc_, dy, &zero, bias_desc_, db));
      }
    }
    if (float* dx = cuda::InputGrad(args, 0)) {
      const ConvAlgo& a = Chosen(kBwdData, args.algorithms, 1, args.workspace);
      const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
      SPILL_CUDNN_CHECK(cudnnConvolutionBackwardData(
          device.cudnn(), &one, w_desc_, args.params[0].data(), y_desc_, dy, conv_desc_,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), args.workspace.data,
          args.workspace.bytes, &beta, x_desc_, dx));
    }
  }

  Status Calibrate(CudaDevice& device) const;

  // Layers of the same geometry have the same candidates and times.
  std::string GeometryKey() const {
    const ConvGeometry& g = geom_;
    return Shape(g.batch, g.channels, g.height, g.width).ToString() + " f" +
           std::to_string(g.filters) + " k" + std::to_string(g.kernel[0]) + "x" +
           std::to_string(g.kernel[1]) + " s" + std::to_string(g.stride[0]) + "x" +
           std::to_string(g.stride[1]) + " p" + std::to_string(g.pad[0]) + "x" +
           std::to_string(g.pad[1]) + " d" + std::to_string(g.dilation[0]) + "x" +
           std::to_string(g.dilation[1]) + " g" + std::to_string(g.groups);
  }

  // Takes `other`'s measured times when both list the same candidates.
  bool CopyTimesFrom(const CudaConvolutionLayer& other) const {
    if (&other == this) return true;
    std::scoped_lock lock(mutex_, other.mutex_);
    for (int op = 0; op < kNumOps; ++op) {
      if (algos_[op].size() != other.algos_[op].size()) return false;
      for (size_t i = 0; i < algos_[op].size(); ++i) {
        if (algos_[op][i].algo != other.algos_[op][i].algo ||
            algos_[op][i].workspace != other.algos_[op][i].workspace) {
          return false;
        }
      }
    }
    for (int op = 0; op < kNumOps; ++op) seconds_[op] = other.seconds_[op];
    return true;
  }

 private:
  static int OpIndex(Pass pass, int op) {
    if (pass == Pass::kForward) return kFwd;
    return op == 0 ? kBwdFilter : kBwdData;
  }

  void CheckPrepared() const {
    SPILL_CHECK(prepared_) << "convolution '" << name() << "' was shaped without a usable GPU ("
                           << why_ << "); it cannot run";
  }

  // The algorithm chosen for argument slot `slot` (the default, the first
  // candidate, when none is chosen), checked against the workspace given.
  const ConvAlgo& Chosen(int op, const std::vector<int>& algorithms, int slot,
                         const Workspace& workspace) const {
    const std::vector<ConvAlgo>& list = algos_[op];
    size_t index = 0;
    if (slot < static_cast<int>(algorithms.size()) && algorithms[slot] >= 0) {
      index = static_cast<size_t>(algorithms[slot]);
    }
    SPILL_CHECK(index < list.size())
        << "convolution '" << name() << "': algorithm " << index << " chosen for the " << OpName(op)
        << ", which has " << list.size() << " candidates";
    const ConvAlgo& a = list[index];
    SPILL_CHECK(workspace.bytes >= a.workspace && (a.workspace == 0 || workspace.data != nullptr))
        << "convolution '" << name() << "': " << a.name << " needs " << a.workspace
        << " bytes of workspace, got " << workspace.bytes;
    return a;
  }

  Status SetDescriptors() {
    const ConvGeometry& g = geom_;
    for (int64_t v : {g.batch, g.channels, g.height, g.width, g.filters, g.out_height, g.out_width,
                      g.kernel[0], g.kernel[1], g.stride[0], g.stride[1], g.pad[0], g.pad[1],
                      g.dilation[0], g.dilation[1], g.groups}) {
      if (!FitsInt(v)) return InvalidArgument("convolution sizes exceed cuDNN's int range");
    }
    auto i = [](int64_t v) { return static_cast<int>(v); };
    if (!x_desc_) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&x_desc_));
    if (!y_desc_) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&y_desc_));
    if (!bias_desc_) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&bias_desc_));
    if (!w_desc_) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&w_desc_));
    if (!conv_desc_) SPILL_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv_desc_));
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW,
                                                           CUDNN_DATA_FLOAT, i(g.batch),
                                                           i(g.channels), i(g.height), i(g.width)));
    SPILL_CUDNN_RETURN_IF_ERROR(
        cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(g.batch),
                                   i(g.filters), i(g.out_height), i(g.out_width)));
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(
        bias_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, i(g.filters), 1, 1));
    SPILL_CUDNN_RETURN_IF_ERROR(
        cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, i(g.filters),
                                   i(g.channels_per_group()), i(g.kernel[0]), i(g.kernel[1])));
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
        conv_desc_, i(g.pad[0]), i(g.pad[1]), i(g.stride[0]), i(g.stride[1]), i(g.dilation[0]),
        i(g.dilation[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(conv_desc_, i(g.groups)));
    // Plain float32 FMA arithmetic: no TF32 tensor cores.
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    SPILL_CUDNN_RETURN_IF_ERROR(
        cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &n, &c, &h, &w));
    if (n != g.batch || c != g.filters || h != g.out_height || w != g.out_width) {
      return Internal("cuDNN computes a " + Shape(n, c, h, w).ToString() +
                      " output for convolution '" + name() + "', the layer " +
                      Shape(g.batch, g.filters, g.out_height, g.out_width).ToString());
    }
    return Status::Ok();
  }

  Status QueryAlgorithms(cudnnHandle_t handle) {
    int count = 0;
    {
      SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(count, 1));
      int returned = 0;
      SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
          handle, x_desc_, w_desc_, conv_desc_, y_desc_, count, &returned, perf.data()));
      algos_[kFwd] = UsableAlgorithms(
          kFwd, perf.data(), returned, [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, conv_desc_,
                                                           y_desc_, algo,
                                                           bytes) == CUDNN_STATUS_SUCCESS;
          });
    }
    {
      SPILL_CUDNN_RETURN_IF_ERROR(
          cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(count, 1));
      int returned = 0;
      SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, x_desc_, y_desc_, conv_desc_, w_desc_, count, &returned, perf.data()));
      algos_[kBwdFilter] =
          UsableAlgorithms(kBwdFilter, perf.data(), returned,
                           [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
                             return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                        handle, x_desc_, y_desc_, conv_desc_, w_desc_, algo,
                                        bytes) == CUDNN_STATUS_SUCCESS;
                           });
    }
    {
      SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(count, 1));
      int returned = 0;
      SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          handle, w_desc_, y_desc_, conv_desc_, x_desc_, count, &returned, perf.data()));
      algos_[kBwdData] = UsableAlgorithms(
          kBwdData, perf.data(), returned, [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_,
                                                                conv_desc_, x_desc_, algo,
                                                                bytes) == CUDNN_STATUS_SUCCESS;
          });
    }
    for (int op = 0; op < kNumOps; ++op) {
      if (algos_[op].empty()) {
        return InvalidArgument(
            std::string("cuDNN offers no algorithm for the ") + OpName(op) + " of convolution '" +
            name() + "' (" +
            Shape(geom_.batch, geom_.channels, geom_.height, geom_.width).ToString() + " input)");
      }
    }
    return Status::Ok();
  }

  // Measured times of one operation (cudnnFind*AlgorithmEx results) into
  // seconds_; unmeasured candidates rank after every measured one. Under
  // mutex_.
  template <typename Perf>
  void Record(int op, cudnnStatus_t status, const Perf* perf, int returned,
              size_t workspace) const {
    if (status != CUDNN_STATUS_SUCCESS) {
      SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "': timing the " << OpName(op)
                                 << " algorithms failed (" << cudnnGetErrorString(status)
                                 << "); keeping estimates";
      cudaGetLastError();  // a failed timing must not surface as a later launch error
      return;
    }
    const std::vector<ConvAlgo>& list = algos_[op];
    std::vector<double> measured(list.size(), -1.0);
    for (int r = 0; r < returned; ++r) {
      const Perf& p = perf[r];
      if (p.status != CUDNN_STATUS_SUCCESS || p.time < 0 || p.memory > workspace) continue;
      if (!MathAllowed(p.mathType)) continue;
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].algo != static_cast<int>(p.algo)) continue;
        const double seconds = static_cast<double>(p.time) * 1e-3;
        measured[i] = measured[i] < 0 ? seconds : std::min(measured[i], seconds);
      }
    }
    double slowest = -1;
    for (double s : measured) slowest = std::max(slowest, s);
    if (slowest < 0) {
      SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "': no " << OpName(op)
                                 << " algorithm could be measured; keeping estimates";
      return;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      seconds_[op][i] = measured[i] >= 0 ? measured[i] : slowest * static_cast<double>(2 + i);
    }
  }

  mutable std::mutex mutex_;  // guards seconds_ (and the lists while shaping)
  bool prepared_ = false;     // descriptors and candidates come from cuDNN
  std::string why_;           // why not, when not
  std::vector<ConvAlgo> algos_[kNumOps];
  mutable std::vector<double> seconds_[kNumOps];
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, bias_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
};

Status CudaConvolutionLayer::Calibrate(CudaDevice& device) const {
  if (!prepared_)
    return Internal("convolution '" + name() + "' was shaped without a usable GPU (" + why_ + ")");
  const ConvGeometry& g = geom_;
  const size_t x_bytes = static_cast<size_t>(g.batch * g.channels * g.in_plane()) * sizeof(float);
  const size_t y_bytes = static_cast<size_t>(g.batch * g.filters * g.out_plane()) * sizeof(float);
  const size_t w_bytes =
      static_cast<size_t>(g.filters * g.channels_per_group() * g.kernel[0] * g.kernel[1]) *
      sizeof(float);
  size_t largest = 0;
  for (const auto& list : algos_) {
    for (const ConvAlgo& a : list) largest = std::max(largest, a.workspace);
  }
  Scratch x, y, w, workspace;
  if (!x.Allocate(x_bytes) || !y.Allocate(y_bytes) || !w.Allocate(w_bytes)) {
    SPILL_LOG_WARNING(kLayers) << "convolution '" << name()
                               << "': no device memory for calibration buffers ("
                               << FormatBytes(static_cast<double>(x_bytes + y_bytes + w_bytes))
                               << "); keeping estimated algorithm times";
    return Status::Ok();
  }
  // The workspace: the largest candidate's, capped by the free memory (less a
  // margin for cuDNN's own needs), halved until an allocation succeeds.
  size_t free_bytes = 0, total_bytes = 0;
  SPILL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t margin = size_t{64} << 20;
  size_t cap = std::min(largest, free_bytes > margin ? free_bytes - margin : 0);
  while (cap > 0 && !workspace.Allocate(cap)) cap /= 2;
  cudaStream_t stream = device.compute_stream();
  // Small finite values (0x3c3c3c3c is about 0.0115): timings need no more.
  SPILL_CUDA_CHECK(cudaMemsetAsync(x.data, 0x3c, x_bytes, stream));
  SPILL_CUDA_CHECK(cudaMemsetAsync(y.data, 0x3c, y_bytes, stream));
  SPILL_CUDA_CHECK(cudaMemsetAsync(w.data, 0x3c, w_bytes, stream));
  cudnnHandle_t handle = device.cudnn();
  std::lock_guard<std::mutex> lock(mutex_);
  int count = 0;
  {
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(count, 1));
    int returned = 0;
    const cudnnStatus_t status = cudnnFindConvolutionForwardAlgorithmEx(
        handle, x_desc_, x.data, w_desc_, w.data, conv_desc_, y_desc_, y.data, count, &returned,
        perf.data(), workspace.data, workspace.bytes);
    Record(kFwd, status, perf.data(), returned, workspace.bytes);
  }
  {
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(std::max(count, 1));
    int returned = 0;
    const cudnnStatus_t status = cudnnFindConvolutionBackwardFilterAlgorithmEx(
        handle, x_desc_, x.data, y_desc_, y.data, conv_desc_, w_desc_, w.data, count, &returned,
        perf.data(), workspace.data, workspace.bytes);
    Record(kBwdFilter, status, perf.data(), returned, workspace.bytes);
  }
  {
    SPILL_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(std::max(count, 1));
    int returned = 0;
    const cudnnStatus_t status = cudnnFindConvolutionBackwardDataAlgorithmEx(
        handle, w_desc_, w.data, y_desc_, y.data, conv_desc_, x_desc_, x.data, count, &returned,
        perf.data(), workspace.data, workspace.bytes);
    Record(kBwdData, status, perf.data(), returned, workspace.bytes);
  }
  // The scratch buffers are freed on return; nothing may still use them.
  SPILL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return Status::Ok();
}

}  // namespace

Status CalibrateCudaConvolutions(const Net& net, CudaDevice& device) {
  std::map<std::string, const CudaConvolutionLayer*> measured;  // by geometry
  for (int id = 0; id < net.num_layers(); ++id) {
    const auto* conv = dynamic_cast<const CudaConvolutionLayer*>(&net.layer(id));
    if (conv == nullptr) continue;
    const std::string key = conv->GeometryKey();
    auto it = measured.find(key);
    if (it != measured.end() && conv->CopyTimesFrom(*it->second)) continue;
    SPILL_RETURN_IF_ERROR(
        conv->Calibrate(device).WithContext("calibrating convolution '" + conv->name() + "'"));
    measured.emplace(key, conv);
  }
  return Status::Ok();
}

namespace {

// Tools calibrate through the device registry (CalibrateNet) before the
// memory runtime reserves its region.
const bool calibration_registered =
    RegisterNetCalibration(DeviceType::kCuda, [](const Net& net, Device& device) {
      return CalibrateCudaConvolutions(net, cuda::DeviceOf(&device));
    });

}  // namespace

SPILL_REGISTER_LAYER(convolution, kCuda, CudaConvolutionLayer);

}  // namespace spill
