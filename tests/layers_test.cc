// Every CPU layer: a finite-difference gradient check, hand-computed forward
// values, gradient accumulation for fans, and bit-exact recomputation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "framework/base/random.h"
#include "framework/config/net_spec.h"
#include "framework/graph/executor.h"
#include "framework/graph/layer_registry.h"
#include "tests/testing/layer_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using testing::CheckInputGradientAdds;
using testing::GradientCheckOptions;
using testing::LayerHarness;

// Values spread apart so that max pooling and ReLU have no near-ties or
// near-kinks within the finite-difference step.
void SpreadInputs(LayerHarness& h, uint64_t seed) {
  for (auto& input : h.inputs) {
    std::vector<size_t> order(input.size());
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[Mix64(seed + i) % i]);
    }
    for (size_t i = 0; i < input.size(); ++i) {
      float v = 0.05f * static_cast<float>(order[i]) - 0.025f * static_cast<float>(input.size());
      input[i] = v + (v >= 0 ? 0.02f : -0.02f);  // away from zero
    }
  }
}

struct GradCase {
  const char* name;
  const char* entry;
  std::vector<Shape> inputs;
};

class GradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  LayerHarness h(c.entry, c.inputs);
  h.Randomize(11);
  SpreadInputs(h, 5);
  GradientCheckOptions options;
  EXPECT_EQ(CheckGradients(h, options), "") << c.entry;
}

INSTANTIATE_TEST_SUITE_P(
    Layers, GradientTest,
    ::testing::Values(
        GradCase{"conv", "{type: convolution, filters: 3, kernel: 3, pad: 1}", {Shape(2, 2, 5, 5)}},
        GradCase{"conv_stride_dilation",
                 "{type: convolution, filters: 2, kernel: [3, 2], stride: [2, 1], pad: [1, 0], "
                 "dilation: [1, 2]}",
                 {Shape(2, 3, 6, 7)}},
        GradCase{"conv_groups",
                 "{type: convolution, filters: 4, kernel: 3, groups: 2, bias: false}",
                 {Shape(2, 4, 5, 5)}},
        GradCase{
            "conv_pointwise", "{type: convolution, filters: 3, kernel: 1}", {Shape(2, 4, 3, 3)}},
        GradCase{"max_pool", "{type: max_pool, kernel: 3, stride: 2, pad: 1}", {Shape(2, 2, 7, 7)}},
        GradCase{"max_pool_ceil",
                 "{type: max_pool, kernel: 3, stride: 2, ceil_mode: true}",
                 {Shape(1, 2, 6, 6)}},
        GradCase{"avg_pool", "{type: avg_pool, kernel: 3, stride: 2, pad: 1}", {Shape(2, 2, 6, 6)}},
        GradCase{"avg_pool_exclude_pad",
                 "{type: avg_pool, kernel: 3, stride: 1, pad: 1, count_include_pad: false}",
                 {Shape(1, 2, 4, 4)}},
        GradCase{"global_avg_pool", "{type: global_avg_pool}", {Shape(2, 3, 4, 4)}},
        GradCase{"relu", "{type: relu}", {Shape(2, 3, 4, 4)}},
        GradCase{"leaky_relu", "{type: relu, negative_slope: 0.1}", {Shape(2, 3, 4, 4)}},
        GradCase{"batch_norm", "{type: batch_norm}", {Shape(3, 2, 3, 3)}},
        GradCase{"lrn", "{type: lrn, size: 3, alpha: 0.2, beta: 0.75, k: 2}", {Shape(2, 5, 3, 3)}},
        GradCase{"lrn_alexnet", "{type: lrn, size: 5}", {Shape(1, 7, 2, 2)}},
        GradCase{"fully_connected", "{type: fully_connected, outputs: 4}", {Shape(3, 2, 2, 2)}},
        GradCase{"dropout", "{type: dropout, ratio: 0.3}", {Shape(2, 3, 4, 4)}},
        GradCase{
            "concat", "{type: concat}", {Shape(2, 2, 3, 3), Shape(2, 3, 3, 3), Shape(2, 1, 3, 3)}},
        GradCase{"add", "{type: add}", {Shape(2, 3, 3, 3), Shape(2, 3, 3, 3)}}),
    [](const ::testing::TestParamInfo<GradCase>& info) { return std::string(info.param.name); });

