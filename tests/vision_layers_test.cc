// The layers of today's vision networks (activations, squeeze-and-excitation
// products, channel shuffles and slices, layer norm, per-channel scale,
// upsampling, transposed convolution, padding and cropping, space to depth):
// finite-difference gradient checks, hand-computed values, gradient
// accumulation for fans, bit-exact recomputation, and errors that name the
// layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "framework/base/random.h"
#include "framework/graph/net.h"
#include "layers/activation_math.h"
#include "tests/testing/layer_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using ::testing::HasSubstr;
using testing::LayerHarness;

// Values spread evenly over [-0.025 * size, 0.025 * size] in a shuffled
// order, each at least 0.02 from the activations' kinks (multiples of 0.05
// from -3, 0, 3 and 6), so finite differences never straddle one.
void SpreadInputs(LayerHarness& h, uint64_t seed) {
  for (auto& input : h.inputs) {
    std::vector<size_t> order(input.size());
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[Mix64(seed + i) % i]);
    for (size_t i = 0; i < input.size(); ++i) {
      const float v =
          0.05f * static_cast<float>(order[i]) - 0.05f * static_cast<float>(input.size() / 2);
      input[i] = v + 0.02f;
    }
  }
}

struct GradCase {
  const char* name;
  const char* entry;
  std::vector<Shape> inputs;
  bool spread = true;  // SpreadInputs; else uniform in [-1, 1)
};

class VisionGradientTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(VisionGradientTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  LayerHarness h(c.entry, c.inputs);
  h.Randomize(11);
  if (c.spread) SpreadInputs(h, 5);
  EXPECT_EQ(CheckGradients(h), "") << c.entry;
}

INSTANTIATE_TEST_SUITE_P(
    Layers, VisionGradientTest,
    ::testing::Values(
        // 384 values over [-9.6, 9.6]: both of relu6's kinks, and the
        // saturated and linear parts of the hard functions.
        GradCase{"relu6", "{type: relu6}", {Shape(2, 3, 8, 8)}},
        GradCase{"clip", "{type: clip, min: -1.5, max: 2.5}", {Shape(2, 3, 4, 4)}},
        GradCase{"hard_sigmoid", "{type: hard_sigmoid}", {Shape(2, 3, 6, 6)}},
        GradCase{"hard_sigmoid_onnx",
                 "{type: hard_sigmoid, alpha: 0.2, beta: 0.4}",
                 {Shape(2, 3, 6, 6)}},
        GradCase{"hard_swish", "{type: hard_swish}", {Shape(2, 3, 6, 6)}},
        GradCase{"sigmoid", "{type: sigmoid}", {Shape(2, 3, 4, 4)}},
        GradCase{"silu", "{type: silu}", {Shape(2, 3, 4, 4)}},
        GradCase{"gelu", "{type: gelu}", {Shape(2, 3, 4, 4)}},
        GradCase{"tanh", "{type: tanh}", {Shape(2, 3, 4, 4)}},
        GradCase{"multiply", "{type: multiply}", {Shape(2, 3, 3, 4), Shape(2, 3, 3, 4)}, false},
        GradCase{"multiply_se", "{type: multiply}", {Shape(2, 3, 3, 4), Shape(2, 3, 1, 1)}, false},
        GradCase{
            "multiply_se_first", "{type: multiply}", {Shape(2, 4, 1, 1), Shape(2, 4, 2, 3)}, false},
        GradCase{"broadcast_add",
                 "{type: broadcast_add}",
                 {Shape(2, 3, 3, 4), Shape(2, 3, 1, 1)},
                 false},
        GradCase{"channel_shuffle", "{type: channel_shuffle, groups: 3}", {Shape(2, 6, 2, 3)}},
        GradCase{"slice", "{type: slice, begin: 1, end: 4}", {Shape(2, 5, 2, 3)}},
        GradCase{"layer_norm", "{type: layer_norm}", {Shape(2, 5, 3, 2)}, false},
        GradCase{"layer_norm_pooled", "{type: layer_norm, eps: 1e-6}", {Shape(3, 6, 1, 1)}, false},
        GradCase{"scale", "{type: scale}", {Shape(2, 3, 3, 3)}, false},
        GradCase{"scale_bias", "{type: scale, bias: true, value: 0.5}", {Shape(2, 3, 3, 3)}, false},
        GradCase{"upsample_nearest", "{type: upsample, factor: [2, 3]}", {Shape(2, 2, 3, 2)}},
        GradCase{"upsample_bilinear",
                 "{type: upsample, factor: 2, mode: bilinear}",
                 {Shape(2, 2, 3, 4)}},
        GradCase{"upsample_bilinear_corners",
                 "{type: upsample, size: [6, 9], mode: bilinear, align_corners: true}",
                 {Shape(1, 2, 2, 3)}},
        GradCase{"transposed_convolution",
                 "{type: transposed_convolution, filters: 3, kernel: 3, stride: 2, pad: 1, "
                 "output_pad: 1}",
                 {Shape(2, 2, 3, 3)},
                 false},
        GradCase{"transposed_convolution_groups",
                 "{type: transposed_convolution, filters: 4, kernel: [2, 3], stride: [2, 1], "
                 "dilation: [1, 2], groups: 2, bias: false}",
                 {Shape(2, 4, 3, 3)},
                 false},
        GradCase{"transposed_convolution_unet",
                 "{type: transposed_convolution, filters: 2, kernel: 2, stride: 2}",
                 {Shape(2, 4, 3, 3)},
                 false},
        GradCase{"pad", "{type: pad, pad: [0, 1, 2, 1]}", {Shape(2, 2, 3, 3)}},
        GradCase{"pad_crop", "{type: pad, pad: [1, -1, -1, 2]}", {Shape(2, 2, 4, 5)}},
        GradCase{"space_to_depth", "{type: space_to_depth, block_size: 2}", {Shape(2, 3, 4, 6)}}),
    [](const ::testing::TestParamInfo<GradCase>& info) { return std::string(info.param.name); });

