// window_attention: the outputs against a direct float64 computation of
// Swin's shifted-window attention (the roll, the windows, the relative
// position bias, the mask, the roll back) and of Swin V2's cosine attention,
// gradients of the input, the table and logit_scale against finite
// differences, bits that depend neither on the thread count nor on slices
// of the batch, the declarations, and the errors a user meets.
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
using testing::CheckInputGradientAdds;
using ::testing::HasSubstr;
using testing::LayerHarness;

// ln 100 as PyTorch clamps a float logit_scale with math.log(100.0).
const float kLn100 = static_cast<float>(std::log(100.0));

struct Geometry {
  const char* name;
  int64_t n, c, h, w, heads, window, shift;
  bool cosine = false;
  // With `cosine`, each head's logit_scale (above ln 100: clamped).
  std::vector<float> logit_scales = {};
  bool grid = false;  // MaxViT's grid attention
  float scale = 0;    // what multiplies the queries, when not d^-1/2
  Shape Input() const { return Shape(n, 3 * c, h, w); }
  std::string Entry() const {
    return "{type: window_attention, heads: " + std::to_string(heads) +
           ", window: " + std::to_string(window) + ", shift: " + std::to_string(shift) +
           (cosine ? ", cosine: true" : "") + (grid ? ", grid: true" : "") +
           (scale > 0 ? ", scale: " + std::to_string(scale) + "}" : "}");
  }
  // Random inputs and table, and the geometry's logit_scale.
  void Fill(uint64_t seed, LayerHarness* h) const {
    h->Randomize(seed);
    if (cosine) h->params[1] = logit_scales;
  }
};

// Which of an axis's three regions rolled coordinate i lies in
// (torchvision's slices (0, -w), (-w, -s), (-s, None)).
int Band(int64_t i, int64_t extent, int64_t window, int64_t shift) {
  if (i < extent - window) return 0;
  return i < extent - shift ? 1 : 2;
}

// Row e of a window's d queries or keys as the reference's scores read
// them: divided by max(|.|, 1e-12) with cosine attention (F.normalize),
// the queries times d^-1/2 (or `scale`) without.
std::vector<double> ScoreRow(bool cosine, bool query, std::vector<double> row, float scale = 0) {
  double squares = 0;
  for (double v : row) squares += v * v;
  const double divisor = cosine      ? std::max(std::sqrt(squares), 1e-12)
                         : !query    ? 1.0
                         : scale > 0 ? 1.0 / static_cast<double>(scale)
                                     : std::sqrt(static_cast<double>(row.size()));
  for (double& v : row) v /= divisor;
  return row;
}

