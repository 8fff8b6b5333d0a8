// Every CUDA layer against its CPU twin: both are built from the same YAML
// entry through the layer registry, fed the same random inputs and
// parameters, and run forward (training and, where it differs, evaluation)
// and backward in both gradient modes (overwrite, accumulate). The CUDA
// results are copied back and compared with the CPU's.
//
// Tolerance: for each tensor, max |cuda - cpu| <= tol * max(|cpu|), with
//   tol = 1e-4 in general: float32 sums of at most a few hundred terms of
//     magnitude <= 1 (inputs and parameters are uniform in [-1, 1)) that
//     differ only in summation order, or in libm vs CUDA powf/exp, stay
//     around 1e-6 relative to the largest magnitude, so 1e-4 leaves two
//     orders of margin while still catching any wrong index, window, sign or
//     scale (those err by O(1) relative);
//   tol = 1e-3 for cuDNN's FFT and Winograd convolution algorithms, which
//     compute in a transformed domain and round more.
// Layers whose CUDA kernels replay the CPU's arithmetic (ReLU, dropout's
// mask, pooling, concat, add) agree exactly in practice; the tolerance is
// the same for simplicity.
//
// Also checked: a recomputing forward reproduces the output bit for bit and
// leaves the running statistics alone; overwritten gradients never read
// their old contents (the CUDA buffers start as NaN); every cuDNN algorithm
// candidate of each convolution operation gives the same result; and
// CalibrateCudaConvolutions, run through the device registry as the tools
// run it, measures times for a small network.
//
// Without a usable GPU every test that needs one skips, saying why (and
// fails instead with SPILL_REQUIRE_GPU=1, as tools/ci/gpu_check.sh runs it).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_device.h"
#include "framework/device_registry.h"
#include "framework/layer_registry.h"
#include "framework/net.h"
#include "framework/random.h"
#include "tests/testing/gpu_required.h"
#include "tests/testing/layer_harness.h"

namespace spill {
namespace {

using testing::LayerHarness;

constexpr double kTolerance = 1e-4;
constexpr double kTransformTolerance = 1e-3;

double ToleranceFor(const std::string& algorithm) {
  return algorithm.find("fft") != std::string::npos ||
                 algorithm.find("winograd") != std::string::npos
             ? kTransformTolerance
             : kTolerance;
}

// Empty when `cuda` matches `cpu` within tol * max |cpu|; else the worst
// element. NaN anywhere in `cuda` fails.
std::string Compare(const std::vector<float>& cuda, const std::vector<float>& cpu, double tol) {
  if (cuda.size() != cpu.size()) return "sizes differ";
  double scale = 0;
  for (float v : cpu) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const double limit = tol * std::max(scale, 1e-30);
  double worst = 0;
  size_t at = 0;
  bool failed = false;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double err = std::fabs(static_cast<double>(cuda[i]) - cpu[i]);
    if (!(err <= limit)) {
      if (!failed || !(err <= worst)) {
        worst = err;
        at = i;
      }
      failed = true;
    }
  }
  if (!failed) return "";
  std::ostringstream out;
  out << "element " << at << ": cuda " << cuda[at] << ", cpu " << cpu[at] << " (error " << worst
      << " > " << limit << " = " << tol << " * max |cpu| " << scale << ")";
  return out.str();
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Device copies of every tensor of a harness; the harness's host vectors are
// the staging area (Upload / Download copy all of them).
class DeviceTensors {
 public:
  DeviceTensors(CudaDevice& device, LayerHarness& h, const std::vector<Shape>& input_shapes)
      : device_(device), h_(h), input_shapes_(input_shapes) {
    Allocate(h.inputs, &inputs_);
    Allocate(h.outputs, &outputs_);
    Allocate(h.params, &params_);
    Allocate(h.aux, &aux_);
    Allocate(h.input_grads, &input_grads_);
    Allocate(h.output_grads, &output_grads_);
    Allocate(h.param_grads, &param_grads_);
    const Layer& layer = h.layer();
    workspace_bytes_ =
        std::max(layer.workspace_bytes(Pass::kForward), layer.workspace_bytes(Pass::kBackward));
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      for (int op = 0; op < layer.num_algorithm_ops(pass); ++op) {
        for (const AlgorithmCandidate& c : layer.algorithm_candidates(pass, op)) {
          workspace_bytes_ = std::max(workspace_bytes_, c.workspace);
        }
      }
    }
    if (workspace_bytes_ > 0) SPILL_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  }