// Segmentation: a softmax over the channels at every pixel, the mean
// cross-entropy over every pixel.
TEST(PixelSoftmaxLossTest, GradientMatchesFiniteDifferences) {
  LayerHarness h("{type: softmax_loss}", {Shape(2, 3, 2, 3), Shape(2, 1, 2, 3)});
  h.Randomize(3);
  for (size_t i = 0; i < h.inputs[1].size(); ++i) h.inputs[1][i] = static_cast<float>(i % 3);
  testing::GradientCheckOptions options;
  options.skip_inputs = {1};
  EXPECT_EQ(CheckGradients(h, options), "");
}

TEST(PixelSoftmaxLossTest, KnownValues) {
  // Two pixels, two classes: scores (0, 0) and (2, 0).
  LayerHarness h("{type: softmax_loss}", {Shape(1, 2, 1, 2), Shape(1, 1, 1, 2)});
  h.inputs[0] = {0, 2, 0, 0};  // class 0 at both pixels, then class 1
  h.inputs[1] = {1, 0};
  h.Forward();
  const double e2 = std::exp(2.0);
  EXPECT_NEAR(h.outputs[0][0], 0.5, 1e-6);
  EXPECT_NEAR(h.outputs[0][1], e2 / (e2 + 1), 1e-6);
  EXPECT_NEAR(h.outputs[0][3], 1 / (e2 + 1), 1e-6);
  h.Backward();
  // d/dx = (p - onehot) / pixels
  EXPECT_NEAR(h.input_grads[0][0], 0.5 / 2, 1e-6);
  EXPECT_NEAR(h.input_grads[0][2], (0.5 - 1) / 2, 1e-6);
  EXPECT_NEAR(h.input_grads[0][1], (e2 / (e2 + 1) - 1) / 2, 1e-6);
}