TEST(SoftmaxLossTest, GradientMatchesFiniteDifferences) {
  LayerHarness h("{type: softmax_loss}", {Shape(4, 5, 1, 1), Shape(4, 1, 1, 1)});
  h.Randomize(3);
  for (int i = 0; i < 4; ++i) h.inputs[1][i] = static_cast<float>((i * 3) % 5);
  EXPECT_EQ(CheckGradients(h), "");
}

TEST(SoftmaxLossTest, KnownValues) {
  LayerHarness h("{type: softmax_loss}", {Shape(1, 3, 1, 1), Shape(1, 1, 1, 1)});
  h.inputs[0] = {1.0f, 2.0f, 3.0f};
  h.inputs[1] = {2.0f};
  h.Forward();
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(h.outputs[0][0], std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(h.outputs[0][2], std::exp(3.0) / z, 1e-6);
  h.Backward();
  EXPECT_NEAR(h.input_grads[0][2], std::exp(3.0) / z - 1.0, 1e-6);
}

// Padding labelled ignore_label adds nothing: zero gradient rows, the mean
// over the samples kept, and slices of the batch give the same bits.
TEST(SoftmaxLossTest, IgnoredLabelsAddNothing) {
  LayerHarness h("{type: softmax_loss, ignore_label: -1}", {Shape(4, 5, 1, 1), Shape(4, 1, 1, 1)});
  h.Randomize(3);
  h.inputs[1] = {2, -1, 0, -1};
  EXPECT_EQ(CheckGradients(h), "");
  h.Forward();
  h.Backward();
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(h.input_grads[0][5 + j], 0.0f);
    EXPECT_EQ(h.input_grads[0][15 + j], 0.0f);
  }
  // Image 0 kept, of two kept: (p - onehot) / 2.
  EXPECT_FLOAT_EQ(h.input_grads[0][2], (h.outputs[0][2] - 1.0f) / 2);
  EXPECT_FLOAT_EQ(h.input_grads[0][1], h.outputs[0][1] / 2);
}

TEST(SoftmaxLossTest, IgnoredPixelsSliceLikeTheWholeBatch) {
  const std::vector<Shape> shapes = {Shape(3, 4, 2, 3), Shape(3, 1, 2, 3)};
  const char* entry = "{type: softmax_loss, ignore_label: -1}";
  LayerHarness whole(entry, shapes), sliced(entry, shapes);
  whole.Randomize(5);
  for (size_t r = 0; r < whole.inputs[1].size(); ++r) {
    whole.inputs[1][r] = r % 4 == 1 ? -1.0f : static_cast<float>(r % 4);
  }
  sliced.inputs = whole.inputs;
  sliced.slice_images = 1;
  EXPECT_EQ(CheckGradients(whole), "");
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Forward();
    h->Backward();
  }
  EXPECT_EQ(whole.input_grads[0], sliced.input_grads[0]);
  int zero_rows = 0;
  for (size_t r = 0; r < whole.inputs[1].size(); ++r) {
    if (whole.inputs[1][r] != -1.0f) continue;
    const size_t image = r / 6, pixel = r % 6;
    for (int j = 0; j < 4; ++j) EXPECT_EQ(whole.input_grads[0][(image * 4 + j) * 6 + pixel], 0.0f);
    ++zero_rows;
  }
  EXPECT_GT(zero_rows, 0);
}