  ~DeviceTensors() {
    for (auto* list :
         {&inputs_, &outputs_, &params_, &aux_, &input_grads_, &output_grads_, &param_grads_}) {
      for (float* p : *list) cudaFree(p);
    }
    if (workspace_) cudaFree(workspace_);
  }

  void Upload() {
    Copy(h_.inputs, inputs_, true);
    Copy(h_.outputs, outputs_, true);
    Copy(h_.params, params_, true);
    Copy(h_.aux, aux_, true);
    Copy(h_.input_grads, input_grads_, true);
    Copy(h_.output_grads, output_grads_, true);
    Copy(h_.param_grads, param_grads_, true);
  }

  void Download() {
    SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
    Copy(h_.inputs, inputs_, false);
    Copy(h_.outputs, outputs_, false);
    Copy(h_.params, params_, false);
    Copy(h_.aux, aux_, false);
    Copy(h_.input_grads, input_grads_, false);
    Copy(h_.output_grads, output_grads_, false);
    Copy(h_.param_grads, param_grads_, false);
  }

  void Forward(Phase phase, bool recompute, uint64_t seed,
               const std::vector<int>& algorithms = {}) {
    ForwardArgs args;
    const Layer& layer = h_.layer();
    for (size_t i = 0; i < inputs_.size(); ++i)
      args.inputs.emplace_back(input_shapes_[i], inputs_[i]);
    for (size_t i = 0; i < outputs_.size(); ++i)
      args.outputs.emplace_back(h_.output_shapes()[i], outputs_[i]);
    for (size_t i = 0; i < params_.size(); ++i)
      args.params.emplace_back(h_.param_specs[i].shape, params_[i]);
    const std::vector<AuxSpec> aux = layer.aux();
    for (size_t i = 0; i < aux_.size(); ++i) args.aux.emplace_back(aux[i].shape, aux_[i]);
    args.workspace = {workspace_, workspace_bytes_};
    args.phase = phase;
    args.recompute = recompute;
    args.seed = seed;
    args.device = &device_;
    args.algorithms = algorithms;
    layer.Forward(args);
    SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
  }

  void Backward(const std::vector<bool>& accumulate, const std::vector<int>& algorithms = {}) {
    BackwardArgs args;
    const Layer& layer = h_.layer();
    for (size_t i = 0; i < inputs_.size(); ++i) {
      args.inputs.emplace_back(input_shapes_[i], inputs_[i]);
      const bool wants = layer.propagates_to(static_cast<int>(i));
      args.input_grads.push_back(wants ? Tensor(input_shapes_[i], input_grads_[i]) : Tensor());
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      args.outputs.emplace_back(h_.output_shapes()[i], outputs_[i]);
      args.output_grads.emplace_back(h_.output_shapes()[i], output_grads_[i]);
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      args.params.emplace_back(h_.param_specs[i].shape, params_[i]);
      args.param_grads.push_back(h_.param_specs[i].trainable
                                     ? Tensor(h_.param_specs[i].shape, param_grads_[i])
                                     : Tensor());
    }
    const std::vector<AuxSpec> aux = layer.aux();
    for (size_t i = 0; i < aux_.size(); ++i) args.aux.emplace_back(aux[i].shape, aux_[i]);
    args.accumulate = accumulate;
    args.workspace = {workspace_, workspace_bytes_};
    args.device = &device_;
    args.algorithms = algorithms;
    layer.Backward(args);
    SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
  }