std::vector<float> Outputs(const char* entry, const Shape& shape, const std::vector<float>& x) {
  LayerHarness h(entry, {shape});
  h.inputs[0] = x;
  h.Forward();
  return h.outputs[0];
}

// clip's vectorized form gives what min(max(x, lo), hi) gives, at the
// kinks, at the infinities and for NaN (which clips to the minimum).
TEST(ActivationTest, ClipMatchesMinOfMaxEverywhere) {
  const Shape s(1, 1, 1, 9);
  const float nan = std::nanf(""), inf = INFINITY;
  const std::vector<float> x = {-inf, -7.5f, -0.0f, 0.0f, 1e-30f, 3.25f, 6.0f, inf, nan};
  const std::vector<float> y = Outputs("{type: clip, min: -2, max: 6}", s, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], std::fmin(std::fmax(x[i], -2.0f), 6.0f)) << x[i];
  }
}

TEST(ActivationTest, KnownValues) {
  const Shape s(1, 1, 1, 5);
  const std::vector<float> x = {-4, -1, 0, 1, 7};
  EXPECT_EQ(Outputs("{type: relu6}", s, x), (std::vector<float>{0, 0, 0, 1, 6}));
  EXPECT_EQ(Outputs("{type: clip, min: -2, max: 3}", s, x), (std::vector<float>{-2, -1, 0, 1, 3}));
  std::vector<float> hs = Outputs("{type: hard_sigmoid}", s, x);
  std::vector<float> hw = Outputs("{type: hard_swish}", s, x);
  std::vector<float> sg = Outputs("{type: sigmoid}", s, x);
  std::vector<float> si = Outputs("{type: silu}", s, x);
  std::vector<float> ge = Outputs("{type: gelu}", s, x);
  std::vector<float> th = Outputs("{type: tanh}", s, x);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double hard = std::min(std::max(v + 3, 0.0), 6.0) / 6;
    EXPECT_NEAR(hs[i], hard, 1e-6) << v;
    EXPECT_NEAR(hw[i], v * hard, 1e-6) << v;
    EXPECT_NEAR(sg[i], 1 / (1 + std::exp(-v)), 1e-6) << v;
    EXPECT_NEAR(si[i], v / (1 + std::exp(-v)), 1e-5) << v;
    EXPECT_NEAR(ge[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-5) << v;
    EXPECT_NEAR(th[i], std::tanh(v), 1e-6) << v;
  }
  // GELU(1) = 0.8413447 (Phi(1) = 0.8413447).
  EXPECT_NEAR(ge[3], 0.8413447, 1e-6);
}

// ULPs of float between `got` and the exact `want`.
double Ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(got - want) / ulp;
}

// GELU's erf and exp, branch-free polynomials (layers/activation_math.h),
// against double precision: erf within 2.5 ulp everywhere (0, tiny values
// and the tails exact), exp within 1.5 ulp on [-87, 0].
TEST(ActivationTest, ErfAndExpAreWithinAFewUlps) {
  double worst_erf = 0, worst_exp = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i) * 1e-5f;
    worst_erf = std::max(worst_erf, Ulps(Erf(x), std::erf(static_cast<double>(x))));
  }
  for (float x : {1e-30f, -1e-20f, 1e-10f, 3e-4f, 4.0f, 9.0f, -30.0f, 1e30f}) {
    worst_erf = std::max(worst_erf, Ulps(Erf(x), std::erf(static_cast<double>(x))));
  }
  for (int i = 0; i <= 870000; ++i) {
    const float q = -static_cast<float>(i) * 1e-4f;
    worst_exp = std::max(worst_exp, Ulps(ExpNonPositive(q), std::exp(static_cast<double>(q))));
  }
  EXPECT_LE(worst_erf, 2.5);
  EXPECT_LE(worst_exp, 1.5);
  EXPECT_EQ(Erf(0.0f), 0.0f);
  EXPECT_EQ(Erf(10.0f), 1.0f);
  EXPECT_EQ(Erf(-10.0f), -1.0f);
  std::printf("erf within %.2f ulp, exp within %.2f ulp\n", worst_erf, worst_exp);
}

