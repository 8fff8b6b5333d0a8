// The executor end to end: a whole-network gradient check through fans and
// joins (so accumulation of a fanned-out tensor's gradient is verified by
// finite differences), and training that lowers the loss.
#include "framework/graph/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/graph/initializer.h"
#include "memory/runtime/runtime.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

// Inception-like fan into a concat, a residual add, and a fan of the data.
const char kNonlinear[] = R"(
layers:
  - {name: data, type: input, shape: [2, 5, 5]}
  - {name: stem, type: convolution, filters: 3, kernel: 3, pad: 1}
  - {name: a, type: convolution, filters: 2, kernel: 1, inputs: [stem]}
  - {name: b1, type: convolution, filters: 2, kernel: 3, pad: 1, inputs: [stem]}
  - {name: b2, type: avg_pool, kernel: 3, stride: 1, pad: 1}
  - {name: mix, type: concat, inputs: [a, b2, stem]}
  - {name: bn, type: batch_norm}
  - {name: proj, type: convolution, filters: 7, kernel: 1, inputs: [data]}
  - {name: sum, type: add, inputs: [bn, proj]}
  - {name: act, type: relu, negative_slope: 0.2}
  - {name: pool, type: max_pool, kernel: 2}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)";

class NetworkGradientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto net = Net::Build(testing::MustParse(kNonlinear), {3, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    net_ = std::move(net).value();
    MemoryOptions options;
    ASSERT_TRUE(ApplyMemoryMode("liveness", &options).ok());
    auto runtime = MemoryRuntime::Create(net_->view(), options, &device_);
    ASSERT_TRUE(runtime.ok());
    runtime_ = std::move(runtime).value();
    executor_ = std::make_unique<Executor>(*net_, &device_, *runtime_);
    ASSERT_TRUE(InitializeParameters(*net_, *runtime_, 3).ok());
    images_.resize(net_->input_shape().numel());
    for (size_t i = 0; i < images_.size(); ++i) images_[i] = 2 * UniformAt(5, i) - 1;
    labels_ = {0, 2, 1};
  }

  double Loss() {
    HostBatch batch{images_.data(), labels_.data()};
    auto result = executor_->Run(batch, Phase::kTrain, 1);
    SPILL_CHECK(result.ok()) << result.status().ToString();
    return result->loss;
  }

  CpuDevice device_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<MemoryRuntime> runtime_;
  std::unique_ptr<Executor> executor_;
  std::vector<float> images_, labels_;
};

TEST_F(NetworkGradientTest, BackpropMatchesFiniteDifferencesThroughFansAndJoins) {
  Loss();
  const Schedule& s = net_->schedule();
  int checked = 0;
  for (const char* layer : {"stem", "a", "b1", "proj", "bn", "fc"}) {
    const LayerTensors& lt = s.layers[net_->FindLayer(layer)];
    TensorId w = lt.params[0], g = lt.param_grads[0];
    const int64_t n = s.tensors[w].shape.numel();
    std::vector<float> grad(runtime_->Data(g), runtime_->Data(g) + n);
    for (int64_t k = 0; k < std::min<int64_t>(n, 6); ++k) {
      float* value = runtime_->Data(w) + k;
      const float saved = *value;
      const float h = 2e-3f;
      *value = saved + h;
      double plus = Loss();
      *value = saved - h;
      double minus = Loss();
      *value = saved;
      double numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(grad[k], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << layer << "[" << k << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
}

TEST(TrainingTest, SgdLowersTheLossOnAFixedBatch) {
  NetSpec spec = testing::MustParse(kNonlinear);
  testing::SyntheticRun run;
  run.batch = 4;
  run.steps = 30;
  run.learning_rate = 0.1f;
  run.same_batch = true;
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_LT(trace->losses.back(), 0.5 * trace->losses.front());
}

TEST(ExecutorTest, EvalRunsForwardOnlyAndLeavesParametersAlone) {
  auto net = Net::Build(testing::MustParse(kNonlinear), {2, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  CpuDevice device;
  MemoryOptions options;
  auto runtime = MemoryRuntime::Create((*net)->view(), options, &device);
  ASSERT_TRUE(runtime.ok());
  Executor executor(**net, &device, **runtime);
  ASSERT_TRUE(InitializeParameters(**net, **runtime, 1).ok());
  std::vector<float> images((*net)->input_shape().numel(), 0.5f), labels = {1, 2};
  HostBatch batch{images.data(), labels.data()};
  auto first = executor.Run(batch, Phase::kEval, 1);
  auto second = executor.Run(batch, Phase::kEval, 2);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->loss, second->loss);
  EXPECT_EQ((*runtime)->log().steps.size(), static_cast<size_t>((*net)->num_layers()));
}

}  // namespace
}  // namespace spill