 private:
  static void Allocate(const std::vector<std::vector<float>>& host, std::vector<float*>* device) {
    for (const auto& v : host) {
      float* p = nullptr;
      SPILL_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(float)));
      device->push_back(p);
    }
  }

  void Copy(std::vector<std::vector<float>>& host, const std::vector<float*>& device, bool up) {
    for (size_t i = 0; i < host.size(); ++i) {
      if (host[i].empty()) continue;
      const size_t bytes = host[i].size() * sizeof(float);
      if (up) {
        device_.CopySync(device[i], host[i].data(), bytes, CopyKind::kHostToDevice);
      } else {
        device_.CopySync(host[i].data(), device[i], bytes, CopyKind::kDeviceToHost);
      }
    }
  }

  CudaDevice& device_;
  LayerHarness& h_;
  std::vector<Shape> input_shapes_;
  std::vector<float*> inputs_, outputs_, params_, aux_, input_grads_, output_grads_, param_grads_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

struct LayerCase {
  const char* name;
  const char* entry;
  std::vector<Shape> inputs;
  Phase phase = Phase::kTrain;
  bool quantize = false;  // inputs on a coarse grid: ties for max pooling
};

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

// The same reproducible inputs and parameters for both harnesses, made valid
// for the layer: labels in range, running variances positive.
void FillInputs(LayerHarness& h, bool quantize) {
  h.Randomize(11);
  if (h.layer().wants_labels()) {
    const int64_t classes = h.output_shapes()[0].c();
    std::vector<float>& labels = h.inputs.back();
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<float>((i * 7 + 3) % classes);
  }
  if (quantize) {
    for (auto& input : h.inputs) {
      for (float& v : input) v = std::round(v * 2.0f) / 2.0f;
    }
  }
  for (size_t i = 0; i < h.param_specs.size(); ++i) {
    if (h.param_specs[i].name == "running_var") {
      for (float& v : h.params[i]) v = 0.5f + std::fabs(v);
    }
  }
}

void FillRandom(std::vector<std::vector<float>>* tensors, uint64_t seed) {
  for (size_t i = 0; i < tensors->size(); ++i) {
    for (size_t j = 0; j < (*tensors)[i].size(); ++j)
      (*tensors)[i][j] = 2 * UniformAt(seed + i, j) - 1;
  }
}

void FillValue(std::vector<std::vector<float>>* tensors, float value) {
  for (auto& t : *tensors) std::fill(t.begin(), t.end(), value);
}

// One CUDA device per test suite; every test skips, saying why, without one.
class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (device_ != nullptr) return;
    std::string why;
    if (!CudaAvailable(&why)) {
      skip_reason_ = why;
      return;
    }
    auto device = CudaDevice::Create(0);
    if (!device.ok()) {
      skip_reason_ = device.status().ToString();
      return;
    }
    device_ = std::move(device).value().release();
  }

  static void TearDownTestSuite() {
    delete device_;
    device_ = nullptr;
  }

  void SetUp() override {
    if (device_ == nullptr) {
      SPILL_GPU_UNAVAILABLE("no usable CUDA GPU, so the CUDA layers are not tested: " +
                            skip_reason_);
    }
  }

  static CudaDevice* device_;
  static std::string skip_reason_;
};

CudaDevice* CudaTest::device_ = nullptr;
std::string CudaTest::skip_reason_;

class CudaLayersTest : public CudaTest, public ::testing::WithParamInterface<LayerCase> {};

// Names of the candidates of each operation of a pass (none for layers
// without algorithm choices).
std::vector<std::vector<std::string>> CandidateNames(const Layer& layer, Pass pass) {
  std::vector<std::vector<std::string>> names;
  for (int op = 0; op < layer.num_algorithm_ops(pass); ++op) {
    names.emplace_back();
    for (const AlgorithmCandidate& c : layer.algorithm_candidates(pass, op))
      names.back().push_back(c.name);
  }
  return names;
}

