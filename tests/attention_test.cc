// attention and positions: gradients against finite differences, the
// scores against a direct float64 computation, tiled and naive giving the
// same bits with O(T) against O(T^2) saved per query, slices of the batch
// giving the whole batch's bits, and the errors a user meets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "framework/graph/net.h"
#include "layers/attention_layer.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using ::testing::HasSubstr;
using testing::LayerHarness;

// O = softmax(Q K^T / sqrt(d) [masked]) V per image and head, in double.
std::vector<double> Reference(const std::vector<float>& x, int64_t n, int64_t c, int64_t t,
                              int64_t heads, bool causal) {
  const int64_t d = c / heads;
  std::vector<double> y(n * c * t);
  auto at = [&](int64_t image, int64_t channel, int64_t step) {
    return static_cast<double>(x[(image * 3 * c + channel) * t + step]);
  };
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t q = 0; q < t; ++q) {
        const int64_t end = causal ? q + 1 : t;
        std::vector<double> p(end);
        double max = -1e300, sum = 0;
        for (int64_t s = 0; s < end; ++s) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += at(i, h * d + e, q) * at(i, c + h * d + e, s);
          p[s] = dot / std::sqrt(static_cast<double>(d));
          max = std::max(max, p[s]);
        }
        for (double& v : p) sum += (v = std::exp(v - max));
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (int64_t s = 0; s < end; ++s) o += p[s] / sum * at(i, 2 * c + h * d + e, s);
          y[(i * c + h * d + e) * t + q] = o;
        }
      }
    }
  }
  return y;
}

// dy = sin(rate i) (or cos): fixed, different at every element.
void FillOutputGrads(float rate, bool cosine, LayerHarness* h) {
  for (auto& g : h->output_grads) {
    for (size_t i = 0; i < g.size(); ++i) {
      const float a = rate * static_cast<float>(i);
      g[i] = cosine ? std::cos(a) : std::sin(a);
    }
  }
}

struct Case {
  const char* keys;       // the entry's keys but the algorithm
  const char* algorithm;  // "tiled" or "naive"
  bool causal;
  int64_t heads;
  std::string Entry() const {
    return std::string("{type: attention, ") + keys + ", algorithm: " + algorithm + "}";
  }
  std::string With(const char* other) const {
    return std::string("{type: attention, ") + keys + ", algorithm: " + other + "}";
  }
};
const Case kCases[] = {
    {"heads: 2", "tiled", false, 2},
    {"heads: 2, causal: true", "tiled", true, 2},
    {"heads: 1, causal: true", "naive", true, 1},
    {"heads: 4", "naive", false, 4},
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesADirectComputationAndFiniteDifferences) {
  const Shape input(2, 12, 1, 5);  // C = 4
  LayerHarness h(GetParam().Entry(), {input});
  h.Randomize(3);
  h.Forward();
  const std::vector<double> expected =
      Reference(h.inputs[0], 2, 4, 5, GetParam().heads, GetParam().causal);
  ASSERT_EQ(h.outputs[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(h.outputs[0][i], expected[i], 1e-5) << i;
  }
  EXPECT_EQ(CheckGradients(h), "");
}

// Both algorithms compute each row alike: the same outputs and gradients,
// bit for bit, and tiled keeps 2 floats per query where naive keeps T.
TEST_P(AttentionTest, TiledAndNaiveGiveTheSameBits) {
  const Shape input(3, 12, 1, 7);
  LayerHarness naive(GetParam().With("naive"), {input});
  LayerHarness tiled(GetParam().With("tiled"), {input});
  for (LayerHarness* h : {&naive, &tiled}) {
    h->Randomize(5);
    h->Forward();
    FillOutputGrads(0.37f, false, h);
    h->Backward();
  }
  EXPECT_EQ(naive.outputs, tiled.outputs);
  EXPECT_EQ(naive.input_grads, tiled.input_grads);
  EXPECT_EQ(naive.aux[0].size(), 3u * GetParam().heads * 7 * 7);
  EXPECT_EQ(tiled.aux[0].size(), 3u * GetParam().heads * 7 * 2);
}

// A step over slices of the batch (a streamed step) gives the whole batch's bits.
TEST_P(AttentionTest, SlicesOfTheBatchGiveTheWholeBatchsBits) {
  const Shape input(3, 12, 1, 6);
  LayerHarness whole(GetParam().Entry(), {input}), sliced(GetParam().Entry(), {input});
  sliced.slice_images = 2;
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Randomize(9);
    h->Forward();
    FillOutputGrads(0.11f, true, h);
    h->Backward();
  }
  EXPECT_EQ(whole.outputs, sliced.outputs);
  EXPECT_EQ(whole.input_grads, sliced.input_grads);
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionTest, ::testing::ValuesIn(kCases));

