// Every CUDA layer against its CPU twin: both are built from the same YAML
// entry through the layer registry, fed the same random inputs and
// parameters, and run forward (training and, where it differs, evaluation)
// and backward in both gradient modes (overwrite, accumulate). The CUDA
// results are copied back and compared with the CPU's, within the
// tolerances of tests/testing/cuda_layer_harness.h. Layers whose CUDA
// kernels replay the CPU's arithmetic (ReLU, dropout's mask, pooling,
// concat, add) agree exactly in practice; the tolerance is the same for
// simplicity.
//
// Also checked: a recomputing forward reproduces the output bit for bit and
// leaves the running statistics alone; overwritten gradients never read
// their old contents (the CUDA buffers start as NaN); every cuDNN algorithm
// candidate of each convolution operation gives the same result; and
// CalibrateCudaConvolutions, run through the device registry as the tools
// run it, measures times for a small network. (Slices of the batch:
// cuda_layer_slices_test.cc, in the same binary.)
//
// Without a usable GPU every test that needs one skips, saying why (and
// fails instead with SPILL_REQUIRE_GPU=1, as tools/ci/gpu_check.sh runs it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/device/device_registry.h"
#include "framework/graph/layer_registry.h"
#include "framework/graph/net.h"
#include "tests/testing/cuda_layer_harness.h"

namespace spill {
namespace {

using testing::BitIdentical;
using testing::Compare;
using testing::CudaLayerCases;
using testing::CudaTest;
using testing::Describe;
using testing::DeviceTensors;
using testing::FillInputs;
using testing::FillRandom;
using testing::FillValue;
using testing::LayerCase;
using testing::LayerHarness;
using testing::Trials;

class CudaLayersTest : public CudaTest, public ::testing::WithParamInterface<LayerCase> {};

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

INSTANTIATE_TEST_SUITE_P(Layers, CudaLayersTest, ::testing::ValuesIn(CudaLayerCases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) {
                           return std::string(info.param.name);
                         });

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
        const std::vector<AlgorithmCandidate> candidates =
            layer.algorithm_candidates(pass, op, layer.batch());
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
      const auto ca = a.algorithm_candidates(pass, op, a.batch()),
                 cb = b.algorithm_candidates(pass, op, b.batch());
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