TEST(BroadcastTest, SqueezeAndExcitationScalesEachPlane) {
  LayerHarness h("{type: multiply}", {Shape(1, 2, 1, 3), Shape(1, 2, 1, 1)});
  h.inputs[0] = {1, 2, 3, 4, 5, 6};
  h.inputs[1] = {10, -1};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{10, 20, 30, -4, -5, -6}));
  h.output_grads[0] = {1, 1, 1, 1, 0, 2};
  h.Backward();
  EXPECT_EQ(h.input_grads[0], (std::vector<float>{10, 10, 10, -1, 0, -2}));
  EXPECT_EQ(h.input_grads[1], (std::vector<float>{6, 16}));  // sum dy * x per plane
}

TEST(ChannelTest, ShuffleTransposesTheGroups) {
  // Six channels in groups of 2: (0 1 2)(3 4 5) -> 0 3 1 4 2 5.
  LayerHarness h("{type: channel_shuffle, groups: 2}", {Shape(1, 6, 1, 1)});
  h.inputs[0] = {0, 1, 2, 3, 4, 5};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{0, 3, 1, 4, 2, 5}));
  h.output_grads[0] = h.outputs[0];
  h.Backward();
  EXPECT_EQ(h.input_grads[0], h.inputs[0]);
}

TEST(ChannelTest, SliceTakesChannelsAndZeroesTheRestOfTheGradient) {
  LayerHarness h("{type: slice, begin: 1, end: 3}", {Shape(2, 3, 1, 1)});
  h.inputs[0] = {0, 1, 2, 3, 4, 5};
  h.Forward();
  EXPECT_EQ(h.outputs[0], (std::vector<float>{1, 2, 4, 5}));
  h.output_grads[0] = {7, 8, 9, 10};
  std::fill(h.input_grads[0].begin(), h.input_grads[0].end(), NAN);
  h.Backward();
  EXPECT_EQ(h.input_grads[0], (std::vector<float>{0, 7, 8, 0, 9, 10}));
}

TEST(NormTest, LayerNormNormalizesEachPixelOverChannels) {
  LayerHarness h("{type: layer_norm, eps: 1e-6}", {Shape(1, 4, 1, 2)});
  h.inputs[0] = {1, 10, 2, 20, 3, 30, 6, 60};  // pixel 0: 1 2 3 6; pixel 1: ten times that
  h.params[0] = {1, 1, 2, 1};
  h.params[1] = {0, 0, 0, 0.5f};
  h.Forward();
  const double mean = 3, std0 = std::sqrt(3.5 + 1e-6), std1 = std::sqrt(350 + 1e-6);
  EXPECT_NEAR(h.outputs[0][0], (1 - mean) / std0, 1e-6);
  EXPECT_NEAR(h.outputs[0][1], (10 - 10 * mean) / std1, 1e-6);
  EXPECT_NEAR(h.outputs[0][4], 2 * (3 - mean) / std0, 1e-6);
  EXPECT_NEAR(h.outputs[0][6], (6 - mean) / std0 + 0.5, 1e-6);
}

