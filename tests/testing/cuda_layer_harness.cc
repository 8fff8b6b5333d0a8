#include "tests/testing/cuda_layer_harness.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "framework/base/random.h"
#include "framework/cuda/cuda_check.h"
#include "tests/testing/gpu_required.h"

namespace spill {
namespace testing {

double ToleranceFor(const std::string& algorithm) {
  return algorithm.find("fft") != std::string::npos ||
                 algorithm.find("winograd") != std::string::npos
             ? kTransformTolerance
             : kTolerance;
}

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

DeviceTensors::DeviceTensors(CudaDevice& device, LayerHarness& h,
                             const std::vector<Shape>& input_shapes)
    : device_(device), h_(h), input_shapes_(input_shapes), batch_(input_shapes[0].n()) {
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
      for (const AlgorithmCandidate& c : layer.algorithm_candidates(pass, op, layer.batch())) {
        workspace_bytes_ = std::max(workspace_bytes_, c.workspace);
      }
    }
  }
  if (workspace_bytes_ > 0) SPILL_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

DeviceTensors::~DeviceTensors() {
  for (auto* list :
       {&inputs_, &outputs_, &params_, &aux_, &input_grads_, &output_grads_, &param_grads_}) {
    for (float* p : *list) cudaFree(p);
  }
  if (workspace_) cudaFree(workspace_);
}

void DeviceTensors::Upload() {
  Copy(h_.inputs, inputs_, true);
  Copy(h_.outputs, outputs_, true);
  Copy(h_.params, params_, true);
  Copy(h_.aux, aux_, true);
  Copy(h_.input_grads, input_grads_, true);
  Copy(h_.output_grads, output_grads_, true);
  Copy(h_.param_grads, param_grads_, true);
}

void DeviceTensors::Download() {
  SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
  Copy(h_.inputs, inputs_, false);
  Copy(h_.outputs, outputs_, false);
  Copy(h_.params, params_, false);
  Copy(h_.aux, aux_, false);
  Copy(h_.input_grads, input_grads_, false);
  Copy(h_.output_grads, output_grads_, false);
  Copy(h_.param_grads, param_grads_, false);
}

Tensor DeviceTensors::View(const Shape& shape, float* data, const BatchSlice& slice,
                           int64_t images) const {
  if (!slice.sliced() || batch_ < 2 || shape.n() != batch_) return Tensor(shape, data);
  return Tensor(Shape(images, shape.c(), shape.h(), shape.w()),
                data + slice.begin * shape.sample_size());
}

void DeviceTensors::Forward(Phase phase, bool recompute, uint64_t seed,
                            const std::vector<int>& algorithms, const BatchSlice& slice,
                            int64_t images) {
  ForwardArgs args;
  const Layer& layer = h_.layer();
  for (size_t i = 0; i < inputs_.size(); ++i)
    args.inputs.push_back(View(input_shapes_[i], inputs_[i], slice, images));
  for (size_t i = 0; i < outputs_.size(); ++i)
    args.outputs.push_back(View(h_.output_shapes()[i], outputs_[i], slice, images));
  for (size_t i = 0; i < params_.size(); ++i)
    args.params.emplace_back(h_.param_specs[i].shape, params_[i]);
  const std::vector<AuxSpec> aux = layer.aux();
  for (size_t i = 0; i < aux_.size(); ++i)
    args.aux.push_back(View(aux[i].shape, aux_[i], slice, images));
  args.workspace = {workspace_, workspace_bytes_};
  args.phase = phase;
  args.recompute = recompute;
  args.seed = seed;
  args.device = &device_;
  args.algorithms = algorithms;
  args.slice = slice;
  layer.Forward(args);
  SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
}

void DeviceTensors::Backward(const std::vector<bool>& accumulate,
                             const std::vector<int>& algorithms, const BatchSlice& slice,
                             int64_t images) {
  BackwardArgs args;
  const Layer& layer = h_.layer();
  for (size_t i = 0; i < inputs_.size(); ++i) {
    args.inputs.push_back(View(input_shapes_[i], inputs_[i], slice, images));
    const bool wants = layer.propagates_to(static_cast<int>(i));
    args.input_grads.push_back(wants ? View(input_shapes_[i], input_grads_[i], slice, images)
                                     : Tensor());
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    args.outputs.push_back(View(h_.output_shapes()[i], outputs_[i], slice, images));
    args.output_grads.push_back(View(h_.output_shapes()[i], output_grads_[i], slice, images));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    args.params.emplace_back(h_.param_specs[i].shape, params_[i]);
    args.param_grads.push_back(
        h_.param_specs[i].trainable ? Tensor(h_.param_specs[i].shape, param_grads_[i]) : Tensor());
  }
  const std::vector<AuxSpec> aux = layer.aux();
  for (size_t i = 0; i < aux_.size(); ++i)
    args.aux.push_back(View(aux[i].shape, aux_[i], slice, images));
  args.accumulate = accumulate;
  args.workspace = {workspace_, workspace_bytes_};
  args.device = &device_;
  args.algorithms = algorithms;
  args.slice = slice;
  layer.Backward(args);
  SPILL_CUDA_CHECK(cudaStreamSynchronize(device_.compute_stream()));
}

void DeviceTensors::Allocate(const std::vector<std::vector<float>>& host,
                             std::vector<float*>* device) {
  for (const auto& v : host) {
    float* p = nullptr;
    SPILL_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(float)));
    device->push_back(p);
  }
}

void DeviceTensors::Copy(std::vector<std::vector<float>>& host, const std::vector<float*>& device,
                         bool up) {
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
  if (h.layer().type() == "embedding") {
    // Symbol ids: whole numbers in range, repeated (their gradients add up
    // in one row), and every few positions one with no row - negative, past
    // the vocabulary, not whole - which gives zeros and no gradient.
    const int64_t vocabulary = h.param_specs[0].shape.n();
    std::vector<float>& ids = h.inputs[0];
    for (size_t i = 0; i < ids.size(); ++i) {
      switch (i % 11) {
        case 3:
          ids[i] = -1.0f;
          break;
        case 6:
          ids[i] = static_cast<float>(vocabulary);
          break;
        case 9:
          ids[i] = 1.5f;
          break;
        default:
          ids[i] = static_cast<float>((i * 5 + 2) % static_cast<size_t>(vocabulary));
      }
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

namespace {

// Names of the candidates of each operation of a pass (none for layers
// without algorithm choices).
std::vector<std::vector<std::string>> CandidateNames(const Layer& layer, Pass pass) {
  std::vector<std::vector<std::string>> names;
  for (int op = 0; op < layer.num_algorithm_ops(pass); ++op) {
    names.emplace_back();
    for (const AlgorithmCandidate& c : layer.algorithm_candidates(pass, op, layer.batch()))
      names.back().push_back(c.name);
  }
  return names;
}

}  // namespace

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

CudaDevice* CudaTest::device_ = nullptr;
std::string CudaTest::skip_reason_;

void CudaTest::SetUpTestSuite() {
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

void CudaTest::TearDownTestSuite() {
  delete device_;
  device_ = nullptr;
}

void CudaTest::SetUp() {
  if (device_ == nullptr) {
    SPILL_GPU_UNAVAILABLE("no usable CUDA GPU, so the CUDA layers are not tested: " + skip_reason_);
  }
}

}  // namespace testing
}  // namespace spill