// At a GPT block's sequence of 4,096 the tiled algorithm keeps 1/2048 of
// what naive keeps for backward.
TEST(AttentionDeclarationTest, TiledSavesRowStatisticsOnly) {
  for (const char* algorithm : {"tiled", "naive"}) {
    LayerHarness h(std::string("{type: attention, heads: 12, algorithm: ") + algorithm + "}",
                   {Shape(1, 3 * 768, 1, 4096)});
    const std::vector<AuxSpec> aux = h.layer().aux();
    ASSERT_EQ(aux.size(), 1u);
    const int64_t saved = aux[0].shape.numel();
    EXPECT_EQ(saved, std::string(algorithm) == "tiled" ? 12 * 4096 * 2 : 12 * 4096 * 4096);
    // The workspace holds rows of scores, never a T x T matrix.
    EXPECT_LT(h.layer().workspace_bytes(Pass::kBackward), size_t{12} * 4096 * 4096);
  }
}

Status BuildError(const std::string& layers) {
  const std::string yaml =
      "layers:\n  - {name: data, type: input, shape: [1, 1, 8], labels: pixels}\n"
      "  - {name: embed, type: embedding, vocabulary: 5, size: 6}\n" +
      layers + "  - {name: loss, type: softmax_loss}\n";
  return testing::BuildStatus(yaml, "gpt.yaml");
}

TEST(AttentionDeclarationTest, BadShapesAreErrorsNamingTheLayer) {
  Status heads = BuildError(
      "  - {name: qkv, type: convolution, filters: 18, kernel: 1}\n"
      "  - {name: attn, type: attention, heads: 4}\n"
      "  - {name: scores, type: convolution, filters: 5, kernel: 1}\n");
  EXPECT_THAT(heads.message(), HasSubstr("layer 'attn' (attention)"));
  EXPECT_THAT(heads.message(), HasSubstr("heads: 4 does not divide the width C = 6"));
  Status stacked = BuildError(
      "  - {name: qkv, type: convolution, filters: 7, kernel: 1}\n"
      "  - {name: attn, type: attention, heads: 1}\n"
      "  - {name: scores, type: convolution, filters: 5, kernel: 1}\n");
  EXPECT_THAT(stacked.message(), HasSubstr("N x 3C x 1 x T"));
  Status longer = BuildError(
      "  - {name: pos, type: positions, length: 4}\n"
      "  - {name: scores, type: convolution, filters: 5, kernel: 1}\n");
  EXPECT_THAT(longer.message(), HasSubstr("layer 'pos' (positions)"));
  EXPECT_THAT(longer.message(),
              HasSubstr("a sequence of 8 positions is longer than the table's length: 4"));
  Status algorithm = BuildError(
      "  - {name: qkv, type: convolution, filters: 18, kernel: 1}\n"
      "  - {name: attn, type: attention, heads: 2, algorithm: flash}\n"
      "  - {name: scores, type: convolution, filters: 5, kernel: 1}\n");
  EXPECT_THAT(algorithm.message(), HasSubstr("algorithm"));
  EXPECT_THAT(algorithm.message(), HasSubstr("flash"));
}