TEST(UpsampleTest, BilinearMatchesPyTorch) {
  // torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear",
  // align_corners=False) of [[1, 2], [3, 4]].
  EXPECT_EQ(Outputs("{type: upsample, factor: 2, mode: bilinear}", Shape(1, 1, 2, 2), {1, 2, 3, 4}),
            (std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f,
                                3.5f, 3, 3.25f, 3.75f, 4}));
  // align_corners=True: 3 -> 6 samples at 0, 0.4, 0.8, 1.2, 1.6, 2.
  const std::vector<float> corners =
      Outputs("{type: upsample, size: [1, 6], mode: bilinear, align_corners: true}",
              Shape(1, 1, 1, 3), {0, 4, 8});
  const float want[] = {0, 1.6f, 3.2f, 4.8f, 6.4f, 8};
  ASSERT_EQ(corners.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(corners[i], want[i], 1e-5) << i;
  EXPECT_EQ(Outputs("{type: upsample, factor: [1, 2]}", Shape(1, 1, 1, 3), {5, 6, 7}),
            (std::vector<float>{5, 5, 6, 6, 7, 7}));
}

TEST(TransposedConvolutionTest, KnownValues) {
  // A 2x2 kernel of ones: stride 2 repeats each input in a 2x2 block, stride
  // 1 sums the overlapping blocks.
  LayerHarness up("{type: transposed_convolution, filters: 1, kernel: 2, stride: 2}",
                  {Shape(1, 1, 2, 2)});
  up.inputs[0] = {1, 2, 3, 4};
  up.params[0] = {1, 1, 1, 1};
  up.params[1] = {0.5f};
  up.Forward();
  EXPECT_EQ(up.outputs[0], (std::vector<float>{1.5f, 1.5f, 2.5f, 2.5f, 1.5f, 1.5f, 2.5f, 2.5f, 3.5f,
                                               3.5f, 4.5f, 4.5f, 3.5f, 3.5f, 4.5f, 4.5f}));
  LayerHarness overlap("{type: transposed_convolution, filters: 1, kernel: 2, bias: false}",
                       {Shape(1, 1, 2, 2)});
  overlap.inputs[0] = {1, 2, 3, 4};
  overlap.params[0] = {1, 1, 1, 1};
  overlap.Forward();
  EXPECT_EQ(overlap.output_shapes()[0], Shape(1, 1, 3, 3));
  EXPECT_EQ(overlap.outputs[0], (std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
}

TEST(PadTest, BordersTakeTheValue) {
  // One row above, two columns to the right of [3 4].
  EXPECT_EQ(Outputs("{type: pad, pad: [1, 0, 0, 2], value: -1}", Shape(1, 1, 1, 2), {3, 4}),
            (std::vector<float>{-1, -1, -1, -1, 3, 4, -1, -1}));
}

// pad's definition, one position at a time: output (i, j) is input
// (i - top, j - left) where that lies in the input, else `value`; the input
// gradient at (i, j) is the output gradient at (i + top, j + left) where
// that lies in the output, else 0.
struct PadAmounts {
  int64_t top, left, bottom, right;
};

std::vector<float> PadReference(const Shape& in, PadAmounts a, float value,
                                const std::vector<float>& x) {
  const int64_t out_h = in.h() + a.top + a.bottom, out_w = in.w() + a.left + a.right;
  std::vector<float> y;
  for (int64_t p = 0; p < in.n() * in.c(); ++p) {
    for (int64_t i = 0; i < out_h; ++i) {
      for (int64_t j = 0; j < out_w; ++j) {
        const int64_t h = i - a.top, w = j - a.left;
        const bool inside = h >= 0 && h < in.h() && w >= 0 && w < in.w();
        y.push_back(inside ? x[(p * in.h() + h) * in.w() + w] : value);
      }
    }
  }
  return y;
}

std::vector<float> PadGradReference(const Shape& in, PadAmounts a, const std::vector<float>& dy) {
  const int64_t out_h = in.h() + a.top + a.bottom, out_w = in.w() + a.left + a.right;
  std::vector<float> dx;
  for (int64_t p = 0; p < in.n() * in.c(); ++p) {
    for (int64_t i = 0; i < in.h(); ++i) {
      for (int64_t j = 0; j < in.w(); ++j) {
        const int64_t h = i + a.top, w = j + a.left;
        const bool inside = h >= 0 && h < out_h && w >= 0 && w < out_w;
        dx.push_back(inside ? dy[(p * out_h + h) * out_w + w] : 0.0f);
      }
    }
  }
  return dx;
}

std::string PadEntry(PadAmounts a) {
  return "{type: pad, pad: [" + std::to_string(a.top) + ", " + std::to_string(a.left) + ", " +
         std::to_string(a.bottom) + ", " + std::to_string(a.right) + "], value: -3}";
}

// Small whole numbers, so every sum below is exact.
std::vector<float> WholeNumbers(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(Mix64(seed + i) % 17) - 8.0f;
  return v;
}

TEST(PadTest, NegativeAmountsCrop) {
  const Shape in(2, 3, 5, 6);
  const struct {
    PadAmounts amounts;
    Shape out;
  } cases[] = {
      {{0, 0, -1, -2}, Shape(2, 3, 4, 4)},  // the first 4 rows and 4 columns
      {{-1, -2, 0, 0}, Shape(2, 3, 4, 4)},  // the last 4 rows and 4 columns
      {{1, -1, -1, 2}, Shape(2, 3, 5, 7)},  // mixed: pad one side, crop the other
      {{-2, 3, 1, -4}, Shape(2, 3, 4, 5)},
  };
  for (const auto& c : cases) {
    const std::string entry = PadEntry(c.amounts);
    LayerHarness h(entry, {in});
    ASSERT_EQ(h.output_shapes()[0], c.out) << entry;
    h.inputs[0] = WholeNumbers(static_cast<size_t>(in.numel()), 3);
    h.Forward();
    EXPECT_EQ(h.outputs[0], PadReference(in, c.amounts, -3, h.inputs[0])) << entry;
    // Overwriting: cropped positions become 0, whatever was there.
    h.output_grads[0] = WholeNumbers(static_cast<size_t>(c.out.numel()), 9);
    std::fill(h.input_grads[0].begin(), h.input_grads[0].end(), NAN);
    h.Backward({false});
    EXPECT_EQ(h.input_grads[0], PadGradReference(in, c.amounts, h.output_grads[0])) << entry;
  }
  // [0, 0, -1, -2] of a 5x6 plane numbered 0..29 keeps rows 0-3, columns 0-3.
  std::vector<float> x(30);
  std::iota(x.begin(), x.end(), 0.0f);
  EXPECT_EQ(Outputs("{type: pad, pad: [0, 0, -1, -2]}", Shape(1, 1, 5, 6), x),
            (std::vector<float>{0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 18, 19, 20, 21}));
}

// Backward is forward's adjoint: sum(pad(x) * g) == sum(x * backward(g)),
// exactly, for whole numbers (the border's value taken as 0).
TEST(PadTest, MixedBackwardIsTheAdjoint) {
  const Shape in(2, 2, 5, 6);
  LayerHarness h("{type: pad, pad: [1, -1, -1, 2]}", {in});
  h.inputs[0] = WholeNumbers(static_cast<size_t>(in.numel()), 21);
  h.Forward();
  h.output_grads[0] = WholeNumbers(h.outputs[0].size(), 22);
  h.Backward();
  double forward = 0, backward = 0;
  for (size_t i = 0; i < h.outputs[0].size(); ++i)
    forward += h.outputs[0][i] * h.output_grads[0][i];
  for (size_t i = 0; i < h.inputs[0].size(); ++i) backward += h.inputs[0][i] * h.input_grads[0][i];
  EXPECT_EQ(forward, backward);
  EXPECT_NE(forward, 0);
}

// Adding: the kept positions gain the gradient, the cropped ones keep theirs.
TEST(PadTest, CropAddsWhenAsked) {
  const Shape in(1, 2, 5, 6);
  const PadAmounts a{-1, 2, 1, -3};
  LayerHarness h(PadEntry(a), {in});
  h.Forward();
  h.output_grads[0] = WholeNumbers(h.outputs[0].size(), 5);
  const std::vector<float> before = WholeNumbers(static_cast<size_t>(in.numel()), 6);
  h.input_grads[0] = before;
  h.Backward({true});
  const std::vector<float> fresh = PadGradReference(in, a, h.output_grads[0]);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(h.input_grads[0][i], before[i] + fresh[i]) << i;
  }
}

const char* const kEveryNewLayer[] = {
    "{type: relu6}",
    "{type: clip, min: -0.5, max: 0.5}",
    "{type: hard_sigmoid}",
    "{type: hard_swish}",
    "{type: sigmoid}",
    "{type: silu}",
    "{type: gelu}",
    "{type: tanh}",
    "{type: channel_shuffle, groups: 2}",
    "{type: slice, begin: 1, end: 2}",
    "{type: layer_norm}",
    "{type: scale, bias: true}",
    "{type: upsample, factor: 2}",
    "{type: upsample, factor: 2, mode: bilinear}",
    "{type: transposed_convolution, filters: 3, kernel: 3, stride: 2, pad: 1, output_pad: 1}",
    "{type: pad, pad: [1, 0, 0, 1]}",
    "{type: pad, pad: [1, -1, -2, 0]}",
    "{type: space_to_depth, block_size: 2}",
};

// A fanned-out tensor receives one gradient per reader: the second and later
// readers add into what is there.
TEST(VisionAccumulateTest, EveryLayerAddsWhenAsked) {
  std::vector<std::pair<std::string, std::vector<Shape>>> cases;
  for (const char* entry : kEveryNewLayer) cases.push_back({entry, {Shape(2, 2, 4, 4)}});
  cases.push_back({"{type: multiply}", {Shape(2, 2, 4, 4), Shape(2, 2, 1, 1)}});
  cases.push_back({"{type: broadcast_add}", {Shape(2, 2, 1, 1), Shape(2, 2, 4, 4)}});
  for (const auto& [entry, shapes] : cases) {
    LayerHarness h(entry, shapes);
    h.Randomize(4);
    h.Forward();
    for (auto& g : h.output_grads) {
      for (size_t j = 0; j < g.size(); ++j) g[j] = UniformAt(17, j) - 0.5f;
    }
    h.Backward(std::vector<bool>(shapes.size(), false));
    const auto fresh = h.input_grads;
    for (size_t i = 0; i < shapes.size(); ++i) {
      for (size_t j = 0; j < fresh[i].size(); ++j) h.input_grads[i][j] = static_cast<float>(j % 7);
    }
    h.Backward(std::vector<bool>(shapes.size(), true));
    for (size_t i = 0; i < shapes.size(); ++i) {
      for (size_t j = 0; j < fresh[i].size(); ++j) {
        ASSERT_NEAR(h.input_grads[i][j], static_cast<float>(j % 7) + fresh[i][j], 1e-5)
            << entry << " input " << i << " at " << j;
      }
    }
  }
}

// Recomputation reruns forward: the same bits, no state changed.
TEST(VisionRecomputeTest, ForwardIsBitExactAndStateless) {
  for (const char* entry : kEveryNewLayer) {
    LayerHarness h(entry, {Shape(2, 2, 4, 4)});
    h.Randomize(8);
    h.Forward(Phase::kTrain, false, 5);
    const std::vector<float> first = h.outputs[0];
    const auto params = h.params;
    std::fill(h.outputs[0].begin(), h.outputs[0].end(), NAN);
    h.Forward(Phase::kTrain, true, 6);
    EXPECT_EQ(0, std::memcmp(first.data(), h.outputs[0].data(), first.size() * sizeof(float)))
        << entry;
    EXPECT_EQ(params, h.params) << entry;
  }
}

// Misuses are errors naming the file, the layer and what is wrong.
std::string BuildError(const std::string& layers) {
  auto spec = ParseNetString("layers:\n  - {name: data, type: input, shape: [4, 6, 6]}\n" + layers,
                             "net.yaml");
  if (!spec.ok()) return spec.status().ToString();
  auto net = Net::Build(*spec, {2, DeviceType::kCpu});
  return net.ok() ? "" : net.status().ToString();
}

TEST(VisionErrorsTest, MisusesNameTheLayer) {
  EXPECT_THAT(BuildError("  - {name: half, type: slice, begin: 0, end: 2, inputs: [data]}\n"
                         "  - {name: se, type: multiply, inputs: [data, half]}\n"),
              AllOf(HasSubstr("layer 'se' (multiply)"), HasSubstr("do not broadcast")));
  EXPECT_THAT(BuildError("  - {name: up, type: upsample, size: [16, 16]}\n"),
              AllOf(HasSubstr("layer 'up' (upsample)"),
                    HasSubstr("16x16 is not a whole multiple of the input's 6x6")));
  EXPECT_THAT(BuildError("  - {name: gap, type: convolution, filters: 1, kernel: 1}\n"
                         "  - {name: ln, type: layer_norm}\n"),
              AllOf(HasSubstr("layer 'ln' (layer_norm)"), HasSubstr("over the channels (axis 1)")));
  EXPECT_THAT(BuildError("  - {name: shuffle, type: channel_shuffle, groups: 3}\n"),
              AllOf(HasSubstr("layer 'shuffle' (channel_shuffle)"),
                    HasSubstr("groups (3) must divide the 4 input channels")));
  EXPECT_THAT(BuildError("  - {name: right, type: slice, begin: 2, end: 6}\n"),
              AllOf(HasSubstr("layer 'right' (slice)"), HasSubstr("not all in the input's 4")));
  EXPECT_THAT(BuildError("  - {name: up, type: upsample}\n"),
              AllOf(HasSubstr("net.yaml:3"), HasSubstr("give the factor or the size")));
  EXPECT_THAT(BuildError("  - {name: a, type: clip, min: 2, max: 1}\n"),
              AllOf(HasSubstr("layer 'a' (clip)"), HasSubstr("must be greater than min")));
  EXPECT_THAT(
      BuildError("  - {name: t, type: transposed_convolution, filters: 2, kernel: 2, "
                 "stride: 2, output_pad: 2}\n"),
      AllOf(HasSubstr("layer 't' (transposed_convolution)"), HasSubstr("smaller than the stride")));
  // A crop must leave a row and a column; each amount within the stride bound.
  EXPECT_THAT(BuildError("  - {name: crop, type: pad, pad: [-3, 0, -3, 0]}\n"),
              AllOf(HasSubstr("layer 'crop' (pad)"),
                    HasSubstr("pad [-3, 0, -3, 0] crops the input's 6x6 to 0x6")));
  EXPECT_THAT(BuildError("  - {name: crop, type: pad, pad: [0, -4]}\n"),
              AllOf(HasSubstr("layer 'crop' (pad)"), HasSubstr("crops the input's 6x6 to 6x-2")));
  EXPECT_THAT(BuildError("  - {name: far, type: pad, pad: [0, 0, -65537, 0]}\n"),
              AllOf(HasSubstr("net.yaml:3"), HasSubstr("integers in [-65536, 65536]"),
                    HasSubstr("got '-65537'")));
  EXPECT_THAT(BuildError("  - {name: far, type: pad, pad: [65537, 0]}\n"),
              AllOf(HasSubstr("net.yaml:3"), HasSubstr("integers in [-65536, 65536]")));
  // Scores of a map need labels per pixel.
  EXPECT_THAT(BuildError("  - {name: score, type: convolution, filters: 3, kernel: 1}\n"
                         "  - {name: loss, type: softmax_loss}\n"),
              AllOf(HasSubstr("layer 'loss' (softmax_loss)"), HasSubstr("labels: pixels")));
}

}  // namespace
}  // namespace spill