// torchvision 0.14's shifted_window_attention after its qkv linear and
// before its proj, in double: x N x 3C x H x W to N x C x H x W. Given
// logit_scale (one per head), Swin V2's cosine attention: normalize(q) .
// normalize(k) times exp(min(logit_scale, ln 100)), no d^-1/2. With
// `grid`, MaxViT's grid attention: the image cut into (H/w) x (W/w) blocks
// (its window partition by H/w) and group (a, b) the pixels at offset
// (a, b) of every block (its SwapAxes), token t the t-th block.
std::vector<double> Reference(const Geometry& g, const std::vector<float>& x,
                              const std::vector<float>& table,
                              const std::vector<float>& logit_scale = {}) {
  const bool cosine = !logit_scale.empty();
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
  // Token t of window (a, b): its rolled row and column.
  auto row_of = [&](int64_t a, int64_t t) {
    return g.grid ? t / w * (g.h / w) + a : a * w + t / w;
  };
  auto column_of = [&](int64_t b, int64_t t) {
    return g.grid ? t % w * (g.w / w) + b : b * w + t % w;
  };
  for (int64_t image = 0; image < g.n; ++image) {
    for (int64_t a = 0; a < g.h / w; ++a) {
      for (int64_t b = 0; b < g.w / w; ++b) {
        for (int64_t head = 0; head < g.heads; ++head) {
          for (int64_t t = 0; t < tokens; ++t) {
            const int64_t ti = row_of(a, t), tj = column_of(b, t);
            std::vector<double> p(tokens);
            double max = -1e300, sum = 0;
            auto features = [&](int64_t first, int64_t i, int64_t j, bool query) {
              std::vector<double> row(d);
              for (int64_t e = 0; e < d; ++e) row[e] = rolled(image, first + head * d + e, i, j);
              return ScoreRow(cosine, query, row, g.scale);
            };
            const std::vector<double> q = features(0, ti, tj, true);
            for (int64_t u = 0; u < tokens; ++u) {
              const int64_t ui = row_of(a, u), uj = column_of(b, u);
              const std::vector<double> k = features(g.c, ui, uj, false);
              double dot = 0;
              for (int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
              if (cosine) dot *= std::exp(std::min<double>(logit_scale[head], kLn100));
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
                     rolled(image, 2 * g.c + head * d + e, row_of(a, u), column_of(b, u));
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
    // Cosine attention: a head clamped to ln 100 (its logit_scale's
    // gradient 0) beside heads below it.
    {"cosine_unshifted", 2, 4, 6, 6, 2, 3, 0, true, {5.0f, 1.5f}},
    {"cosine_shifted", 2, 4, 6, 6, 2, 3, 1, true, {-0.5f, 6.0f}},
    {"cosine_grid_of_2_by_3", 2, 6, 4, 6, 3, 2, 1, true, {2.3f, 0.0f, 3.9f}},
    // MaxViT's grid attention: 3 x 3 tokens spread 2 apart, and a 2 x 3 map
    // of blocks of 3 x 2 (groups 3 apart down, 2 across).
    {"maxvit_grid", 2, 4, 6, 6, 2, 3, 0, false, {}, true},
    {"maxvit_grid_of_2_by_3", 2, 4, 6, 4, 2, 2, 0, false, {}, true},
    {"cosine_maxvit_grid", 1, 4, 6, 6, 2, 3, 0, true, {1.0f, 5.0f}, true},
    // MaxViT scales by C^-1/2, not d^-1/2.
    {"maxvit_grid_scaled", 2, 4, 6, 6, 2, 3, 0, false, {}, true, 0.5f},
    {"shifted_scaled", 2, 4, 6, 6, 2, 3, 1, false, {}, false, 0.25f},
};

class WindowAttentionTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(WindowAttentionTest, MatchesADirectComputation) {
  const Geometry& g = GetParam();
  LayerHarness h(g.Entry(), {g.Input()});
  ASSERT_EQ(h.output_shapes()[0], Shape(g.n, g.c, g.h, g.w));
  g.Fill(3, &h);
  h.Forward();
  const std::vector<double> expected =
      Reference(g, h.inputs[0], h.params[0], g.cosine ? h.params[1] : std::vector<float>{});
  ASSERT_EQ(h.outputs[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(h.outputs[0][i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i]))) << i;
  }
}

// The input's gradient (queries, keys and values), the table's and
// logit_scale's. A clamped logit_scale is lowered to 2 here: at a scale of
// 100 a float forward's differences are too coarse for a query of small
// norm (the next test checks those heads).
TEST_P(WindowAttentionTest, GradientsMatchFiniteDifferences) {
  LayerHarness h(GetParam().Entry(), {GetParam().Input()});
  GetParam().Fill(4, &h);
  if (GetParam().cosine) {
    for (float& v : h.params[1]) v = std::min(v, 2.0f);
  }
  EXPECT_EQ(CheckGradients(h), "");
}

// With cosine attention a head's scale reaches 100 (a clamped
// logit_scale): a float forward's differences would be too coarse there,
// so the gradients are checked against central differences of the float64
// reference, the step the exact difference of the two perturbed floats.
// A clamped logit_scale's gradient is exactly 0, the others' not.
TEST_P(WindowAttentionTest, GradientsMatchDifferencesOfTheReference) {
  const Geometry& g = GetParam();
  if (!g.cosine) GTEST_SKIP() << "float differences suffice without cosine";
  LayerHarness h(g.Entry(), {g.Input()});
  g.Fill(13, &h);
  h.Forward();
  FillOutputGrads(0.41f, false, &h);
  h.Backward();
  const std::vector<float>& r = h.output_grads[0];
  auto objective = [&] {
    const std::vector<double> y = Reference(g, h.inputs[0], h.params[0], h.params[1]);
    double total = 0;
    for (size_t i = 0; i < y.size(); ++i) total += y[i] * r[i];
    return total;
  };
  auto check = [&](const char* what, std::vector<float>& values, const std::vector<float>& grads) {
    for (size_t j = 0; j < values.size(); ++j) {
      const float saved = values[j];
      const float plus = saved + 1e-5f, minus = saved - 1e-5f;
      values[j] = plus;
      const double high = objective();
      values[j] = minus;
      const double low = objective();
      values[j] = saved;
      const double numeric = (high - low) / (static_cast<double>(plus) - minus);
      EXPECT_NEAR(grads[j], numeric, 1e-3 * std::max(1.0, std::abs(numeric))) << what << " " << j;
    }
  };
  check("input", h.inputs[0], h.input_grads[0]);
  check("table", h.params[0], h.param_grads[0]);
  check("logit_scale", h.params[1], h.param_grads[1]);
  for (int64_t head = 0; head < g.heads; ++head) {
    if (g.logit_scales[head] > kLn100) {
      EXPECT_EQ(h.param_grads[1][head], 0.0f) << head;
    } else {
      EXPECT_NE(h.param_grads[1][head], 0.0f) << head;
    }
  }
}

// One thread or three: the same bits forward and backward.
TEST_P(WindowAttentionTest, BitsDoNotDependOnTheThreadCount) {
  const int threads = omp_get_max_threads();
  LayerHarness one(GetParam().Entry(), {GetParam().Input()});
  LayerHarness three(GetParam().Entry(), {GetParam().Input()});
  for (auto [count, h] : {std::pair{1, &one}, std::pair{3, &three}}) {
    omp_set_num_threads(count);
    GetParam().Fill(5, h);
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
    g.Fill(9, h);
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
  EXPECT_EQ(CheckInputGradientAdds(h), "");
}

// logit_scale's gradient passes the clamp at ln 100 itself (torch.clamp's
// backward passes where the input is at most the bound): there it is the
// gradient just below the bound, and just above it 0.
TEST(WindowAttentionRulesTest, LogitScaleLearnsUpToLn100Included) {
  const Geometry g{"cosine", 2, 4, 6, 6, 1, 3, 1, true, {}};
  std::vector<float> grads;
  for (float scale : {std::nextafter(kLn100, 0.0f), kLn100, std::nextafter(kLn100, 10.0f)}) {
    LayerHarness h(g.Entry(), {g.Input()});
    h.Randomize(10);
    h.params[1] = {scale};
    h.Forward();
    FillOutputGrads(0.31f, false, &h);
    h.Backward();
    grads.push_back(h.param_grads[1][0]);
  }
  EXPECT_NE(grads[0], 0.0f);
  EXPECT_NEAR(grads[1], grads[0], 1e-3 * std::abs(grads[0]));
  EXPECT_EQ(grads[2], 0.0f);
}

// A query or key of zeros is divided by F.normalize's floor, not by its
// norm: cosines of 0, finite gradients.
TEST(WindowAttentionRulesTest, CosineOfAZeroQueryOrKeyIsZero) {
  const Geometry g{"cosine", 2, 4, 6, 6, 2, 3, 1, true, {1.0f, 2.0f}};
  LayerHarness h(g.Entry(), {g.Input()});
  g.Fill(11, &h);
  const int64_t plane = g.h * g.w;
  for (int64_t e = 0; e < g.c; ++e) {
    h.inputs[0][e * plane + 7] = 0;              // image 0's queries at pixel 7
    h.inputs[0][(g.c + e) * plane + 20] = 0;     // and keys at pixel 20
    h.inputs[0][(4 * g.c + e) * plane + 0] = 0;  // image 1's queries at pixel 0
  }
  h.Forward();
  const std::vector<double> expected = Reference(g, h.inputs[0], h.params[0], h.params[1]);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(h.outputs[0][i], expected[i], 1e-5 * std::max(1.0, std::abs(expected[i]))) << i;
  }
  FillOutputGrads(0.17f, true, &h);
  h.Backward();
  for (const auto& grads : {h.input_grads[0], h.param_grads[0], h.param_grads[1]}) {
    for (float v : grads) ASSERT_TRUE(std::isfinite(v));
  }
}

// Inputs stored in bfloat16 are widened as each window is gathered and the
// results rounded as they are scattered: the bits of float32 copies.
class WindowAttentionBf16Test : public ::testing::TestWithParam<const char*> {};

TEST_P(WindowAttentionBf16Test, GivesTheBitsOfFloat32Copies) {
  const Shape in(2, 12, 6, 6), out(2, 4, 6, 6);
  LayerHarness h(GetParam(), {in});
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
  std::vector<float> saved(h.aux[0].size());
  std::vector<float> work(layer.workspace_bytes(Pass::kBackward) / sizeof(float));
  const Shape probabilities = layer.aux()[0].shape;
  auto bf16 = [](const Shape& s, std::vector<uint16_t>& v) {
    return Tensor(s, v.data(), DType::kBF16, Layout::kPlain);
  };
  std::vector<std::vector<float>> dparams;
  for (const auto& values : h.params) dparams.emplace_back(values.size());
  ForwardArgs f;
  BackwardArgs b;
  for (size_t i = 0; i < h.params.size(); ++i) {
    f.params.push_back(Tensor(h.param_specs[i].shape, h.params[i].data()));
    b.param_grads.push_back(Tensor(h.param_specs[i].shape, dparams[i].data()));
  }
  f.inputs = {bf16(in, x16)};
  f.outputs = {bf16(out, y16)};
  f.aux = {Tensor(probabilities, saved.data())};
  f.workspace = {work.data(), work.size() * sizeof(float)};
  layer.Forward(f);
  b.inputs = f.inputs;
  b.outputs = {Tensor()};
  b.output_grads = {bf16(out, dy16)};
  b.input_grads = {bf16(in, dx16)};
  b.accumulate = {false};
  b.params = f.params;
  b.aux = f.aux;
  b.workspace = f.workspace;
  layer.Backward(b);
  EXPECT_EQ(saved, h.aux[0]);
  EXPECT_EQ(dparams, h.param_grads);
  for (size_t i = 0; i < y16.size(); ++i) {
    ASSERT_EQ(y16[i], FloatToBf16Bits(h.outputs[0][i])) << "output " << i;
  }
  for (size_t i = 0; i < dx16.size(); ++i) {
    ASSERT_EQ(dx16[i], FloatToBf16Bits(h.input_grads[0][i])) << "input gradient " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    WindowAttention, WindowAttentionBf16Test,
    ::testing::Values("{type: window_attention, heads: 2, window: 3, shift: 1}",
                      "{type: window_attention, heads: 2, window: 3, shift: 1, "
                      "cosine: true}"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      return std::string(info.index == 0 ? "dot_product" : "cosine");
    });

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

// Swin V2-T's first stage (64 x 64, windows of 8, 3 heads of 32) with cosine
// attention: logit_scale after the table, the same probabilities, and a
// backward workspace that adds each unit's norms and logit_scale sum.
TEST(WindowAttentionDeclarationTest, CosineAddsLogitScale) {
  LayerHarness h("{type: window_attention, heads: 3, window: 8, shift: 4, cosine: true}",
                 {Shape(2, 3 * 96, 64, 64)});
  const std::vector<ParamSpec> params = h.layer().params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "table");
  EXPECT_EQ(params[0].shape, Shape(225, 3, 1, 1));
  EXPECT_EQ(params[0].decay_mult, 0.0f);
  EXPECT_EQ(params[1].name, "logit_scale");
  EXPECT_EQ(params[1].shape, Shape(3, 1, 1, 1));
  EXPECT_EQ(params[1].init.kind, Initializer::Kind::kConstant);
  EXPECT_EQ(params[1].init.value, std::log(10.0f));
  EXPECT_TRUE(params[1].trainable);
  EXPECT_EQ(params[1].decay_mult, 0.0f);
  const std::vector<AuxSpec> aux = h.layer().aux();
  ASSERT_EQ(aux.size(), 1u);
  EXPECT_EQ(aux[0].shape, Shape(2, 64 * 3, 64, 64));
  EXPECT_EQ(h.layer().workspace_bytes(Pass::kForward),
            size_t{8} * (3 * 64 * 32 + 64) * sizeof(float));
  EXPECT_EQ(h.layer().workspace_bytes(Pass::kBackward),
            size_t{8} * (7 * 64 * 32 + 64 + 2 * 64 + 1 + 225) * sizeof(float));
  // cosine: false is the table alone.
  LayerHarness plain("{type: window_attention, heads: 3, window: 8, cosine: false}",
                     {Shape(2, 3 * 96, 64, 64)});
  ASSERT_EQ(plain.layer().params().size(), 1u);
  EXPECT_EQ(plain.layer().params()[0].name, "table");
}

Status BuildError(const std::string& layers) {
  const std::string yaml = "layers:\n  - {name: data, type: input, shape: [3, 6, 6]}\n" + layers +
                           "  - {name: gap, type: global_avg_pool}\n"
                           "  - {name: fc, type: fully_connected, outputs: 2}\n"
                           "  - {name: loss, type: softmax_loss}\n";
  return testing::BuildStatus(yaml, "swin.yaml");
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
      {18, "heads: 2, window: 3, cosine: maybe", "cosine: must be true or false (got 'maybe')"},
      {18, "heads: 2, window: 3, shift: 1, grid: true", "grid: true takes no shift (got shift: 1)"},
      {18, "heads: 2, window: 3, cosine: true, scale: 0.5",
       "scale: cosine attention takes no scale"},
      {18, "heads: 2, window: 3, scale: 0", "scale: must be"},
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
