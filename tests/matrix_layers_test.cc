// matmul, softmax and reshape: the outputs against direct float64
// computations (every transpose, every axis), gradients against finite
// differences, bits that depend neither on the thread count nor on slices
// of the batch, attention written out with them against the attention
// layer, and the errors a user meets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "framework/graph/net.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using testing::CheckInputGradientAdds;
using ::testing::HasSubstr;
using testing::LayerHarness;

struct Product {
  const char* name;
  bool transpose_a, transpose_b;
  float alpha;
  // op(A) M x K, op(B) K x P, over N = 2 images of C = 3 channels.
  int64_t m = 3, k = 4, p = 5;
  Shape A() const { return transpose_a ? Shape(2, 3, k, m) : Shape(2, 3, m, k); }
  Shape B() const { return transpose_b ? Shape(2, 3, p, k) : Shape(2, 3, k, p); }
  std::string Entry() const {
    return std::string("{type: matmul, transpose_a: ") + (transpose_a ? "true" : "false") +
           ", transpose_b: " + (transpose_b ? "true" : "false") +
           ", alpha: " + std::to_string(alpha) + "}";
  }
};

const Product kProducts[] = {
    {"plain", false, false, 1.0f},
    {"transpose_a", true, false, 0.5f},
    {"transpose_b", false, true, -2.0f},
    {"both", true, true, 0.25f},
};

class MatmulTest : public ::testing::TestWithParam<Product> {};

TEST_P(MatmulTest, MatchesADirectComputation) {
  const Product& g = GetParam();
  LayerHarness h(g.Entry(), {g.A(), g.B()});
  ASSERT_EQ(h.output_shapes()[0], Shape(2, 3, g.m, g.p));
  h.Randomize(3);
  h.Forward();
  for (int64_t q = 0; q < 6; ++q) {
    const float* a = h.inputs[0].data() + q * g.m * g.k;
    const float* b = h.inputs[1].data() + q * g.k * g.p;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.p; ++j) {
        double want = 0;
        for (int64_t t = 0; t < g.k; ++t) {
          const double x = g.transpose_a ? a[t * g.m + i] : a[i * g.k + t];
          const double y = g.transpose_b ? b[j * g.k + t] : b[t * g.p + j];
          want += x * y;
        }
        want *= g.alpha;
        EXPECT_NEAR(h.outputs[0][(q * g.m + i) * g.p + j], want, 1e-5) << q << " " << i << " " << j;
      }
    }
  }
}

TEST_P(MatmulTest, GradientsMatchFiniteDifferences) {
  LayerHarness h(GetParam().Entry(), {GetParam().A(), GetParam().B()});
  h.Randomize(5);
  EXPECT_EQ(CheckGradients(h), "");
  EXPECT_EQ(CheckInputGradientAdds(h), "");
}

// One thread or three, the whole batch or slices of one image: the same bits.
TEST_P(MatmulTest, BitsDoNotDependOnThreadsOrSlices) {
  const Product& g = GetParam();
  LayerHarness one(g.Entry(), {g.A(), g.B()}), three(g.Entry(), {g.A(), g.B()}),
      sliced(g.Entry(), {g.A(), g.B()});
  sliced.slice_images = 1;
  const int threads = omp_get_max_threads();
  for (auto [count, h] : {std::pair{1, &one}, std::pair{3, &three}, std::pair{2, &sliced}}) {
    omp_set_num_threads(count);
    h->Randomize(7);
    h->Forward();
    for (size_t i = 0; i < h->output_grads[0].size(); ++i) {
      h->output_grads[0][i] = std::sin(0.3f * static_cast<float>(i));
    }
    h->Backward();
  }
  omp_set_num_threads(threads);
  for (const LayerHarness* h : {&three, &sliced}) {
    EXPECT_EQ(one.outputs, h->outputs);
    EXPECT_EQ(one.input_grads, h->input_grads);
  }
}

INSTANTIATE_TEST_SUITE_P(Matmul, MatmulTest, ::testing::ValuesIn(kProducts),
                         [](const ::testing::TestParamInfo<Product>& info) {
                           return std::string(info.param.name);
                         });

class SoftmaxTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SoftmaxTest, RowsAlongTheAxisAreADistribution) {
  const std::string axis = GetParam();
  const Shape s(2, 3, 4, 5);
  LayerHarness h("{type: softmax, axis: " + axis + "}", {s});
  h.Randomize(11);
  for (float& v : h.inputs[0]) v *= 8;  // rows far from uniform
  h.Forward();
  const int64_t dims[4] = {s.n(), s.c(), s.h(), s.w()};
  const int a = axis == "c" ? 1 : axis == "h" ? 2 : 3;
  int64_t stride = 1;
  for (int d = a + 1; d < 4; ++d) stride *= dims[d];
  const int64_t length = dims[a];
  for (int64_t r = 0; r < s.numel() / length; ++r) {
    const int64_t start = (r / stride) * length * stride + r % stride;
    double max = -1e300, sum = 0;
    for (int64_t i = 0; i < length; ++i)
      max = std::max<double>(max, h.inputs[0][start + i * stride]);
    for (int64_t i = 0; i < length; ++i) sum += std::exp(h.inputs[0][start + i * stride] - max);
    for (int64_t i = 0; i < length; ++i) {
      const double want = std::exp(h.inputs[0][start + i * stride] - max) / sum;
      EXPECT_NEAR(h.outputs[0][start + i * stride], want, 1e-6) << axis << " row " << r;
    }
  }
}