TEST(PositionsTest, AddsTheTableAndItsGradientSumsTheImages) {
  LayerHarness h("{type: positions, length: 6}", {Shape(3, 2, 1, 4)});
  h.Randomize(4);
  h.Forward();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t t = 0; t < 4; ++t) {
        const int64_t e = (i * 2 + c) * 4 + t;
        EXPECT_EQ(h.outputs[0][e], h.inputs[0][e] + h.params[0][c * 6 + t]);
      }
    }
  }
  EXPECT_EQ(CheckGradients(h), "");
  LayerHarness sliced("{type: positions, length: 6}", {Shape(3, 2, 1, 4)});
  sliced.slice_images = 2;
  sliced.Randomize(4);
  sliced.Forward();
  for (LayerHarness* x : {&h, &sliced}) {
    FillOutputGrads(0.3f, false, x);
    x->Backward();
  }
  EXPECT_EQ(h.param_grads, sliced.param_grads);
  // Positions past the sequence get no gradient.
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_EQ(h.param_grads[0][c * 6 + 4], 0.0f);
    EXPECT_EQ(h.param_grads[0][c * 6 + 5], 0.0f);
  }
}

// tokens: an image read as a sequence of its pixels, values unchanged.
TEST(TokensTest, AnImageBecomesASequenceOfItsPixels) {
  LayerHarness h("{type: tokens}", {Shape(2, 3, 4, 5)});
  EXPECT_EQ(h.output_shapes()[0], Shape(2, 3, 1, 20));
  h.Randomize(2);
  h.Forward();
  EXPECT_EQ(h.outputs[0], h.inputs[0]);
  EXPECT_EQ(CheckGradients(h), "");
}

// class_token: the token before every image's sequence; its gradient sums
// the images' gradients at position 0, the same over slices of the batch.
TEST(ClassTokenTest, PutsTheTokenFirstAndSumsItsGradient) {
  LayerHarness h("{type: class_token}", {Shape(3, 2, 1, 4)});
  EXPECT_EQ(h.output_shapes()[0], Shape(3, 2, 1, 5));
  h.Randomize(5);
  h.Forward();
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t c = 0; c < 2; ++c) {
      EXPECT_EQ(h.outputs[0][(i * 2 + c) * 5], h.params[0][c]);
      for (int64_t t = 0; t < 4; ++t) {
        EXPECT_EQ(h.outputs[0][(i * 2 + c) * 5 + 1 + t], h.inputs[0][(i * 2 + c) * 4 + t]);
      }
    }
  }
  EXPECT_EQ(CheckGradients(h), "");
  LayerHarness sliced("{type: class_token}", {Shape(3, 2, 1, 4)});
  sliced.slice_images = 2;
  sliced.Randomize(5);
  sliced.Forward();
  for (LayerHarness* x : {&h, &sliced}) {
    FillOutputGrads(0.7f, false, x);
    x->Backward();
  }
  EXPECT_EQ(h.param_grads, sliced.param_grads);
  EXPECT_EQ(h.input_grads, sliced.input_grads);
}

// token: one position of each sequence, counted from the end when negative.
TEST(TokenTest, TakesOnePositionAndGivesItTheGradient) {
  for (int index : {0, 2, -1}) {
    SCOPED_TRACE(index);
    LayerHarness h("{type: token, index: " + std::to_string(index) + "}", {Shape(2, 3, 1, 4)});
    EXPECT_EQ(h.output_shapes()[0], Shape(2, 3, 1, 1));
    h.Randomize(6);
    h.Forward();
    const int64_t t = index < 0 ? 4 + index : index;
    for (int64_t row = 0; row < 6; ++row) EXPECT_EQ(h.outputs[0][row], h.inputs[0][row * 4 + t]);
    EXPECT_EQ(CheckGradients(h), "");
  }
  Status outside = BuildError("  - {name: pick, type: token, index: -9}\n");
  EXPECT_THAT(outside.message(), HasSubstr("layer 'pick' (token)"));
  EXPECT_THAT(outside.message(), HasSubstr("index -9 is outside the sequence's 8 positions"));
  auto spec = ParseNetString(
      "layers:\n  - {name: data, type: input, shape: [3, 2, 4]}\n"
      "  - {name: cls, type: class_token}\n"
      "  - {name: fc, type: fully_connected, outputs: 2}\n"
      "  - {name: loss, type: softmax_loss}\n",
      "image.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Status image = Net::Build(*spec, {2, DeviceType::kCpu}).status();
  EXPECT_THAT(image.message(), HasSubstr("layer 'cls' (class_token)"));
  EXPECT_THAT(image.message(), HasSubstr("class_token takes a sequence N x C x 1 x T"));
}

}  // namespace
}  // namespace spill