TEST(SoftmaxLossTest, ScoresLeaveIgnoredLabelsOut) {
  // Two samples of three classes; the second is padding.
  const std::vector<float> scores = {0.2f, 0.5f, 0.3f, 0.6f, 0.3f, 0.1f};
  const std::vector<float> labels = {1, -1};
  double loss = 0;
  int64_t correct = 0;
  EXPECT_EQ(AddScoreLosses(scores.data(), labels.data(), 2, 3, 1, &loss, &correct, -1), 1);
  EXPECT_NEAR(loss, -std::log(0.5), 1e-6);
  EXPECT_EQ(correct, 1);
}

TEST(SoftmaxLossTest, IgnoreLabelOutOfRangeIsAnError) {
  LayerSpec spec;
  spec.name = "loss";
  spec.type = "softmax_loss";
  spec.where = {"net.yaml", 4, ""};
  spec.params = YAML::Load("{ignore_label: 100000000}");
  auto layer = LayerRegistry::Get().Create(spec, DeviceType::kCpu);
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("ignore_label"), std::string::npos)
      << layer.status().ToString();
}

TEST(ConvolutionTest, KnownValues) {
  // One 3x3 image, one 2x2 filter of ones, bias 0.5, no padding.
  LayerHarness h("{type: convolution, filters: 1, kernel: 2}", {Shape(1, 1, 3, 3)});
  h.inputs[0] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  h.params[0] = {1, 1, 1, 1};
  h.params[1] = {0.5f};
  h.Forward();
  EXPECT_EQ(h.output_shapes()[0], Shape(1, 1, 2, 2));
  EXPECT_EQ(h.outputs[0], (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}));
}

TEST(ConvolutionTest, StridePaddingShape) {
  LayerHarness h("{type: convolution, filters: 64, kernel: 7, stride: 2, pad: 3}",
                 {Shape(2, 3, 224, 224)});
  EXPECT_EQ(h.output_shapes()[0], Shape(2, 64, 112, 112));
}

TEST(PoolingTest, MaxKnownValues) {
  LayerHarness h("{type: max_pool, kernel: 2, stride: 2}", {Shape(1, 1, 4, 4)});
  h.inputs[0] = {1, 2, 5, 6, 3, 4, 7, 8, 9, 10, 13, 14, 11, 12, 15, 16};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{4, 8, 12, 16}));
  h.output_grads[0] = {1, 2, 3, 4};
  h.Backward();
  EXPECT_EQ(h.input_grads[0][5], 1.0f);   // position of 4
  EXPECT_EQ(h.input_grads[0][15], 4.0f);  // position of 16
  EXPECT_EQ(h.input_grads[0][0], 0.0f);
}

TEST(PoolingTest, AverageWithPaddingCountsPaddedWindow) {
  LayerHarness h("{type: avg_pool, kernel: 3, stride: 1, pad: 1}", {Shape(1, 1, 2, 2)});
  h.inputs[0] = {1, 2, 3, 4};
  h.Forward();
  // Every window covers the four values and five padded zeros: 10 / 9.
  for (float v : h.outputs[0]) EXPECT_NEAR(v, 10.0f / 9.0f, 1e-6);
}

TEST(PoolingTest, GlobalAverage) {
  LayerHarness h("{type: global_avg_pool}", {Shape(1, 2, 2, 2)});
  h.inputs[0] = {1, 2, 3, 4, 10, 20, 30, 40};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{2.5f, 25.0f}));
}

TEST(ReluTest, KnownValues) {
  LayerHarness h("{type: relu}", {Shape(1, 1, 1, 4)});
  h.inputs[0] = {-1, 0, 2, -3};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{0, 0, 2, 0}));
}

TEST(BatchNormTest, TrainNormalizesAndUpdatesRunningStatistics) {
  LayerHarness h("{type: batch_norm, momentum: 0.5}", {Shape(4, 1, 1, 1)});
  h.inputs[0] = {1, 2, 3, 6};  // mean 3, biased variance 3.5, unbiased 14/3
  h.params = {{2}, {1}, {0}, {1}};
  h.Forward();
  double inv = 1.0 / std::sqrt(3.5 + 1e-5);
  EXPECT_NEAR(h.outputs[0][0], 2 * (1 - 3) * inv + 1, 1e-5);
  EXPECT_NEAR(h.outputs[0][3], 2 * (6 - 3) * inv + 1, 1e-5);
  EXPECT_NEAR(h.params[2][0], 0.5 * 3, 1e-6);
  EXPECT_NEAR(h.params[3][0], 0.5 * 1 + 0.5 * 14.0 / 3, 1e-5);
}

