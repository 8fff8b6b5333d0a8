// Slices of the batch on the GPU (memory.chunk, streamed steps): every CUDA
// layer, run over slices of the batch as the executor runs it - every slice
// of sweep 0, then of sweep 1, ..., each call on views of the slice, the
// workspace staying with the step - gives the bits of the same layer run
// over the whole batch image by image (BatchSlice::image_order, as when an
// algorithm is pinned): outputs, saved tensors, running statistics, input
// gradients in both modes and parameter gradients, for every algorithm
// candidate. And image by image agrees with the CPU layer, within the
// tolerances of the layer tests.
//
// Without a usable GPU every test skips, saying why (and fails instead with
// SPILL_REQUIRE_GPU=1, as tools/ci/gpu_check.sh runs it).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "tests/testing/cuda_layer_harness.h"

namespace spill {
namespace {

using testing::BitIdentical;
using testing::Compare;
using testing::DeviceTensors;
using testing::LayerCase;
using testing::LayerHarness;

constexpr uint64_t kSeed = 7;

// Every tensor a run leaves that a test compares.
struct Result {
  std::vector<std::vector<float>> outputs, aux, params, input_grads, param_grads;
};

// Calls `call(slice, images)` as the executor does for `pass`: over the
// whole batch in image order (chunk 0), else every sweep over slices of
// `chunk` images.
template <typename Call>
void OverSlices(const Layer& layer, Pass pass, int64_t batch, int64_t chunk, Call call) {
  if (chunk == 0) {
    BatchSlice whole;
    whole.image_order = true;
    call(whole, batch);
    return;
  }
  for (int sweep = 0; sweep < layer.slice_sweeps(pass); ++sweep) {
    for (int64_t begin = 0; begin < batch; begin += chunk) {
      call(BatchSlice{begin, batch, sweep, nullptr}, std::min(chunk, batch - begin));
    }
  }
}

// Inputs and gradients as the layer tests make them; overwritten gradients
// start as NaN, so one read before it is written shows.
void Prepare(LayerHarness& h, const LayerCase& c, bool accumulate) {
  testing::FillInputs(h, c.quantize);
  testing::FillRandom(&h.output_grads, 300);
  if (accumulate) {
    testing::FillRandom(&h.input_grads, 400);
  } else {
    testing::FillValue(&h.input_grads, std::numeric_limits<float>::quiet_NaN());
  }
  testing::FillValue(&h.param_grads, std::numeric_limits<float>::quiet_NaN());
  testing::FillValue(&h.outputs, std::numeric_limits<float>::quiet_NaN());
  testing::FillValue(&h.aux, 0.0f);
}

// Forward, a recomputing forward (which must give the same bits), then
// backward, each over slices of `chunk` images (0: the whole batch).
Result RunLayer(CudaDevice& device, const LayerCase& c, int64_t chunk,
                const std::vector<int>& forward, const std::vector<int>& backward,
                bool accumulate) {
  LayerHarness h(c.entry, c.inputs, DeviceType::kCuda);
  Prepare(h, c, accumulate);
  const Layer& layer = h.layer();
  const int64_t batch = c.inputs[0].n();
  DeviceTensors d(device, h, c.inputs);
  d.Upload();
  OverSlices(layer, Pass::kForward, batch, chunk, [&](const BatchSlice& s, int64_t n) {
    d.Forward(c.phase, false, kSeed, forward, s, n);
  });
  d.Download();
  const Result first{h.outputs, h.aux, h.params, {}, {}};
  OverSlices(layer, Pass::kForward, batch, chunk, [&](const BatchSlice& s, int64_t n) {
    d.Forward(c.phase, true, kSeed + 1, forward, s, n);  // another seed: masks are reused
  });
  d.Download();
  for (size_t i = 0; i < h.outputs.size(); ++i) {
    EXPECT_TRUE(BitIdentical(h.outputs[i], first.outputs[i])) << "recomputed output " << i;
  }
  const std::vector<bool> modes(c.inputs.size(), accumulate);
  OverSlices(layer, Pass::kBackward, batch, chunk,
             [&](const BatchSlice& s, int64_t n) { d.Backward(modes, backward, s, n); });
  d.Download();
  return {first.outputs, first.aux, first.params, h.input_grads, h.param_grads};
}

// The CPU layer's results for the same inputs (forward, then backward).
Result RunCpu(const LayerCase& c, bool accumulate) {
  LayerHarness cpu(c.entry, c.inputs, DeviceType::kCpu);
  Prepare(cpu, c, accumulate);
  if (!accumulate) testing::FillValue(&cpu.input_grads, 0.0f);
  testing::FillValue(&cpu.param_grads, 0.0f);
  cpu.Forward(c.phase, false, kSeed);
  cpu.Backward(std::vector<bool>(c.inputs.size(), accumulate));
  return {cpu.outputs, cpu.aux, cpu.params, cpu.input_grads, cpu.param_grads};
}

void ExpectBitIdentical(const Result& whole, const Result& sliced, LayerHarness& h) {
  const Layer& layer = h.layer();
  for (size_t i = 0; i < whole.outputs.size(); ++i)
    EXPECT_TRUE(BitIdentical(sliced.outputs[i], whole.outputs[i])) << "output " << i;
  for (size_t i = 0; i < whole.aux.size(); ++i)
    EXPECT_TRUE(BitIdentical(sliced.aux[i], whole.aux[i])) << "aux " << i;
  for (size_t i = 0; i < whole.params.size(); ++i)
    EXPECT_TRUE(BitIdentical(sliced.params[i], whole.params[i])) << h.param_specs[i].name;
  for (size_t i = 0; i < whole.input_grads.size(); ++i) {
    if (!layer.propagates_to(static_cast<int>(i))) continue;
    EXPECT_TRUE(BitIdentical(sliced.input_grads[i], whole.input_grads[i]))
        << "input gradient " << i;
  }
  for (size_t i = 0; i < whole.param_grads.size(); ++i) {
    if (!h.param_specs[i].trainable) continue;
    EXPECT_TRUE(BitIdentical(sliced.param_grads[i], whole.param_grads[i]))
        << "gradient of " << h.param_specs[i].name;
  }
}

void ExpectNear(const Result& gpu, const Result& cpu, LayerHarness& h, double tol) {
  for (size_t i = 0; i < cpu.outputs.size(); ++i)
    EXPECT_EQ(Compare(gpu.outputs[i], cpu.outputs[i], tol), "") << "output " << i;
  for (size_t i = 0; i < cpu.params.size(); ++i)
    EXPECT_EQ(Compare(gpu.params[i], cpu.params[i], tol), "") << h.param_specs[i].name;
  for (size_t i = 0; i < cpu.input_grads.size(); ++i) {
    if (!h.layer().propagates_to(static_cast<int>(i))) continue;
    EXPECT_EQ(Compare(gpu.input_grads[i], cpu.input_grads[i], tol), "") << "input gradient " << i;
  }
  for (size_t i = 0; i < cpu.param_grads.size(); ++i) {
    if (!h.param_specs[i].trainable) continue;
    EXPECT_EQ(Compare(gpu.param_grads[i], cpu.param_grads[i], tol), "")
        << "gradient of " << h.param_specs[i].name;
  }
}

class CudaSlicesTest : public testing::CudaTest, public ::testing::WithParamInterface<LayerCase> {};

TEST_P(CudaSlicesTest, SlicesGiveTheBitsOfTheWholeBatchInImageOrder) {
  const LayerCase& c = GetParam();
  SCOPED_TRACE(c.entry);
  LayerHarness probe(c.entry, c.inputs, DeviceType::kCuda);
  const Layer& layer = probe.layer();
  ASSERT_TRUE(layer.supports_slices());
  const int64_t batch = c.inputs[0].n();
  const auto forward = testing::Trials(layer, Pass::kForward);
  const auto backward = testing::Trials(layer, Pass::kBackward);
  for (bool accumulate : {false, true}) {
    const Result cpu = RunCpu(c, accumulate);
    for (size_t t = 0; t < std::max(forward.size(), backward.size()); ++t) {
      const auto& [fwd, fwd_tol] = forward[std::min(t, forward.size() - 1)];
      const auto& [bwd, bwd_tol] = backward[std::min(t, backward.size() - 1)];
      SCOPED_TRACE(std::string(accumulate ? "accumulating" : "overwriting") +
                   testing::Describe(layer, Pass::kForward, fwd) +
                   testing::Describe(layer, Pass::kBackward, bwd));
      const Result whole = RunLayer(*device_, c, 0, fwd, bwd, accumulate);
      ExpectNear(whole, cpu, probe, std::max(fwd_tol, bwd_tol));
      for (int64_t chunk = 1; chunk < batch; ++chunk) {
        SCOPED_TRACE("slices of " + std::to_string(chunk) + " of " + std::to_string(batch));
        ExpectBitIdentical(whole, RunLayer(*device_, c, chunk, fwd, bwd, accumulate), probe);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, CudaSlicesTest, ::testing::ValuesIn(testing::CudaLayerCases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace spill
