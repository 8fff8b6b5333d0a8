// Stochastic depth (`add` with `survival`): an iteration that drops a
// residual branch computes exactly the network without it - the same loss
// and gradients, bit for bit, with zero gradients for the branch's
// parameters - and skips only the layers that reach the loss through the
// branch alone; evaluation scales the branch by its survival; the draw
// follows the seed. That every memory mode and allocator trains such a
// network bit-identically to the baseline, plan == run, is memory_test's
// `depth` network (tests/testing/test_networks.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "memory/runtime/runtime.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

// A unit whose branch (conv1 .. conv2) survives half the iterations, around
// the stem's output; relu1 is also read by a second loss in kShared.
constexpr char kUnit[] = R"(
layers:
  - {name: data, type: input, shape: [2, 5, 5]}
  - {name: stem, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: conv1, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: bn, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: sum, type: add, inputs: [conv2, stem], survival: 0.5}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)";

// The same network without the unit: what a dropped iteration computes.
constexpr char kWithoutUnit[] = R"(
layers:
  - {name: data, type: input, shape: [2, 5, 5]}
  - {name: stem, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)";

constexpr char kShared[] = R"(
layers:
  - {name: data, type: input, shape: [2, 5, 5]}
  - {name: stem, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: conv1, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: sum, type: add, inputs: [conv2, stem], survival: 0.5}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
  - {name: side, type: global_avg_pool, inputs: [relu1]}
  - {name: side_fc, type: fully_connected, outputs: 3}
  - {name: side_loss, type: softmax_loss}
)";

// A network under the baseline mode (every tensor kept for the whole
// iteration, so a test can read any of them after a run).
class Runner {
 public:
  explicit Runner(const char* yaml) {
    auto net = Net::Build(testing::MustParse(yaml), {3, DeviceType::kCpu});
    SPILL_CHECK(net.ok()) << net.status().ToString();
    net_ = std::move(net).value();
    MemoryOptions options;
    SPILL_CHECK(ApplyMemoryMode("baseline", &options).ok());
    auto runtime = MemoryRuntime::Create(net_->view(), options, &device_);
    SPILL_CHECK(runtime.ok()) << runtime.status().ToString();
    runtime_ = std::move(runtime).value();
    executor_ = std::make_unique<Executor>(*net_, &device_, *runtime_);
    SPILL_CHECK(InitializeParameters(*net_, *runtime_, 3).ok());
    images_.resize(net_->input_shape().numel());
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = 2 * UniformAt(5, i) - 1;
    labels_ = {0, 2, 1};
  }

  double Run(uint64_t seed, Phase phase = Phase::kTrain) {
    HostBatch batch{images_.data(), labels_.data()};
    auto result = executor_->Run(batch, phase, seed);
    SPILL_CHECK(result.ok()) << result.status().ToString();
    return result->loss;
  }

  std::vector<float> Tensor(int layer, bool grad, int param = 0) const {
    const LayerTensors& lt = net_->schedule().layers[layer];
    const TensorId id = grad ? lt.param_grads[param] : lt.outputs[0];
    const float* data = runtime_->Data(id);
    return std::vector<float>(data, data + net_->schedule().tensors[id].shape.numel());
  }
  std::vector<float> Output(const std::string& layer) const {
    return Tensor(net_->FindLayer(layer), false);
  }
  std::vector<float> Grad(const std::string& layer, int param = 0) const {
    return Tensor(net_->FindLayer(layer), true, param);
  }

  std::set<std::string> Skipped() const {
    std::set<std::string> names;
    for (size_t id = 0; id < executor_->skipped().size(); ++id) {
      if (executor_->skipped()[id]) names.insert(net_->layer(static_cast<int>(id)).name());
    }
    return names;
  }

  const Executor& executor() const { return *executor_; }

 private:
  CpuDevice device_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<MemoryRuntime> runtime_;
  std::unique_ptr<Executor> executor_;
  std::vector<float> images_, labels_;
};

bool AllZero(const std::vector<float>& values) {
  for (float v : values) {
    if (v != 0) return false;
  }
  return true;
}

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(StochasticDepthTest, ADroppedIterationComputesTheNetworkWithoutTheBranch) {
  Runner unit(kUnit), plain(kWithoutUnit);
  const double plain_loss = plain.Run(1);
  const std::set<std::string> branch = {"conv1", "bn", "relu1", "conv2"};
  int dropped = 0;
  constexpr int kSeeds = 24;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const double loss = unit.Run(seed);
    if (unit.Skipped().empty()) {
      EXPECT_NE(loss, plain_loss) << "seed " << seed;
      EXPECT_FALSE(AllZero(unit.Grad("conv1"))) << "seed " << seed;
      continue;
    }
    ++dropped;
    EXPECT_EQ(unit.Skipped(), branch) << "seed " << seed;
    EXPECT_EQ(loss, plain_loss) << "seed " << seed;
    for (const char* layer : {"stem", "fc"}) {
      EXPECT_TRUE(Same(unit.Grad(layer), plain.Grad(layer))) << layer << ", seed " << seed;
      EXPECT_TRUE(Same(unit.Grad(layer, 1), plain.Grad(layer, 1))) << layer << ", seed " << seed;
    }
    for (const char* layer : {"conv1", "conv2"}) {
      EXPECT_TRUE(AllZero(unit.Grad(layer))) << layer << ", seed " << seed;
      EXPECT_TRUE(AllZero(unit.Grad(layer, 1))) << layer << ", seed " << seed;
    }
    EXPECT_TRUE(AllZero(unit.Grad("bn"))) << "seed " << seed;
  }
  // p = 0.5: both outcomes occur among the seeds, at about half each.
  EXPECT_GT(dropped, kSeeds / 4);
  EXPECT_LT(dropped, kSeeds * 3 / 4);
  EXPECT_EQ(unit.executor().depth_stats().dropped_branches, dropped);
  EXPECT_EQ(unit.executor().depth_stats().skipped_layers, dropped * 4);
}