TEST(BatchNormTest, EvalUsesRunningStatistics) {
  LayerHarness h("{type: batch_norm}", {Shape(2, 1, 1, 1)});
  h.inputs[0] = {5, 7};
  h.params = {{1}, {0}, {4}, {4}};
  h.Forward(Phase::kEval);
  EXPECT_NEAR(h.outputs[0][0], (5 - 4) / std::sqrt(4 + 1e-5), 1e-5);
  EXPECT_EQ(h.params[2][0], 4.0f);  // unchanged
}

TEST(LrnTest, KnownValues) {
  LayerHarness h("{type: lrn, size: 3, alpha: 3, beta: 1, k: 1}", {Shape(1, 3, 1, 1)});
  h.inputs[0] = {1, 2, 3};
  h.Forward();
  // scale_c = 1 + 3/3 * sum of squares over the window
  EXPECT_NEAR(h.outputs[0][0], 1.0 / (1 + 1 + 4), 1e-6);
  EXPECT_NEAR(h.outputs[0][1], 2.0 / (1 + 1 + 4 + 9), 1e-6);
  EXPECT_NEAR(h.outputs[0][2], 3.0 / (1 + 4 + 9), 1e-6);
}

// The image-order kernels (sliced steps, pinned algorithms) compute what the
// GEMMs do, within rounding, and their gradients are right.
TEST(FullyConnectedTest, ImageOrderKernelsMatchTheGemms) {
  const std::string entry = "{type: fully_connected, outputs: 7}";
  const std::vector<Shape> shapes = {Shape(5, 3, 4, 3)};
  LayerHarness gemm(entry, shapes), ordered(entry, shapes);
  ordered.image_order = true;
  for (LayerHarness* h : {&gemm, &ordered}) {
    h->Randomize(11);
    h->Forward();
    for (size_t i = 0; i < h->output_grads[0].size(); ++i) {
      h->output_grads[0][i] = 0.5f - static_cast<float>(i % 5) / 4;
    }
    h->Backward({true});  // dx accumulates into what is there
  }
  auto expect_near = [](const std::vector<float>& a, const std::vector<float>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::abs(a[i])));
  };
  expect_near(gemm.outputs[0], ordered.outputs[0]);
  expect_near(gemm.input_grads[0], ordered.input_grads[0]);
  expect_near(gemm.param_grads[0], ordered.param_grads[0]);
  expect_near(gemm.param_grads[1], ordered.param_grads[1]);
  EXPECT_EQ(CheckGradients(ordered), "");
}

TEST(FullyConnectedTest, KnownValues) {
  LayerHarness h("{type: fully_connected, outputs: 2}", {Shape(1, 3, 1, 1)});
  h.inputs[0] = {1, 2, 3};
  h.params[0] = {1, 0, -1, 2, 2, 2};
  h.params[1] = {0.5f, -0.5f};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{-1.5f, 11.5f}));
}