// Algorithm choices to try for a pass: trial t picks candidate
// min(t, count - 1) of each operation, so every candidate of every operation
// runs at least once. Returns the choices and the tolerance of each trial.
std::vector<std::pair<std::vector<int>, double>> Trials(const Layer& layer, Pass pass) {
  const auto names = CandidateNames(layer, pass);
  size_t trials = 1;
  for (const auto& op : names) trials = std::max(trials, op.size());
  std::vector<std::pair<std::vector<int>, double>> out;
  for (size_t t = 0; t < trials; ++t) {
    std::vector<int> choice;
    double tol = kTolerance;
    for (const auto& op : names) {
      if (op.empty()) {
        choice.push_back(-1);
        continue;
      }
      const size_t index = std::min(t, op.size() - 1);
      choice.push_back(static_cast<int>(index));
      tol = std::max(tol, ToleranceFor(op[index]));
    }
    out.push_back({choice, tol});
  }
  return out;
}

std::string Describe(const Layer& layer, Pass pass, const std::vector<int>& choice) {
  const auto names = CandidateNames(layer, pass);
  std::string text;
  for (size_t op = 0; op < choice.size() && op < names.size(); ++op) {
    if (choice[op] < 0) continue;
    text += (text.empty() ? " with " : ", ") + names[op][choice[op]];
  }
  return text;
}