TEST_P(SoftmaxTest, GradientsMatchFiniteDifferences) {
  LayerHarness h("{type: softmax, axis: " + std::string(GetParam()) + "}", {Shape(2, 3, 4, 5)});
  h.Randomize(13);
  EXPECT_EQ(CheckGradients(h), "");
  EXPECT_EQ(CheckInputGradientAdds(h), "");
}

INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxTest, ::testing::Values("w", "h", "c"));

TEST(ReshapeTest, KeepsEachImagesValuesInOrder) {
  LayerHarness h("{type: reshape, shape: [2, -1, 3]}", {Shape(2, 4, 1, 3)});
  ASSERT_EQ(h.output_shapes()[0], Shape(2, 2, 2, 3));
  h.Randomize(17);
  h.Forward();
  EXPECT_EQ(h.outputs[0], h.inputs[0]);
  EXPECT_EQ(CheckGradients(h), "");
  EXPECT_EQ(CheckInputGradientAdds(h), "");
}

// Attention over N x 3C x 1 x T written out - Q, K, V as heads x d x T
// (reshapes of the slices; here views of the same memory), S = Q^T K d^-1/2,
// P = softmax(S), O = V P^T - gives the attention layer's output.
TEST(MatrixAttentionTest, EqualsTheAttentionLayer) {
  const int64_t n = 2, heads = 2, d = 4, c = heads * d, t = 6;
  LayerHarness attention("{type: attention, heads: 2, algorithm: naive}", {Shape(n, 3 * c, 1, t)});
  attention.Randomize(19);
  attention.Forward();
  const std::vector<float>& x = attention.inputs[0];
  auto part = [&](int which) {  // Q, K or V of every image: N x heads x d x T
    std::vector<float> v(n * c * t);
    for (int64_t image = 0; image < n; ++image) {
      std::copy_n(x.begin() + (image * 3 + which) * c * t, c * t, v.begin() + image * c * t);
    }
    return v;
  };
  const Shape heads_shape(n, heads, d, t);
  LayerHarness scores("{type: matmul, transpose_a: true, alpha: 0.5}", {heads_shape, heads_shape});
  scores.inputs = {part(0), part(1)};
  scores.Forward();
  LayerHarness softmax("{type: softmax}", {Shape(n, heads, t, t)});
  softmax.inputs = {scores.outputs[0]};
  softmax.Forward();
  LayerHarness out("{type: matmul, transpose_b: true}", {heads_shape, Shape(n, heads, t, t)});
  out.inputs = {part(2), softmax.outputs[0]};
  out.Forward();
  ASSERT_EQ(out.outputs[0].size(), attention.outputs[0].size());
  for (size_t i = 0; i < out.outputs[0].size(); ++i) {
    EXPECT_NEAR(out.outputs[0][i], attention.outputs[0][i], 1e-6) << i;
  }
  ASSERT_EQ(softmax.outputs[0].size(), attention.aux[0].size());  // naive's saved probabilities
  for (size_t i = 0; i < softmax.outputs[0].size(); ++i) {
    EXPECT_NEAR(softmax.outputs[0][i], attention.aux[0][i], 1e-6) << i;
  }
}

Status BuildError(const std::string& layers) {
  const std::string yaml = "layers:\n  - {name: data, type: input, shape: [3, 6, 4]}\n" + layers +
                           "  - {name: gap, type: global_avg_pool}\n"
                           "  - {name: fc, type: fully_connected, outputs: 2}\n"
                           "  - {name: loss, type: softmax_loss}\n";
  return testing::BuildStatus(yaml, "matrices.yaml");
}

TEST(MatrixLayersDeclarationTest, BadShapesAndKeysAreErrorsNamingTheLayer) {
  ASSERT_TRUE(
      BuildError("  - {name: m, type: matmul, inputs: [data, data], transpose_b: true}\n").ok());
  struct Bad {
    const char* layers;
    const char* layer;
    const char* message;
  };
  const Bad cases[] = {
      {"  - {name: m, type: matmul, inputs: [data, data]}\n", "layer 'm' (matmul)",
       "matmul of a 6 x 4 by a 6 x 4 matrix (after transpose_a: false, transpose_b: false): the "
       "inner sizes differ"},
      {"  - {name: r, type: reshape, shape: [72, 1, 1]}\n"
       "  - {name: m, type: matmul, inputs: [data, r], transpose_b: true}\n",
       "layer 'm' (matmul)", "both inputs need the same N and C"},
      {"  - {name: m, type: matmul, inputs: [data]}\n", "layer 'm' (matmul)", "takes 2 inputs"},
      {"  - {name: s, type: softmax, axis: n}\n", "layer 's' (softmax)",
       "axis: must be one of: w, h, c (got 'n')"},
      {"  - {name: r, type: reshape, shape: [5, -1, 1]}\n", "layer 'r' (reshape)",
       "shape: [5, -1, 1] does not hold the 72 values of each image"},
      {"  - {name: r, type: reshape, shape: [-1, -1, 1]}\n", "layer 'r' (reshape)",
       "may leave one size (-1) to the others, not 2"},
      {"  - {name: r, type: reshape, shape: [72, 1]}\n", "layer 'r' (reshape)",
       "shape: must list C, H and W"},
      {"  - {name: r, type: reshape, shape: [0, 1, 72]}\n", "layer 'r' (reshape)",
       "sizes are at least 1"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.layers);
    const Status status = BuildError(c.layers);
    EXPECT_THAT(status.message(), HasSubstr(c.layer));
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace spill