TEST(DropoutTest, MasksAboutRatioAndScalesSurvivors) {
  LayerHarness h("{type: dropout, ratio: 0.25}", {Shape(1, 1, 100, 100)});
  std::fill(h.inputs[0].begin(), h.inputs[0].end(), 1.0f);
  h.Forward();
  int zeros = 0;
  for (float v : h.outputs[0]) {
    if (v == 0)
      ++zeros;
    else
      EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
  h.Forward(Phase::kEval);
  for (float v : h.outputs[0]) EXPECT_EQ(v, 1.0f);
}

TEST(DropoutTest, MaskDependsOnSeedOnly) {
  LayerHarness a("{type: dropout}", {Shape(1, 1, 10, 10)}),
      b("{type: dropout}", {Shape(1, 1, 10, 10)});
  a.Randomize(1);
  b.Randomize(1);
  a.Forward(Phase::kTrain, false, 42);
  b.Forward(Phase::kTrain, false, 42);
  EXPECT_EQ(a.outputs[0], b.outputs[0]);
  b.Forward(Phase::kTrain, false, 43);
  EXPECT_NE(a.outputs[0], b.outputs[0]);
}

TEST(JoinTest, ConcatStacksChannels) {
  LayerHarness h("{type: concat}", {Shape(2, 1, 1, 2), Shape(2, 2, 1, 2)});
  h.inputs[0] = {1, 2, 3, 4};
  h.inputs[1] = {5, 6, 7, 8, 9, 10, 11, 12};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
}

// A fanned-out tensor receives one gradient per reader: the second and later
// readers add into what is there.
TEST(AccumulateTest, EveryLayerAddsWhenAsked) {
  const char* entries[] = {"{type: convolution, filters: 2, kernel: 3, pad: 1}",
                           "{type: max_pool, kernel: 2}",
                           "{type: avg_pool, kernel: 2}",
                           "{type: relu}",
                           "{type: batch_norm}",
                           "{type: lrn, size: 3}",
                           "{type: fully_connected, outputs: 3}",
                           "{type: dropout}",
                           "{type: global_avg_pool}",
                           "{type: convolution, filters: 2, kernel: 1}"};
  for (const char* entry : entries) {
    LayerHarness h(entry, {Shape(2, 2, 4, 4)});
    h.Randomize(4);
    h.Forward();
    for (auto& g : h.output_grads) {
      for (size_t j = 0; j < g.size(); ++j) g[j] = UniformAt(17, j) - 0.5f;
    }
    EXPECT_EQ(CheckInputGradientAdds(h), "") << entry;
  }
}

// Recomputation reruns forward; it must reproduce the output bit for bit and
// leave state (BatchNorm's running statistics, dropout's mask) alone.
TEST(RecomputeTest, ForwardIsBitExactAndStateless) {
  const char* entries[] = {"{type: batch_norm}",
                           "{type: dropout}",
                           "{type: relu}",
                           "{type: lrn}",
                           "{type: max_pool, kernel: 2}",
                           "{type: avg_pool, kernel: 2}",
                           "{type: convolution, filters: 3, kernel: 3}"};
  for (const char* entry : entries) {
    LayerHarness h(entry, {Shape(2, 3, 4, 4)});
    h.Randomize(8);
    h.Forward(Phase::kTrain, false, 5);
    std::vector<float> first = h.outputs[0];
    auto params = h.params;
    auto aux = h.aux;
    std::fill(h.outputs[0].begin(), h.outputs[0].end(), NAN);
    h.Forward(Phase::kTrain, true, 6);  // a different seed must not matter
    EXPECT_EQ(0, std::memcmp(first.data(), h.outputs[0].data(), first.size() * sizeof(float)))
        << entry;
    EXPECT_EQ(params, h.params) << entry;
    EXPECT_EQ(aux, h.aux) << entry;
  }
}

TEST(RegistryTest, UnknownTypeListsKnownTypes) {
  LayerSpec spec;
  spec.name = "x";
  spec.type = "convolutoin";
  spec.where = {"net.yaml", 3, ""};
  spec.params = YAML::Node(YAML::NodeType::Map);
  auto layer = LayerRegistry::Get().Create(spec, DeviceType::kCpu);
  ASSERT_FALSE(layer.ok());
  EXPECT_NE(layer.status().message().find("net.yaml:3"), std::string::npos);
  EXPECT_NE(layer.status().message().find("unknown layer type 'convolutoin'"), std::string::npos);
  EXPECT_NE(layer.status().message().find("convolution"), std::string::npos);
  EXPECT_NE(layer.status().message().find("batch_norm"), std::string::npos);
}

}  // namespace
}  // namespace spill