TEST_P(CudaLayersTest, MatchesCpu) {
  const LayerCase& c = GetParam();
  SCOPED_TRACE(c.entry);
  LayerHarness cpu(c.entry, c.inputs, DeviceType::kCpu);
  LayerHarness gpu(c.entry, c.inputs, DeviceType::kCuda);
  ASSERT_EQ(cpu.output_shapes(), gpu.output_shapes());
  FillInputs(cpu, c.quantize);
  FillInputs(gpu, c.quantize);
  const Layer& layer = gpu.layer();
  const uint64_t seed = 7;
  const std::vector<std::vector<float>> initial_params = cpu.params;

  // ---- Forward, once per forward algorithm candidate ----
  cpu.Forward(c.phase, false, seed);
  std::vector<std::vector<float>> first_outputs, first_aux, first_params;
  for (const auto& [choice, tol] : Trials(layer, Pass::kForward)) {
    SCOPED_TRACE("forward" + Describe(layer, Pass::kForward, choice));
    gpu.params = initial_params;  // running statistics from their start
    FillValue(&gpu.outputs, std::numeric_limits<float>::quiet_NaN());
    FillValue(&gpu.aux, 0.0f);
    DeviceTensors d(*device_, gpu, c.inputs);
    d.Upload();
    d.Forward(c.phase, false, seed, choice);
    d.Download();
    for (size_t i = 0; i < cpu.outputs.size(); ++i)
      EXPECT_EQ(Compare(gpu.outputs[i], cpu.outputs[i], tol), "") << "output " << i;
    for (size_t i = 0; i < cpu.aux.size(); ++i)
      EXPECT_EQ(Compare(gpu.aux[i], cpu.aux[i], tol), "") << "aux " << i;
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      EXPECT_EQ(Compare(gpu.params[i], cpu.params[i], tol), "")
          << "param " << cpu.param_specs[i].name;
    }
    // A recomputing forward gives the same bits and leaves state alone.
    first_outputs = gpu.outputs;
    first_aux = gpu.aux;
    first_params = gpu.params;
    d.Forward(c.phase, true, seed + 1, choice);  // another seed: a saved mask must be reused
    d.Download();
    for (size_t i = 0; i < gpu.outputs.size(); ++i)
      EXPECT_TRUE(BitIdentical(gpu.outputs[i], first_outputs[i])) << "recomputed output " << i;
    for (size_t i = 0; i < gpu.aux.size(); ++i)
      EXPECT_TRUE(BitIdentical(gpu.aux[i], first_aux[i])) << "aux after recompute " << i;
    for (size_t i = 0; i < gpu.params.size(); ++i)
      EXPECT_TRUE(BitIdentical(gpu.params[i], first_params[i])) << "param after recompute " << i;
  }

  // ---- Backward: both gradient modes, once per backward candidate ----
  FillRandom(&cpu.output_grads, 300);
  gpu.output_grads = cpu.output_grads;
  gpu.outputs = first_outputs;  // the state the CPU's backward sees
  gpu.aux = first_aux;
  gpu.params = first_params;
  for (bool accumulate : {false, true}) {
    const std::vector<bool> modes(c.inputs.size(), accumulate);
    if (accumulate) {
      FillRandom(&cpu.input_grads, 400);
    } else {
      FillValue(&cpu.input_grads, 0.0f);
    }
    FillValue(&cpu.param_grads, 0.0f);
    cpu.Backward(modes);
    for (const auto& [choice, tol] : Trials(layer, Pass::kBackward)) {
      SCOPED_TRACE(std::string(accumulate ? "backward, accumulating" : "backward, overwriting") +
                   Describe(layer, Pass::kBackward, choice));
      if (accumulate) {
        FillRandom(&gpu.input_grads, 400);
      } else {
        // Overwritten gradients must not be read: NaN would show through.
        FillValue(&gpu.input_grads, std::numeric_limits<float>::quiet_NaN());
      }
      FillValue(&gpu.param_grads, std::numeric_limits<float>::quiet_NaN());
      DeviceTensors d(*device_, gpu, c.inputs);
      d.Upload();
      d.Backward(modes, choice);
      d.Download();
      for (size_t i = 0; i < cpu.input_grads.size(); ++i) {
        if (!layer.propagates_to(static_cast<int>(i))) continue;
        EXPECT_EQ(Compare(gpu.input_grads[i], cpu.input_grads[i], tol), "")
            << "input gradient " << i;
      }
      for (size_t i = 0; i < cpu.param_grads.size(); ++i) {
        if (!cpu.param_specs[i].trainable) continue;
        EXPECT_EQ(Compare(gpu.param_grads[i], cpu.param_grads[i], tol), "")
            << "gradient of " << cpu.param_specs[i].name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layers, CudaLayersTest,
    ::testing::Values(
        // Convolution: every cuDNN candidate of every operation is compared.
        LayerCase{
            "conv", "{type: convolution, filters: 4, kernel: 3, pad: 1}", {Shape(2, 3, 8, 8)}},
        LayerCase{"conv_asymmetric",
                  "{type: convolution, filters: 6, kernel: [3, 5], stride: [2, 1], pad: [1, 2]}",
                  {Shape(2, 4, 9, 11)}},
        LayerCase{"conv_dilation",
                  "{type: convolution, filters: 4, kernel: 3, dilation: [2, 3], pad: 2}",
                  {Shape(2, 3, 10, 12)}},
        LayerCase{"conv_groups",
                  "{type: convolution, filters: 6, kernel: 3, groups: 3, pad: 1, bias: false}",
                  {Shape(2, 6, 7, 7)}},
        LayerCase{"conv_depthwise",
                  "{type: convolution, filters: 8, kernel: 3, groups: 8, stride: 2, pad: 1}",
                  {Shape(2, 8, 9, 9)}},
        LayerCase{"conv_1x1", "{type: convolution, filters: 5, kernel: 1}", {Shape(3, 7, 6, 6)}},
        LayerCase{"conv_wide",
                  "{type: convolution, filters: 16, kernel: 3, pad: 1}",
                  {Shape(4, 16, 16, 16)}},
        LayerCase{"conv_5x5_stride",
                  "{type: convolution, filters: 8, kernel: 5, stride: 2, pad: 2}",
                  {Shape(2, 3, 20, 20)}},
        LayerCase{"conv_eval",
                  "{type: convolution, filters: 4, kernel: 3}",
                  {Shape(2, 2, 6, 6)},
                  Phase::kEval},
        // Fully connected.
        LayerCase{"fc", "{type: fully_connected, outputs: 7}", {Shape(3, 4, 3, 2)}},
        LayerCase{
            "fc_no_bias", "{type: fully_connected, outputs: 5, bias: false}", {Shape(4, 9, 1, 1)}},
        LayerCase{"fc_wide", "{type: fully_connected, outputs: 300}", {Shape(5, 64, 2, 2)}},
        // ReLU.
        LayerCase{"relu", "{type: relu}", {Shape(2, 3, 5, 7)}},
        LayerCase{"leaky_relu", "{type: relu, negative_slope: 0.1}", {Shape(2, 3, 5, 7)}},
        // Pooling.
        LayerCase{"max_pool", "{type: max_pool, kernel: 3, stride: 2}", {Shape(2, 3, 9, 9)}},
        LayerCase{"max_pool_ceil_pad",
                  "{type: max_pool, kernel: 3, stride: 2, pad: 1, ceil_mode: true}",
                  {Shape(2, 3, 10, 10)}},
        LayerCase{"max_pool_ties",
                  "{type: max_pool, kernel: 3, stride: 1, pad: 1}",
                  {Shape(2, 2, 6, 6)},
                  Phase::kTrain,
                  true},
        LayerCase{"max_pool_asymmetric",
                  "{type: max_pool, kernel: [2, 3], stride: [2, 1], pad: [1, 1]}",
                  {Shape(2, 3, 7, 8)}},
        LayerCase{
            "avg_pool", "{type: avg_pool, kernel: 3, stride: 2, pad: 1}", {Shape(2, 3, 9, 9)}},
        LayerCase{"avg_pool_exclude_pad",
                  "{type: avg_pool, kernel: 3, stride: 2, pad: 1, count_include_pad: false}",
                  {Shape(2, 3, 9, 9)}},
        LayerCase{"avg_pool_ceil",
                  "{type: avg_pool, kernel: 3, stride: 2, ceil_mode: true}",
                  {Shape(2, 3, 10, 10)}},
        LayerCase{"avg_pool_ceil_pad_exclude",
                  "{type: avg_pool, kernel: [3, 2], stride: [2, 2], pad: [1, 1], ceil_mode: true, "
                  "count_include_pad: false}",
                  {Shape(2, 3, 8, 9)}},
        LayerCase{"global_avg_pool", "{type: global_avg_pool}", {Shape(2, 5, 7, 6)}},
        // BatchNorm: many elements per channel (several per thread), few, and
        // evaluation with the running statistics.
        LayerCase{"batch_norm", "{type: batch_norm}", {Shape(4, 3, 17, 19)}},
        LayerCase{"batch_norm_small",
                  "{type: batch_norm, momentum: 0.2, eps: 0.001}",
                  {Shape(2, 4, 3, 3)}},
        LayerCase{"batch_norm_fc", "{type: batch_norm}", {Shape(8, 5, 1, 1)}},
        LayerCase{"batch_norm_eval", "{type: batch_norm}", {Shape(3, 4, 5, 5)}, Phase::kEval},
        // LRN: AlexNet's constants, and strong ones that exercise the formula.
        LayerCase{
            "lrn", "{type: lrn, size: 5, alpha: 0.0001, beta: 0.75, k: 1}", {Shape(2, 7, 4, 5)}},
        LayerCase{"lrn_strong",
                  "{type: lrn, size: 3, alpha: 2.0, beta: 0.75, k: 1.5}",
                  {Shape(2, 6, 3, 4)}},
        LayerCase{"lrn_wide_window",
                  "{type: lrn, size: 7, alpha: 1.0, beta: 0.5, k: 2}",
                  {Shape(2, 4, 3, 3)}},
        // Softmax with loss (labels as the second input).
        LayerCase{"softmax_loss",
                  "{type: softmax_loss, weight: 0.5}",
                  {Shape(3, 10, 1, 1), Shape(3, 1, 1, 1)}},
        LayerCase{
            "softmax_loss_spatial", "{type: softmax_loss}", {Shape(4, 3, 2, 2), Shape(4, 1, 1, 1)}},
        LayerCase{
            "softmax_loss_many", "{type: softmax_loss}", {Shape(2, 1000, 1, 1), Shape(2, 1, 1, 1)}},
        // Dropout: the CUDA mask matches the CPU's bit for bit.
        LayerCase{"dropout", "{type: dropout, ratio: 0.3}", {Shape(2, 3, 5, 7)}},
        LayerCase{"dropout_eval", "{type: dropout, ratio: 0.3}", {Shape(2, 3, 5, 7)}, Phase::kEval},
        // Joins.
        LayerCase{
            "concat", "{type: concat}", {Shape(2, 3, 4, 5), Shape(2, 2, 4, 5), Shape(2, 1, 4, 5)}},
        LayerCase{"concat_one", "{type: concat}", {Shape(2, 3, 4, 5)}},
        LayerCase{"add", "{type: add}", {Shape(2, 3, 4, 5), Shape(2, 3, 4, 5), Shape(2, 3, 4, 5)}},
        LayerCase{"add_many", "{type: add}", std::vector<Shape>(11, Shape(2, 3, 2, 3))}),
    [](const ::testing::TestParamInfo<LayerCase>& info) { return std::string(info.param.name); });

// The layers of mobile and modern networks (layers/activation_layers.h and
// the other vision layers), and the loss per pixel.
INSTANTIATE_TEST_SUITE_P(
    VisionLayers, CudaLayersTest,
    ::testing::Values(
        LayerCase{"relu6", "{type: relu6}", {Shape(2, 3, 5, 7)}},
        LayerCase{"clip", "{type: clip, min: -0.5, max: 0.25}", {Shape(2, 3, 5, 7)}},
        LayerCase{"hard_sigmoid", "{type: hard_sigmoid}", {Shape(2, 3, 5, 7)}},
        LayerCase{"hard_swish", "{type: hard_swish}", {Shape(2, 3, 5, 7)}},
        LayerCase{"sigmoid", "{type: sigmoid}", {Shape(2, 3, 5, 7)}},
        LayerCase{"silu", "{type: silu}", {Shape(2, 3, 5, 7)}},
        LayerCase{"gelu", "{type: gelu}", {Shape(2, 3, 5, 7)}},
        LayerCase{"multiply", "{type: multiply}", {Shape(2, 3, 4, 5), Shape(2, 3, 4, 5)}},
        LayerCase{"multiply_se", "{type: multiply}", {Shape(2, 6, 9, 9), Shape(2, 6, 1, 1)}},
        LayerCase{"multiply_se_first", "{type: multiply}", {Shape(2, 4, 1, 1), Shape(2, 4, 7, 3)}},
        LayerCase{"broadcast_add", "{type: broadcast_add}", {Shape(2, 5, 6, 6), Shape(2, 5, 1, 1)}},
        LayerCase{"channel_shuffle", "{type: channel_shuffle, groups: 3}", {Shape(2, 12, 4, 5)}},
        LayerCase{"slice", "{type: slice, begin: 2, end: 5}", {Shape(2, 7, 3, 4)}},
        LayerCase{"layer_norm", "{type: layer_norm, eps: 1e-6}", {Shape(3, 8, 5, 6)}},
        LayerCase{"layer_norm_pooled", "{type: layer_norm}", {Shape(4, 16, 1, 1)}},
        LayerCase{"scale", "{type: scale, value: 0.5}", {Shape(2, 5, 6, 7)}},
        LayerCase{"scale_bias", "{type: scale, bias: true}", {Shape(3, 4, 5, 5)}},
        LayerCase{"upsample_nearest", "{type: upsample, factor: [2, 3]}", {Shape(2, 3, 5, 4)}},
        LayerCase{"upsample_bilinear",
                  "{type: upsample, factor: 2, mode: bilinear}",
                  {Shape(2, 3, 5, 6)}},
        LayerCase{"upsample_bilinear_corners",
                  "{type: upsample, factor: 3, mode: bilinear, align_corners: true}",
                  {Shape(2, 2, 4, 3)}},
        LayerCase{"pad", "{type: pad, pad: [1, 0, 2, 3], value: -2}", {Shape(2, 3, 4, 5)}},
        LayerCase{"transposed_convolution",
                  "{type: transposed_convolution, filters: 6, kernel: 3, stride: 2, pad: 1, "
                  "output_pad: 1}",
                  {Shape(2, 4, 5, 5)}},
        LayerCase{"transposed_convolution_groups",
                  "{type: transposed_convolution, filters: 4, kernel: [2, 3], stride: [2, 1], "
                  "dilation: [1, 2], groups: 2, bias: false}",
                  {Shape(2, 6, 4, 5)}},
        LayerCase{"transposed_convolution_unet",
                  "{type: transposed_convolution, filters: 8, kernel: 2, stride: 2}",
                  {Shape(2, 16, 6, 6)}},
        LayerCase{"softmax_loss_pixels",
                  "{type: softmax_loss, weight: 0.5}",
                  {Shape(2, 4, 3, 5), Shape(2, 1, 3, 5)}}),
    [](const ::testing::TestParamInfo<LayerCase>& info) { return std::string(info.param.name); });

// Every layer type the CPU registers has a CUDA implementation.
TEST(CudaLayersRegistry, EveryCpuTypeHasACudaTwin) {
  const std::vector<std::string> cuda = LayerRegistry::Get().Types(DeviceType::kCuda);
  for (const std::string& type : LayerRegistry::Get().Types(DeviceType::kCpu)) {
    EXPECT_NE(std::find(cuda.begin(), cuda.end(), type), cuda.end())
        << type << " has no CUDA implementation";
  }
}

class CudaCalibrationTest : public CudaTest {};

TEST_F(CudaCalibrationTest, MeasuresConvolutionCandidates) {
  const char* yaml = R"(
name: calibration
layers:
  - {name: data, type: input, shape: [3, 16, 16]}
  - {name: conv1, type: convolution, filters: 8, kernel: 3, pad: 1, inputs: [data]}
  - {name: conv1b, type: convolution, filters: 8, kernel: 3, pad: 1, inputs: [data]}
  - {name: sum, type: add, inputs: [conv1, conv1b]}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 8, kernel: 3, stride: 2, groups: 2}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: loss, type: softmax_loss}
)";
  auto spec = ParseNetString(yaml, "calibration.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  NetOptions options;
  options.batch = 2;
  options.device = DeviceType::kCuda;
  auto net = Net::Build(*spec, options);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  // Through the device registry, as the tools do.
  Status status = CalibrateNet(**net, *device_);
  ASSERT_TRUE(status.ok()) << status.ToString();
  int convolutions = 0;
  for (int id = 0; id < (*net)->num_layers(); ++id) {
    const Layer& layer = (*net)->layer(id);
    if (layer.type() != "convolution") continue;
    ++convolutions;
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      for (int op = 0; op < layer.num_algorithm_ops(pass); ++op) {
        const std::vector<AlgorithmCandidate> candidates = layer.algorithm_candidates(pass, op);
        ASSERT_FALSE(candidates.empty()) << layer.name();
        bool measured = false;
        for (size_t r = 0; r < candidates.size(); ++r) {
          EXPECT_TRUE(std::isfinite(candidates[r].seconds) && candidates[r].seconds > 0)
              << layer.name() << " " << candidates[r].name << ": " << candidates[r].seconds;
          measured = measured || candidates[r].seconds != 1e-3 * static_cast<double>(1 + r);
        }
        EXPECT_TRUE(measured) << layer.name() << ": no candidate of operation " << op
                              << " was measured";
      }
    }
  }
  EXPECT_EQ(convolutions, 3);
  // conv1b has conv1's geometry: the same candidates and times.
  const Layer& a = (*net)->layer((*net)->FindLayer("conv1"));
  const Layer& b = (*net)->layer((*net)->FindLayer("conv1b"));
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    for (int op = 0; op < a.num_algorithm_ops(pass); ++op) {
      const auto ca = a.algorithm_candidates(pass, op), cb = b.algorithm_candidates(pass, op);
      ASSERT_EQ(ca.size(), cb.size());
      for (size_t r = 0; r < ca.size(); ++r) {
        EXPECT_EQ(ca[r].name, cb[r].name);
        EXPECT_EQ(ca[r].seconds, cb[r].seconds);
        EXPECT_EQ(ca[r].workspace, cb[r].workspace);
      }
    }
  }
}

}  // namespace
}  // namespace spill
