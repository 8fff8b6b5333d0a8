// Calibration of the GPU convolutions (convolution_cuda.h): every candidate
// of every operation timed by cudnnFind*AlgorithmEx on scratch buffers, once
// per geometry; candidates cuDNN fails to run are dropped.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "framework/base/logging.h"
#include "framework/device/device_registry.h"
#include "layers/cuda/conv_cudnn_cuda.h"
#include "layers/cuda/convolution_cuda.h"
#include "layers/cuda/layer_util_cuda.h"

namespace spill {
namespace {

// Room left to cuDNN's own allocations when the scratch workspace is sized
// from the free memory.
constexpr size_t kCalibrationMarginBytes = size_t{64} << 20;  // 64 MiB

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

// cuDNN's results as measurements: an algorithm that ran within the
// workspace offered, one that wanted more (untested), one that failed.
// Results in math the layer does not use (TF32 on float32 operands unless
// asked for) count as none.
template <typename Perf>
std::vector<ConvMeasurement> Measurements(const Perf* perf, int returned, size_t workspace,
                                          bool sixteen_bit) {
  std::vector<ConvMeasurement> results;
  for (int r = 0; r < returned; ++r) {
    const Perf& p = perf[r];
    if (!cuda::ConvMathAllowed(p.mathType, sixteen_bit)) continue;
    ConvMeasurement m;
    m.algo = static_cast<int>(p.algo);
    if (p.status == CUDNN_STATUS_SUCCESS && p.time >= 0 && p.memory <= workspace) {
      m.seconds = static_cast<double>(p.time) * 1e-3;
    } else if (p.status == CUDNN_STATUS_ALLOC_FAILED || p.memory > workspace) {
      m.outcome = ConvMeasurement::Outcome::kNoWorkspace;
    } else {
      m.outcome = ConvMeasurement::Outcome::kFailed;
    }
    results.push_back(m);
  }
  return results;
}

// Scratch input, output and filter of one geometry, filled with small
// finite values, and a workspace for timing its candidates. Sized for
// float32 operands, which is room enough for 16-bit ones.
struct CalibrationBuffers {
  Scratch x, y, w, workspace;