TEST(StochasticDepthTest, TheDrawFollowsTheSeed) {
  Runner a(kUnit), b(kUnit);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    EXPECT_EQ(a.Run(seed), b.Run(seed));
    EXPECT_EQ(a.Skipped(), b.Skipped());
  }
}

TEST(StochasticDepthTest, LayersAlsoReadOutsideTheBranchStillCompute) {
  Runner shared(kShared);
  bool seen = false;
  for (uint64_t seed = 1; seed <= 16 && !seen; ++seed) {
    shared.Run(seed);
    if (shared.Skipped().empty()) continue;
    seen = true;
    // relu1 feeds the side loss too: only conv2 reaches the loss through the branch alone.
    EXPECT_EQ(shared.Skipped(), std::set<std::string>{"conv2"});
    EXPECT_TRUE(AllZero(shared.Grad("conv2")));
    EXPECT_FALSE(AllZero(shared.Grad("conv1")));
  }
  EXPECT_TRUE(seen);
}

TEST(StochasticDepthTest, EvaluationScalesTheBranchBySurvival) {
  Runner unit(kUnit);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    unit.Run(seed, Phase::kEval);
    EXPECT_TRUE(unit.Skipped().empty());
    const std::vector<float> stem = unit.Output("stem"), branch = unit.Output("conv2"),
                             sum = unit.Output("sum");
    ASSERT_EQ(sum.size(), stem.size());
    int nonzero = 0;
    for (size_t i = 0; i < sum.size(); ++i) {
      // The branch scaled first, then the shortcut added (ONNX's Mul, Add).
      const float scaled = 0.5f * branch[i];
      EXPECT_EQ(sum[i], scaled + stem[i]) << i;
      nonzero += branch[i] != 0;
    }
    EXPECT_GT(nonzero, 0);
  }
}

TEST(StochasticDepthTest, TheMemoryTestsNetworkDropsSomeBranchesAndKeepsOthers) {
  // memory_test's equivalence of every mode on this network means something
  // only if its iterations do drop branches, and not all of them.
  const NetSpec spec = testing::MustParse(testing::kStochasticDepth);
  testing::SyntheticRun run = testing::SmallMemoryRun("baseline");
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_GT(trace->dropped_branches, 0);
  EXPECT_LT(trace->dropped_branches, 3 * run.steps);
}

// A sum that always keeps its branch hands its gradient on in its own
// tensor (BuildSchedule shares it with the branch's end and the unit's
// input); one that may drop it keeps them apart. Where no branch is dropped
// the two compute the same loss and gradients, bit for bit.
TEST(StochasticDepthTest, ASharedSumGradientComputesWhatSeparateOnesDo) {
  std::string always = kUnit, almost = kUnit;
  always.replace(always.find(", survival: 0.5"), 15, "");
  almost.replace(almost.find("survival: 0.5"), 13, "survival: 0.9999999");
  Runner shared(always.c_str()), apart(almost.c_str());
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EXPECT_EQ(shared.Run(seed), apart.Run(seed)) << "seed " << seed;
    ASSERT_TRUE(apart.Skipped().empty()) << "seed " << seed;
    for (const char* layer : {"stem", "conv1", "bn", "conv2", "fc"}) {
      EXPECT_TRUE(Same(shared.Grad(layer), apart.Grad(layer))) << layer << ", seed " << seed;
    }
  }
}

TEST(StochasticDepthTest, SurvivalOutsideItsRangeIsAnError) {
  for (const char* value : {"0", "1.5", "-0.2"}) {
    const std::string yaml = std::string(R"(
layers:
  - {name: data, type: input, shape: [1, 4, 4]}
  - {name: conv, type: convolution, filters: 1, kernel: 1}
  - {name: sum, type: add, inputs: [conv, data], survival: )") +
                             value + R"(}
  - {name: fc, type: fully_connected, outputs: 2}
  - {name: loss, type: softmax_loss}
)";
    auto net = Net::Build(testing::MustParse(yaml), {2, DeviceType::kCpu});
    ASSERT_FALSE(net.ok()) << value;
    EXPECT_THAT(net.status().message(), HasSubstr("survival")) << net.status().ToString();
    EXPECT_THAT(net.status().message(), HasSubstr("(0, 1]")) << net.status().ToString();
  }
}

}  // namespace
}  // namespace spill
