// window_attention: the outputs against a direct float64 computation of
// Swin's shifted-window attention (the roll, the windows, the relative
// position bias, the mask, the roll back), gradients of the input and the
// table against finite differences, bits that depend neither on the thread
// count nor on slices of the batch, the declarations, and the errors a
// user meets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "framework/device/convert.h"
#include "framework/graph/net.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using ::testing::HasSubstr;
using testing::LayerHarness;

struct Geometry {
  const char* name;
  int64_t n, c, h, w, heads, window, shift;
  Shape Input() const { return Shape(n, 3 * c, h, w); }
  std::string Entry() const {
    return "{type: window_attention, heads: " + std::to_string(heads) +
           ", window: " + std::to_string(window) + ", shift: " + std::to_string(shift) + "}";
  }
};

// Which of an axis's three regions rolled coordinate i lies in
// (torchvision's slices (0, -w), (-w, -s), (-s, None)).
int Band(int64_t i, int64_t extent, int64_t window, int64_t shift) {
  if (i < extent - window) return 0;
  return i < extent - shift ? 1 : 2;
}

// torchvision 0.14's shifted_window_attention after its qkv linear and
// before its proj, in double: x N x 3C x H x W to N x C x H x W.
std::vector<double> Reference(const Geometry& g, const std::vector<float>& x,
                              const std::vector<float>& table) {
  const int64_t d = g.c / g.heads, w = g.window, tokens = w * w;
  // An axis one window spans is not rolled.
  const int64_t sh = g.window >= g.h ? 0 : g.shift, sw = g.window >= g.w ? 0 : g.shift;
  const bool masked = sh + sw > 0;
  // The rolled grid: x'(i, j) = x((i + sh) mod H, (j + sw) mod W).
  auto rolled = [&](int64_t image, int64_t channel, int64_t i, int64_t j) {
    const int64_t row = (i + sh) % g.h, column = (j + sw) % g.w;
    return static_cast<double>(x[((image * 3 * g.c + channel) * g.h + row) * g.w + column]);
  };
  std::vector<double> y(g.n * g.c * g.h * g.w);
  for (int64_t image = 0; image < g.n; ++image) {
    for (int64_t a = 0; a < g.h / w; ++a) {
      for (int64_t b = 0; b < g.w / w; ++b) {
        for (int64_t head = 0; head < g.heads; ++head) {
          for (int64_t t = 0; t < tokens; ++t) {
            const int64_t ti = a * w + t / w, tj = b * w + t % w;
            std::vector<double> p(tokens);
            double max = -1e300, sum = 0;
            for (int64_t u = 0; u < tokens; ++u) {
              const int64_t ui = a * w + u / w, uj = b * w + u % w;
              double dot = 0;
              for (int64_t e = 0; e < d; ++e) {
                dot += rolled(image, head * d + e, ti, tj) / std::sqrt(static_cast<double>(d)) *
                       rolled(image, g.c + head * d + e, ui, uj);
              }
              const int64_t index = (t / w - u / w + w - 1) * (2 * w - 1) + (t % w - u % w + w - 1);
              dot += table[index * g.heads + head];
              const int label_t = 3 * Band(ti, g.h, w, sh) + Band(tj, g.w, w, sw);
              const int label_u = 3 * Band(ui, g.h, w, sh) + Band(uj, g.w, w, sw);
              if (masked && label_t != label_u) dot += -100.0;
              p[u] = dot;
              max = std::max(max, dot);
            }
            for (double& v : p) sum += (v = std::exp(v - max));
            // The roll back: rolled (ti, tj) is pixel ((ti + sh) mod H, (tj + sw) mod W).
            const int64_t row = (ti + sh) % g.h, column = (tj + sw) % g.w;
            for (int64_t e = 0; e < d; ++e) {
              double o = 0;
              for (int64_t u = 0; u < tokens; ++u) {
                o += p[u] / sum *
                     rolled(image, 2 * g.c + head * d + e, a * w + u / w, b * w + u % w);
              }
              y[((image * g.c + head * d + e) * g.h + row) * g.w + column] = o;
            }
          }
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

const Geometry kGeometries[] = {
    {"unshifted", 2, 4, 6, 6, 2, 3, 0},  // four windows
    {"shifted", 2, 4, 6, 6, 2, 3, 1},    // masks in all but the first window
    {"one_head_largest_shift", 2, 4, 6, 6, 1, 3, 2},
    {"grid_of_2_by_3", 2, 4, 4, 6, 2, 2, 1},
    {"one_window_high", 1, 6, 3, 6, 3, 3, 1},  // rolled along the width only
};

class WindowAttentionTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(WindowAttentionTest, MatchesADirectComputation) {
  const Geometry& g = GetParam();
  LayerHarness h(g.Entry(), {g.Input()});
  ASSERT_EQ(h.output_shapes()[0], Shape(g.n, g.c, g.h, g.w));
  h.Randomize(3);
  h.Forward();
  const std::vector<double> expected = Reference(g, h.inputs[0], h.params[0]);
  ASSERT_EQ(h.outputs[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(h.outputs[0][i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i]))) << i;
  }
}

// The input's gradient (queries, keys and values) and the table's.
TEST_P(WindowAttentionTest, GradientsMatchFiniteDifferences) {
  LayerHarness h(GetParam().Entry(), {GetParam().Input()});
  h.Randomize(4);
  EXPECT_EQ(CheckGradients(h), "");
}

// One thread or three: the same bits forward and backward.
TEST_P(WindowAttentionTest, BitsDoNotDependOnTheThreadCount) {
  const int threads = omp_get_max_threads();
  LayerHarness one(GetParam().Entry(), {GetParam().Input()});
  LayerHarness three(GetParam().Entry(), {GetParam().Input()});
  for (auto [count, h] : {std::pair{1, &one}, std::pair{3, &three}}) {
    omp_set_num_threads(count);
    h->Randomize(5);
    h->Forward();
    FillOutputGrads(0.37f, false, h);
    h->Backward();
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(one.outputs, three.outputs);
  EXPECT_EQ(one.aux, three.aux);
  EXPECT_EQ(one.input_grads, three.input_grads);
  EXPECT_EQ(one.param_grads, three.param_grads);
}

// A step over slices of the batch (a streamed step) gives the whole batch's
// bits, the table's gradient included.
TEST_P(WindowAttentionTest, SlicesOfTheBatchGiveTheWholeBatchsBits) {
  Geometry g = GetParam();
  g.n = 3;
  LayerHarness whole(g.Entry(), {g.Input()}), sliced(g.Entry(), {g.Input()});
  sliced.slice_images = 2;
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Randomize(9);
    h->Forward();
    FillOutputGrads(0.11f, true, h);
    h->Backward();
  }
  EXPECT_EQ(whole.outputs, sliced.outputs);
  EXPECT_EQ(whole.input_grads, sliced.input_grads);
  EXPECT_EQ(whole.param_grads, sliced.param_grads);
}

INSTANTIATE_TEST_SUITE_P(WindowAttention, WindowAttentionTest, ::testing::ValuesIn(kGeometries),
                         [](const ::testing::TestParamInfo<Geometry>& info) {
                           return std::string(info.param.name);
                         });

// An axis that one window spans is neither rolled nor masked, as in
// torchvision: a shift on a single window changes nothing.
TEST(WindowAttentionRulesTest, ASingleWindowIsNotShifted) {
  LayerHarness plain("{type: window_attention, heads: 2, window: 3}", {Shape(2, 12, 3, 3)});
  LayerHarness shifted("{type: window_attention, heads: 2, window: 3, shift: 1}",
                       {Shape(2, 12, 3, 3)});
  for (LayerHarness* h : {&plain, &shifted}) {
    h->Randomize(6);
    h->Forward();
  }
  EXPECT_EQ(plain.outputs, shifted.outputs);
}

// Backward adds into the input's gradient when asked (a tensor read by
// several layers), and a recomputing forward gives the output's and the
// saved probabilities' bits again.
TEST(WindowAttentionRulesTest, AccumulatesAndRecomputes) {
  LayerHarness h("{type: window_attention, heads: 2, window: 3, shift: 1}", {Shape(2, 12, 6, 6)});
  h.Randomize(7);
  h.Forward();
  const std::vector<std::vector<float>> outputs = h.outputs, aux = h.aux;
  h.Forward(Phase::kTrain, true, 8);
  EXPECT_EQ(h.outputs, outputs);
  EXPECT_EQ(h.aux, aux);
  FillOutputGrads(0.23f, false, &h);
  h.Backward({false});
  const std::vector<float> fresh = h.input_grads[0];
  std::vector<float> base(fresh.size());
  for (size_t j = 0; j < base.size(); ++j) base[j] = static_cast<float>(j % 7) - 3;
  h.input_grads[0] = base;
  h.Backward({true});
  for (size_t j = 0; j < base.size(); ++j) {
    ASSERT_NEAR(h.input_grads[0][j], base[j] + fresh[j], 1e-5) << j;
  }
}

// Inputs stored in bfloat16 are widened as each window is gathered and the
// results rounded as they are scattered: the bits of float32 copies.
TEST(WindowAttentionRulesTest, Bf16GivesTheBitsOfFloat32Copies) {
  const Shape in(2, 12, 6, 6), out(2, 4, 6, 6);
  LayerHarness h("{type: window_attention, heads: 2, window: 3, shift: 1}", {in});
  h.Randomize(12);
  FillOutputGrads(0.29f, false, &h);
  auto narrow = [](std::vector<float>* wide) {
    std::vector<uint16_t> half(wide->size());
    for (size_t i = 0; i < half.size(); ++i) {
      half[i] = FloatToBf16Bits((*wide)[i]);
      (*wide)[i] = Bf16BitsToFloat(half[i]);
    }
    return half;
  };
  std::vector<uint16_t> x16 = narrow(&h.inputs[0]), dy16 = narrow(&h.output_grads[0]);
  h.Forward();
  h.Backward();
  Layer& layer = h.layer();
  layer.set_dtypes({DType::kBF16}, {DType::kBF16});
  ASSERT_TRUE(layer.computes_16_bit(Pass::kForward));
  std::vector<uint16_t> y16(out.numel()), dx16(in.numel());
  std::vector<float> saved(h.aux[0].size()), dtable(h.params[0].size());
  std::vector<float> work(layer.workspace_bytes(Pass::kBackward) / sizeof(float));
  const Shape table = layer.params()[0].shape, probabilities = layer.aux()[0].shape;
  auto bf16 = [](const Shape& s, std::vector<uint16_t>& v) {
    return Tensor(s, v.data(), DType::kBF16, Layout::kPlain);
  };
  ForwardArgs f;
  f.inputs = {bf16(in, x16)};
  f.outputs = {bf16(out, y16)};
  f.params = {Tensor(table, h.params[0].data())};
  f.aux = {Tensor(probabilities, saved.data())};
  f.workspace = {work.data(), work.size() * sizeof(float)};
  layer.Forward(f);
  BackwardArgs b;
  b.inputs = f.inputs;
  b.outputs = {Tensor()};
  b.output_grads = {bf16(out, dy16)};
  b.input_grads = {bf16(in, dx16)};
  b.accumulate = {false};
  b.params = f.params;
  b.param_grads = {Tensor(table, dtable.data())};
  b.aux = f.aux;
  b.workspace = f.workspace;
  layer.Backward(b);
  EXPECT_EQ(saved, h.aux[0]);
  EXPECT_EQ(dtable, h.param_grads[0]);
  for (size_t i = 0; i < y16.size(); ++i) {
    ASSERT_EQ(y16[i], FloatToBf16Bits(h.outputs[0][i])) << "output " << i;
  }
  for (size_t i = 0; i < dx16.size(); ++i) {
    ASSERT_EQ(dx16[i], FloatToBf16Bits(h.input_grads[0][i])) << "input gradient " << i;
  }
}

// Swin-T's first stage (56 x 56, windows of 7, 3 heads of 32): the table,
// the saved probabilities, and a workspace of 8 windows' rows whatever the
// batch.
TEST(WindowAttentionDeclarationTest, TableProbabilitiesAndWorkspace) {
  size_t workspace = 0;
  for (int64_t batch : {1, 32}) {
    LayerHarness h("{type: window_attention, heads: 3, window: 7, shift: 3}",
                   {Shape(batch, 3 * 96, 56, 56)});
    const std::vector<ParamSpec> params = h.layer().params();
    ASSERT_EQ(params.size(), 1u);
    EXPECT_EQ(params[0].name, "table");
    EXPECT_EQ(params[0].shape, Shape(169, 3, 1, 1));
    EXPECT_EQ(params[0].init.kind, Initializer::Kind::kNormal);
    EXPECT_EQ(params[0].init.value, 0.02f);
    EXPECT_EQ(params[0].decay_mult, 0.0f);
    const std::vector<AuxSpec> aux = h.layer().aux();
    ASSERT_EQ(aux.size(), 1u);
    EXPECT_EQ(aux[0].name, "probabilities");
    EXPECT_EQ(aux[0].shape, Shape(batch, 64 * 3, 49, 49));
    if (workspace == 0) workspace = h.layer().workspace_bytes(Pass::kBackward);
    EXPECT_EQ(h.layer().workspace_bytes(Pass::kBackward), workspace);
    EXPECT_EQ(workspace, size_t{8} * (7 * 49 * 32 + 49 + 169) * sizeof(float));
  }
}

Status BuildError(const std::string& layers) {
  const std::string yaml = "layers:\n  - {name: data, type: input, shape: [3, 6, 6]}\n" + layers +
                           "  - {name: gap, type: global_avg_pool}\n"
                           "  - {name: fc, type: fully_connected, outputs: 2}\n"
                           "  - {name: loss, type: softmax_loss}\n";
  auto spec = ParseNetString(yaml, "swin.yaml");
  if (!spec.ok()) return spec.status();
  return Net::Build(*spec, {2, DeviceType::kCpu}).status();
}

// A 1x1 convolution of `filters` and the window attention entry `keys`.
Status AttentionError(int filters, const std::string& keys) {
  return BuildError("  - {name: qkv, type: convolution, filters: " + std::to_string(filters) +
                    ", kernel: 1}\n  - {name: attn, type: window_attention, " + keys + "}\n");
}

TEST(WindowAttentionDeclarationTest, BadShapesAndKeysAreErrorsNamingTheLayer) {
  ASSERT_TRUE(AttentionError(18, "heads: 2, window: 3, shift: 1").ok());
  struct Bad {
    int filters;
    const char* keys;
    const char* message;
  };
  const Bad cases[] = {
      {18, "heads: 4, window: 3",
       "heads: 4 does not divide the width C = 6 (the input has 3C = 18"},
      {18, "heads: 2, window: 4", "window: 4 does not divide the image's 6 x 6 pixels"},
      {18, "heads: 2, window: 3, shift: 3", "shift: must be an integer in [0, 2] (got '3')"},
      {18, "heads: 2, window: 3, shift: -1", "shift: must be an integer in [0, 2] (got '-1')"},
      {16, "heads: 2, window: 3", "N x 3C x H x W"},
      {18, "heads: 2", "window"},
      {18, "heads: 2, window: 3, algorithm: naive", "algorithm"},
      {18, "heads: 2, window: 3, inputs: [qkv, data]", "takes 1 input, got 2"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.keys);
    const Status status = AttentionError(c.filters, c.keys);
    EXPECT_THAT(status.message(), HasSubstr("layer 'attn' (window_attention)"));
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace spill