  // False when the tensors do not fit the free memory. The workspace is the
  // largest candidate's, capped by the free memory (less a margin for
  // cuDNN's own needs), halved until an allocation succeeds.
  bool Allocate(const ConvGeometry& g, size_t largest, cudaStream_t stream) {
    const size_t x_bytes = static_cast<size_t>(g.batch * g.channels * g.in_plane()) * sizeof(float);
    const size_t y_bytes = static_cast<size_t>(g.batch * g.filters * g.out_plane()) * sizeof(float);
    const size_t w_bytes =
        static_cast<size_t>(g.filters * g.channels_per_group() * g.kernel[0] * g.kernel[1]) *
        sizeof(float);
    if (!x.Allocate(x_bytes) || !y.Allocate(y_bytes) || !w.Allocate(w_bytes)) return false;
    size_t free_bytes = 0, total_bytes = 0;
    SPILL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    size_t cap = std::min(
        largest, free_bytes > kCalibrationMarginBytes ? free_bytes - kCalibrationMarginBytes : 0);
    while (cap > 0 && !workspace.Allocate(cap)) cap /= 2;
    // Small finite values (0x3c3c3c3c is about 0.0115): timings need no more.
    SPILL_CUDA_CHECK(cudaMemsetAsync(x.data, 0x3c, x_bytes, stream));
    SPILL_CUDA_CHECK(cudaMemsetAsync(y.data, 0x3c, y_bytes, stream));
    SPILL_CUDA_CHECK(cudaMemsetAsync(w.data, 0x3c, w_bytes, stream));
    return true;
  }
};

}  // namespace

Status CudaConvolutionLayer::Record(int op, const std::vector<ConvMeasurement>& results,
                                    size_t workspace) const {
  const MergedTimes merged = MergeMeasurements(algos_[op], results, workspace);
  for (const std::string& dropped : merged.dropped) {
    SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "': cuDNN failed to run " << dropped
                               << " for the " << ConvOpName(op) << "; it is no longer a candidate";
  }
  if (merged.kept.empty()) {
    return Internal("convolution '" + name() + "': cuDNN failed to run every candidate of the " +
                    ConvOpName(op));
  }
  algos_[op] = merged.kept;
  seconds_[op] = merged.seconds;
  if (!merged.measured) {
    SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "': no " << ConvOpName(op)
                               << " algorithm could be measured; keeping estimates";
    for (size_t r = 0; r < algos_[op].size(); ++r) seconds_[op][r] = kConvRankSeconds * (1 + r);
  }
  return Status::Ok();
}

bool CudaConvolutionLayer::CopyTimesFrom(const CudaConvolutionLayer& other) const {
  if (&other == this) return true;
  std::scoped_lock lock(mutex_, other.mutex_);
  for (int op = 0; op < kConvOps; ++op) {
    // The other's list is this one's, less what its calibration dropped.
    size_t at = 0;
    for (const ConvCandidate& c : algos_[op]) {
      if (at < other.algos_[op].size() && other.algos_[op][at].algo == c.algo &&
          other.algos_[op][at].workspace == c.workspace) {
        ++at;
      }
    }
    if (at != other.algos_[op].size()) return false;
  }
  for (int op = 0; op < kConvOps; ++op) {
    algos_[op] = other.algos_[op];
    seconds_[op] = other.seconds_[op];
  }
  return true;
}

Status CudaConvolutionLayer::Calibrate(CudaDevice& device) const {
  if (!prepared_) {
    return Internal("convolution '" + name() + "' was shaped without a usable GPU (" + why_ + ")");
  }
  size_t largest = 0;
  for (const auto& list : algos_) {
    for (const ConvCandidate& a : list) largest = std::max(largest, a.workspace);
  }
  cudaStream_t stream = device.compute_stream();
  CalibrationBuffers buffers;
  if (!buffers.Allocate(geom_, largest, stream)) {
    SPILL_LOG_WARNING(kLayers) << "convolution '" << name()
                               << "': no device memory for calibration buffers; keeping "
                                  "estimated algorithm times";
    return Status::Ok();
  }
  const Scratch &x = buffers.x, &y = buffers.y, &w = buffers.w, &workspace = buffers.workspace;
  cudnnHandle_t handle = device.cudnn();
  const cuda::ConvDescriptors& d = whole_;
  std::lock_guard<std::mutex> lock(mutex_);
  int count = 0;
  Status recorded = Status::Ok();
  // A failed Find as a whole keeps the estimates (a warning), not an error.
  auto record = [&](int op, cudnnStatus_t status, std::vector<ConvMeasurement> results) {
    if (status != CUDNN_STATUS_SUCCESS) {
      SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "': timing the " << ConvOpName(op)
                                 << " algorithms failed (" << cudnnGetErrorString(status)
                                 << "); keeping estimates";
      cudaGetLastError();  // a failed timing must not surface as a later launch error
      return;
    }
    if (recorded.ok()) recorded = Record(op, results, workspace.bytes);
  };
  const cuda::ConvBuffers timed{x.data, y.data, w.data};
  SPILL_RETURN_IF_ERROR(cuda::ForEachConvSearch([&](auto search) -> Status {
    using Search = decltype(search);
    SPILL_CUDNN_RETURN_IF_ERROR(Search::MaxCount(handle, &count));
    std::vector<typename Search::Perf> perf(std::max(count, 1));
    int returned = 0;
    const cudnnStatus_t status = Search::Find(handle, d, timed, count, &returned, perf.data(),
                                              workspace.data, workspace.bytes);
    record(Search::kOp, status,
           Measurements(perf.data(), returned, workspace.bytes, d.sixteen_bit()));
    return Status::Ok();
  }));
  // The scratch buffers are freed on return; nothing may still use them.
  SPILL_CUDA_CHECK(cudaStreamSynchronize(stream));
  return recorded;
}

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
}  // namespace spill
