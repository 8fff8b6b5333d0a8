// The sequence layers on the CPU - lstm, gru, embedding: gradients against
// finite differences, the image-order kernels against the GEMMs, slices of
// the batch against the whole batch bit for bit, recomputation, gradient
// accumulation and the errors of wrong shapes; initial states as an input
// and final states as an output, alone and in an encoder-decoder network.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "framework/base/random.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

using testing::CheckGradients;
using testing::CheckInputGradientAdds;
using testing::GradientCheckOptions;
using testing::LayerHarness;

struct SequenceCase {
  const char* name;
  const char* entry;
  Shape input;
};

const SequenceCase kCases[] = {
    {"lstm", "{type: lstm, hidden: 3}", Shape(2, 4, 1, 5)},
    {"lstm_no_bias", "{type: lstm, hidden: 2, bias: false}", Shape(2, 3, 1, 3)},
    {"lstm_deep_bidirectional", "{type: lstm, hidden: 3, layers: 2, bidirectional: true}",
     Shape(2, 3, 1, 4)},
    {"lstm_dropout", "{type: lstm, hidden: 3, layers: 3, dropout: 0.3}", Shape(3, 2, 1, 4)},
    {"gru", "{type: gru, hidden: 3}", Shape(2, 4, 1, 5)},
    {"gru_deep_bidirectional",
     "{type: gru, hidden: 3, layers: 2, bidirectional: true, dropout: 0.2}", Shape(2, 3, 1, 4)},
    {"one_step", "{type: lstm, hidden: 4, bidirectional: true}", Shape(3, 2, 1, 1)},
};

// Ids 0..vocabulary-1 spread over the positions, with one out of range.
void FillIds(LayerHarness& h, int vocabulary) {
  std::vector<float>& ids = h.inputs[0];
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 7 + 3) % vocabulary);
  ids[1] = static_cast<float>(vocabulary);  // outside the table: a zero vector, no gradient
}

void RandomGrads(LayerHarness& h, uint64_t seed) {
  for (auto& g : h.output_grads) {
    for (size_t j = 0; j < g.size(); ++j) g[j] = UniformAt(seed, j) - 0.5f;
  }
}

void ExpectBitIdentical(const std::vector<std::vector<float>>& a,
                        const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << " " << i;
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)))
        << what << " " << i;
  }
}

class SequenceLayerTest : public ::testing::TestWithParam<SequenceCase> {};

TEST_P(SequenceLayerTest, GradientsMatchFiniteDifferences) {
  for (bool ordered : {false, true}) {
    LayerHarness h(GetParam().entry, {GetParam().input});
    h.image_order = ordered;
    h.Randomize(11);
    EXPECT_EQ(CheckGradients(h), "") << (ordered ? "image order" : "GEMMs");
  }
}

// The row kernels compute what the GEMMs do, within rounding.
TEST_P(SequenceLayerTest, ImageOrderMatchesTheGemms) {
  LayerHarness gemm(GetParam().entry, {GetParam().input});
  LayerHarness ordered(GetParam().entry, {GetParam().input});
  ordered.image_order = true;
  for (LayerHarness* h : {&gemm, &ordered}) {
    h->Randomize(5);
    h->Forward();
    RandomGrads(*h, 9);
    h->Backward();
  }
  auto near = [](const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                 const char* what) {
    for (size_t i = 0; i < a.size(); ++i) {
      for (size_t j = 0; j < a[i].size(); ++j) {
        ASSERT_NEAR(a[i][j], b[i][j], 1e-5f * (1 + std::abs(a[i][j]))) << what << i << "," << j;
      }
    }
  };
  near(gemm.outputs, ordered.outputs, "output ");
  near(gemm.input_grads, ordered.input_grads, "input gradient ");
  near(gemm.param_grads, ordered.param_grads, "parameter gradient ");
}

// A step computed over slices of the batch (a streamed step) gives the bits
// of the whole batch computed image by image.
TEST_P(SequenceLayerTest, SlicesGiveTheBitsOfTheWholeBatch) {
  const Shape input = GetParam().input;
  const Shape batch(5, input.c(), input.h(), input.w());
  LayerHarness whole(GetParam().entry, {batch}), sliced(GetParam().entry, {batch});
  whole.image_order = true;
  sliced.slice_images = 2;
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Randomize(3);
    h->Forward();
    RandomGrads(*h, 4);
    for (size_t j = 0; j < h->input_grads[0].size(); ++j) h->input_grads[0][j] = 0.25f;
    h->Backward({true});
  }
  ExpectBitIdentical(whole.outputs, sliced.outputs, "outputs");
  ExpectBitIdentical(whole.aux, sliced.aux, "reserve");
  ExpectBitIdentical(whole.input_grads, sliced.input_grads, "input gradients");
  ExpectBitIdentical(whole.param_grads, sliced.param_grads, "parameter gradients");
}

// Recomputation rebuilds the output and the reserve bit for bit, reusing the
// dropout masks (a different seed must not matter).
TEST_P(SequenceLayerTest, RecomputationIsBitExact) {
  LayerHarness h(GetParam().entry, {GetParam().input});
  h.Randomize(8);
  h.Forward(Phase::kTrain, false, 5);
  const auto outputs = h.outputs, aux = h.aux, params = h.params;
  for (auto& o : h.outputs) std::fill(o.begin(), o.end(), NAN);
  h.Forward(Phase::kTrain, true, 6);
  ExpectBitIdentical(outputs, h.outputs, "outputs");
  ExpectBitIdentical(aux, h.aux, "reserve");
  ExpectBitIdentical(params, h.params, "parameters");
}

TEST_P(SequenceLayerTest, InputGradientAddsWhenAsked) {
  LayerHarness h(GetParam().entry, {GetParam().input});
  h.Randomize(4);
  h.Forward();
  RandomGrads(h, 17);
  EXPECT_EQ(CheckInputGradientAdds(h), "");
}

INSTANTIATE_TEST_SUITE_P(Sequences, SequenceLayerTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<SequenceCase>& info) {
                           return std::string(info.param.name);
                         });

// Dropout between layers acts in training only.
TEST(RecurrentTest, EvaluationDoesNotDrop) {
  LayerHarness dropped("{type: lstm, hidden: 3, layers: 2, dropout: 0.5}", {Shape(2, 3, 1, 4)});
  LayerHarness plain("{type: lstm, hidden: 3, layers: 2}", {Shape(2, 3, 1, 4)});
  dropped.Randomize(2);
  plain.Randomize(2);
  dropped.Forward(Phase::kEval);
  plain.Forward(Phase::kEval);
  ExpectBitIdentical(plain.outputs, dropped.outputs, "evaluation outputs");
  dropped.Forward(Phase::kTrain);
  plain.Forward(Phase::kTrain);
  EXPECT_NE(plain.outputs, dropped.outputs);
}

// One unit, one step, hand-computed: c = i g, h = o tanh(c).
TEST(RecurrentTest, LstmKnownValues) {
  LayerHarness h("{type: lstm, hidden: 1}", {Shape(1, 1, 1, 1)});
  h.inputs[0] = {2.0f};
  h.params[0] = {0.5f, -1.0f, 0.25f, 1.0f};  // weight_ih: i, f, g, o
  h.params[1] = {9, 9, 9, 9};                // weight_hh: unused at the first step
  h.params[2] = {0, 0, 0, 0};
  h.params[3] = {0.1f, 0.1f, 0.1f, 0.1f};
  h.Forward();
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double i = sigmoid(1.1), g = std::tanh(0.6), o = sigmoid(2.1);
  EXPECT_NEAR(h.outputs[0][0], o * std::tanh(i * g), 1e-6);
}

// One unit, two steps: n = tanh(x_n + r h_n), h = (1 - z) n + z h_prev.
TEST(RecurrentTest, GruKnownValues) {
  LayerHarness h("{type: gru, hidden: 1, bias: false}", {Shape(1, 1, 1, 2)});
  h.inputs[0] = {1.0f, -1.0f};
  h.params[0] = {0.5f, -0.5f, 1.0f};  // weight_ih: r, z, n
  h.params[1] = {0.3f, 0.2f, -0.7f};  // weight_hh
  h.Forward();
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double n1 = std::tanh(1.0), z1 = sigmoid(-0.5), h1 = (1 - z1) * n1;
  const double r2 = sigmoid(-0.5 + 0.3 * h1), z2 = sigmoid(0.5 + 0.2 * h1);
  const double n2 = std::tanh(-1.0 + r2 * (-0.7 * h1));
  EXPECT_NEAR(h.outputs[0][0], h1, 1e-6);
  EXPECT_NEAR(h.outputs[0][1], (1 - z2) * n2 + z2 * h1, 1e-6);
}

TEST(RecurrentTest, OutputHoldsBothDirectionsAlongTheChannels) {
  LayerHarness h("{type: gru, hidden: 2, bidirectional: true}", {Shape(1, 3, 1, 4)});
  EXPECT_EQ(h.output_shapes()[0], Shape(1, 4, 1, 4));
  // The reverse direction's last step sees only the last input: reversing
  // the sequence swaps what the two directions see.
  h.Randomize(1);
  h.Forward();
  const std::vector<float> y = h.outputs[0];
  LayerHarness r("{type: gru, hidden: 2, bidirectional: true}", {Shape(1, 3, 1, 4)});
  r.Randomize(1);
  for (int c = 0; c < 3; ++c) {
    for (int t = 0; t < 4; ++t) r.inputs[0][c * 4 + t] = h.inputs[0][c * 4 + 3 - t];
  }
  // Swap the directions' parameters.
  for (int p = 0; p < 4; ++p) std::swap(r.params[p], r.params[p + 4]);
  r.Forward();
  for (int u = 0; u < 2; ++u) {
    for (int t = 0; t < 4; ++t) {
      EXPECT_NEAR(r.outputs[0][(u + 2) * 4 + t], y[u * 4 + 3 - t], 1e-6) << u << "," << t;
      EXPECT_NEAR(r.outputs[0][u * 4 + t], y[(u + 2) * 4 + 3 - t], 1e-6) << u << "," << t;
    }
  }
}

TEST(RecurrentTest, WrongShapesAreErrors) {
  EXPECT_DEATH_IF_SUPPORTED(LayerHarness("{type: lstm, hidden: 2}", {Shape(1, 3, 2, 4)}),
                            "N x features x 1 x T");
  EXPECT_DEATH_IF_SUPPORTED(
      LayerHarness("{type: embedding, vocabulary: 4, size: 2}", {Shape(1, 2, 1, 4)}),
      "N x 1 x 1 x T");
}

// carry: true - a sequence of 2T steps cut into two batches of T, the
// second starting from the first's final states, gives the outputs of the
// uncut sequence's last T steps.
TEST(CarryTest, TwoBatchesContinueOneSequence) {
  for (const char* cell : {"lstm", "gru"}) {
    const std::string base = std::string("{type: ") + cell + ", hidden: 3, layers: 2";
    LayerHarness whole(base + "}", {Shape(2, 2, 1, 8)});
    LayerHarness cut(base + ", carry: true}", {Shape(2, 2, 1, 4)});
    whole.Randomize(3);
    cut.Randomize(3);  // the same weights: the state parameter comes after them
    ASSERT_EQ(cut.params.size(), whole.params.size() + 1);
    for (size_t p = 0; p < whole.params.size(); ++p) cut.params[p] = whole.params[p];
    std::fill(cut.params.back().begin(), cut.params.back().end(), 0.0f);
    whole.Forward();
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 2; ++i) {
        for (int c = 0; c < 2; ++c) {
          for (int t = 0; t < 4; ++t) {
            cut.inputs[0][(i * 2 + c) * 4 + t] = whole.inputs[0][(i * 2 + c) * 8 + half * 4 + t];
          }
        }
      }
      cut.Forward();
      for (int i = 0; i < 2; ++i) {
        for (int u = 0; u < 3; ++u) {
          for (int t = 0; t < 4; ++t) {
            EXPECT_NEAR(cut.outputs[0][(i * 3 + u) * 4 + t],
                        whole.outputs[0][(i * 3 + u) * 8 + half * 4 + t], 1e-5)
                << cell << " half " << half << " image " << i << " unit " << u << " step " << t;
          }
        }
      }
    }
  }
}

// The weight gradients of a batch that starts from carried states, against
// central differences with those states held fixed (no gradient reaches
// them: back-propagation is truncated at the batch).
TEST(CarryTest, GradientsWithCarriedStatesMatchFiniteDifferences) {
  for (const char* entry : {"{type: lstm, hidden: 2, carry: true, bidirectional: true}",
                            "{type: gru, hidden: 2, carry: true, layers: 2}"}) {
    LayerHarness h(entry, {Shape(2, 2, 1, 3)});
    h.Randomize(5);
    std::vector<float>& state = h.params.back();
    const size_t width = state.size() / 2 - 1;  // two images; the last float is the phase
    for (size_t i = 0; i < 2; ++i) {
      for (size_t e = 0; e < width; ++e)
        state[i * (width + 1) + e] = 0.4f * UniformAt(9, e + i * 7) - 0.2f;
      state[i * (width + 1) + width] = 1.0f;  // written in training
    }
    const std::vector<float> carried = state;
    RandomGrads(h, 2);
    auto objective = [&]() {
      state = carried;
      h.Forward();
      double sum = 0;
      for (size_t j = 0; j < h.outputs[0].size(); ++j)
        sum += h.outputs[0][j] * h.output_grads[0][j];
      return sum;
    };
    objective();
    h.Backward();
    for (size_t p = 0; p + 1 < h.params.size(); ++p) {
      for (size_t e = 0; e < h.params[p].size(); ++e) {
        const float original = h.params[p][e];
        const float step = 1e-2f;
        h.params[p][e] = original + step;
        const double up = objective();
        h.params[p][e] = original - step;
        const double down = objective();
        h.params[p][e] = original;
        const double numeric = (up - down) / (2 * step);
        EXPECT_NEAR(h.param_grads[p][e], numeric, 2e-3 * (1 + std::abs(numeric)))
            << entry << " param " << p << "[" << e << "]";
      }
    }
  }
}

// Slices carry each image's own states: two batches over slices give the
// bits of two batches whole, states included; a recomputation leaves the
// states alone.
TEST(CarryTest, SlicesAndRecomputationKeepTheStates) {
  const std::string entry = "{type: lstm, hidden: 3, layers: 2, bidirectional: true, carry: true}";
  LayerHarness whole(entry, {Shape(5, 2, 1, 4)}), sliced(entry, {Shape(5, 2, 1, 4)});
  whole.image_order = true;
  sliced.slice_images = 2;
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Randomize(3);
    std::fill(h->params.back().begin(), h->params.back().end(), 0.0f);
    for (int batch = 0; batch < 2; ++batch) {
      for (size_t j = 0; j < h->inputs[0].size(); ++j) {
        h->inputs[0][j] = UniformAt(40 + batch, j) - 0.5f;
      }
      h->Forward();
      RandomGrads(*h, 4 + batch);
      h->Backward();
    }
  }
  ExpectBitIdentical(whole.outputs, sliced.outputs, "outputs");
  ExpectBitIdentical(whole.params, sliced.params, "parameters and states");
  ExpectBitIdentical(whole.aux, sliced.aux, "reserve and initial states");
  ExpectBitIdentical(whole.param_grads, sliced.param_grads, "parameter gradients");
  const auto params = whole.params, aux = whole.aux, outputs = whole.outputs;
  whole.Forward(Phase::kTrain, /*recompute=*/true, 99);
  ExpectBitIdentical(outputs, whole.outputs, "recomputed outputs");
  ExpectBitIdentical(params, whole.params, "states after a recomputation");
  ExpectBitIdentical(aux, whole.aux, "recomputed reserve");
}

// Evaluation after training (and training after evaluation) starts from
// zero states: the phases do not leak into each other.
TEST(CarryTest, APhaseChangeStartsFromZeroStates) {
  LayerHarness carried("{type: gru, hidden: 3, carry: true}", {Shape(2, 2, 1, 4)});
  LayerHarness fresh("{type: gru, hidden: 3}", {Shape(2, 2, 1, 4)});
  carried.Randomize(6);
  fresh.Randomize(6);
  for (size_t p = 0; p < fresh.params.size(); ++p) carried.params[p] = fresh.params[p];
  std::fill(carried.params.back().begin(), carried.params.back().end(), 0.0f);
  carried.Forward(Phase::kTrain);
  carried.Forward(Phase::kEval);
  fresh.Forward(Phase::kEval);
  ExpectBitIdentical(fresh.outputs, carried.outputs, "the first evaluation batch");
  carried.Forward(Phase::kEval);  // the second continues the first
  EXPECT_NE(fresh.outputs, carried.outputs);
}

// ---- Initial states as an input (initial: input), final states as an
// output (final: true) ----

struct StatesCase {
  const char* name;
  const char* entry;
  Shape input;
  int64_t states;  // floats per image of the initial states; 0: no such input
};

const StatesCase kStatesCases[] = {
    {"lstm_deep_bidirectional",
     "{type: lstm, hidden: 3, layers: 2, bidirectional: true, initial: input, final: true}",
     Shape(2, 3, 1, 4), 24},
    {"gru_deep_bidirectional",
     "{type: gru, hidden: 3, layers: 2, bidirectional: true, initial: input, final: true}",
     Shape(2, 3, 1, 4), 12},
    {"lstm_dropout_initial", "{type: lstm, hidden: 2, layers: 2, dropout: 0.3, initial: input}",
     Shape(2, 3, 1, 3), 8},
    {"gru_final", "{type: gru, hidden: 3, bidirectional: true, final: true}", Shape(2, 2, 1, 3), 0},
    {"lstm_one_step", "{type: lstm, hidden: 2, bidirectional: true, initial: input, final: true}",
     Shape(3, 2, 1, 1), 8},
};

void PrintTo(const StatesCase& c, std::ostream* os) { *os << c.name; }

class StatesTest : public ::testing::TestWithParam<StatesCase> {
 protected:
  // The case's layer for a batch of n (0: the case's batch).
  LayerHarness Make(int64_t n = 0) const {
    const StatesCase& c = GetParam();
    if (n == 0) n = c.input.n();
    std::vector<Shape> shapes = {Shape(n, c.input.c(), 1, c.input.w())};
    if (c.states > 0) shapes.push_back(Shape(n, c.states, 1, 1));
    return LayerHarness(c.entry, shapes);
  }
};

// L = sum(y * r) over both outputs: the gradients of h0 (and c0), of the
// sequence and of the weights.
TEST_P(StatesTest, GradientsMatchFiniteDifferences) {
  for (bool ordered : {false, true}) {
    LayerHarness h = Make();
    h.image_order = ordered;
    h.Randomize(11);
    EXPECT_EQ(CheckGradients(h), "") << (ordered ? "image order" : "GEMMs");
  }
}

// A loss on the final states alone (nothing reads the sequence output):
// every gradient comes back through the recurrence from the last steps.
TEST_P(StatesTest, FinalStatesAloneMatchFiniteDifferences) {
  LayerHarness h = Make();
  if (h.outputs.size() < 2) GTEST_SKIP() << "no final states";
  h.Randomize(12);
  std::vector<float> r(h.outputs[1].size());
  for (size_t j = 0; j < r.size(); ++j) r[j] = UniformAt(77, j) - 0.5f;
  auto objective = [&]() {
    h.Forward();
    double sum = 0;
    for (size_t j = 0; j < r.size(); ++j) sum += static_cast<double>(h.outputs[1][j]) * r[j];
    return sum;
  };
  objective();
  std::fill(h.output_grads[0].begin(), h.output_grads[0].end(), 0.0f);
  h.output_grads[1] = r;
  h.Backward();
  const auto input_grads = h.input_grads, param_grads = h.param_grads;
  auto check = [&](const char* what, size_t k, std::vector<float>& values,
                   const std::vector<float>& analytic) {
    for (size_t e = 0; e < values.size(); ++e) {
      const float original = values[e], step = 1e-3f;
      values[e] = original + step;
      const double up = objective();
      values[e] = original - step;
      const double down = objective();
      values[e] = original;
      const double numeric = (up - down) / (2 * step);
      EXPECT_NEAR(analytic[e], numeric, 1e-2 * std::max(1.0, std::abs(numeric)))
          << what << " " << k << "[" << e << "]";
    }
  };
  for (size_t k = 0; k < h.inputs.size(); ++k) check("input", k, h.inputs[k], input_grads[k]);
  for (size_t k = 0; k < h.params.size(); ++k) check("param", k, h.params[k], param_grads[k]);
}

TEST_P(StatesTest, SlicesGiveTheBitsOfTheWholeBatch) {
  LayerHarness whole = Make(5), sliced = Make(5);
  whole.image_order = true;
  sliced.slice_images = 2;
  for (LayerHarness* h : {&whole, &sliced}) {
    h->Randomize(3);
    h->Forward();
    RandomGrads(*h, 4);
    for (auto& g : h->input_grads) std::fill(g.begin(), g.end(), 0.25f);
    h->Backward(std::vector<bool>(h->inputs.size(), true));
  }
  ExpectBitIdentical(whole.outputs, sliced.outputs, "outputs");
  ExpectBitIdentical(whole.aux, sliced.aux, "reserve");
  ExpectBitIdentical(whole.input_grads, sliced.input_grads, "input gradients");
  ExpectBitIdentical(whole.param_grads, sliced.param_grads, "parameter gradients");
}

TEST_P(StatesTest, RecomputationIsBitExact) {
  LayerHarness h = Make();
  h.Randomize(8);
  h.Forward(Phase::kTrain, false, 5);
  const auto outputs = h.outputs, aux = h.aux;
  for (auto& o : h.outputs) std::fill(o.begin(), o.end(), NAN);
  h.Forward(Phase::kTrain, true, 6);
  ExpectBitIdentical(outputs, h.outputs, "outputs");
  ExpectBitIdentical(aux, h.aux, "reserve");
}

// The initial states' gradient adds when asked, independently of the
// sequence's.
TEST_P(StatesTest, InitialStatesGradientAddsWhenAsked) {
  LayerHarness h = Make();
  if (h.inputs.size() < 2) GTEST_SKIP() << "no initial states";
  h.Randomize(4);
  h.Forward();
  RandomGrads(h, 17);
  h.Backward();
  const auto fresh = h.input_grads;
  std::vector<float> base(fresh[1].size());
  for (size_t j = 0; j < base.size(); ++j) base[j] = static_cast<float>(j % 7) - 3;
  std::fill(h.input_grads[0].begin(), h.input_grads[0].end(), NAN);
  h.input_grads[1] = base;
  h.Backward({false, true});
  ExpectBitIdentical({fresh[0]}, {h.input_grads[0]}, "overwritten sequence gradient");
  for (size_t j = 0; j < base.size(); ++j) {
    ASSERT_NEAR(h.input_grads[1][j], base[j] + fresh[1][j], 1e-5) << j;
  }
}

INSTANTIATE_TEST_SUITE_P(States, StatesTest, ::testing::ValuesIn(kStatesCases),
                         [](const ::testing::TestParamInfo<StatesCase>& info) {
                           return std::string(info.param.name);
                         });

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// One unit, one step from given states: c = f c0 + i g, h = o tanh(c); the
// final states are (h, c).
TEST(StatesValuesTest, LstmFromGivenStates) {
  LayerHarness h("{type: lstm, hidden: 1, initial: input, final: true}",
                 {Shape(1, 1, 1, 1), Shape(1, 2, 1, 1)});
  h.inputs[0] = {2.0f};
  h.inputs[1] = {0.5f, -0.3f};               // h0, c0
  h.params[0] = {0.5f, -1.0f, 0.25f, 1.0f};  // weight_ih: i, f, g, o
  h.params[1] = {0.2f, 0.4f, -0.6f, 0.8f};   // weight_hh
  h.params[2] = {0, 0, 0, 0};                // bias_ih
  h.params[3] = {0.1f, 0.1f, 0.1f, 0.1f};    // bias_hh
  h.Forward();
  const double i = Sigmoid(1.0 + 0.1 + 0.1), f = Sigmoid(-2.0 + 0.2 + 0.1);
  const double g = std::tanh(0.5 - 0.3 + 0.1), o = Sigmoid(2.0 + 0.4 + 0.1);
  const double c = f * -0.3 + i * g, out = o * std::tanh(c);
  EXPECT_NEAR(h.outputs[0][0], out, 1e-6);
  EXPECT_NEAR(h.outputs[1][0], out, 1e-6);
  EXPECT_NEAR(h.outputs[1][1], c, 1e-6);
}

// One unit, one step from a given state: h = (1 - z) n + z h0.
TEST(StatesValuesTest, GruFromAGivenState) {
  LayerHarness h("{type: gru, hidden: 1, bias: false, initial: input, final: true}",
                 {Shape(1, 1, 1, 1), Shape(1, 1, 1, 1)});
  h.inputs[0] = {1.0f};
  h.inputs[1] = {0.4f};
  h.params[0] = {0.5f, -0.5f, 1.0f};  // weight_ih: r, z, n
  h.params[1] = {0.3f, 0.2f, -0.7f};  // weight_hh
  h.Forward();
  const double r = Sigmoid(0.5 + 0.3 * 0.4), z = Sigmoid(-0.5 + 0.2 * 0.4);
  const double n = std::tanh(1.0 + r * (-0.7 * 0.4)), out = (1 - z) * n + z * 0.4;
  EXPECT_NEAR(h.outputs[0][0], out, 1e-6);
  EXPECT_NEAR(h.outputs[1][0], out, 1e-6);
}

// The final states are the top layer's last step forward and its first step
// in reverse (PyTorch's h_n), and exactly what carry: true keeps for the
// next batch.
TEST(StatesValuesTest, FinalStatesAreTheLastStepsInTheCarriedLayout) {
  const std::string base = "{type: lstm, hidden: 3, layers: 2, bidirectional: true";
  LayerHarness h(base + ", final: true}", {Shape(2, 3, 1, 4)});
  LayerHarness carried(base + ", carry: true}", {Shape(2, 3, 1, 4)});
  h.Randomize(5);
  carried.Randomize(5);
  for (size_t p = 0; p < h.params.size(); ++p) carried.params[p] = h.params[p];
  std::fill(carried.params.back().begin(), carried.params.back().end(), 0.0f);
  h.Forward();
  carried.Forward();
  ASSERT_EQ(h.output_shapes()[1], Shape(2, 24, 1, 1));
  const int64_t states = 24, width = 6, steps = 4, hidden = 3;
  for (int64_t i = 0; i < 2; ++i) {
    const float* final_states = h.outputs[1].data() + i * states;
    const float* y = h.outputs[0].data() + i * width * steps;
    for (int64_t u = 0; u < hidden; ++u) {
      EXPECT_EQ(final_states[2 * hidden + u], y[u * steps + steps - 1]) << "forward " << u;
      EXPECT_EQ(final_states[3 * hidden + u], y[(hidden + u) * steps]) << "reverse " << u;
    }
    for (int64_t e = 0; e < states; ++e) {
      EXPECT_EQ(final_states[e], carried.params.back()[i * (states + 1) + e]) << i << "," << e;
    }
  }
}

// PyTorch's `y1, (h, c) = rnn(x[:T]); y2, _ = rnn(x[T:], (h, c))`: the
// second half started from the first half's final states gives the outputs
// of the whole sequence's last T steps.
TEST(StatesValuesTest, InitialStatesContinueASequence) {
  for (const char* cell : {"lstm", "gru"}) {
    const std::string base = std::string("{type: ") + cell + ", hidden: 3, layers: 2";
    LayerHarness whole(base + "}", {Shape(2, 2, 1, 8)});
    LayerHarness first(base + ", final: true}", {Shape(2, 2, 1, 4)});
    const Shape states = first.output_shapes()[1];
    LayerHarness second(base + ", initial: input}", {Shape(2, 2, 1, 4), states});
    whole.Randomize(3);
    first.params = whole.params;
    second.params = whole.params;
    for (int i = 0; i < 2; ++i) {
      for (int c = 0; c < 2; ++c) {
        for (int t = 0; t < 4; ++t) {
          first.inputs[0][(i * 2 + c) * 4 + t] = whole.inputs[0][(i * 2 + c) * 8 + t];
          second.inputs[0][(i * 2 + c) * 4 + t] = whole.inputs[0][(i * 2 + c) * 8 + 4 + t];
        }
      }
    }
    whole.Forward();
    first.Forward();
    second.inputs[1] = first.outputs[1];
    second.Forward();
    for (int i = 0; i < 2; ++i) {
      for (int u = 0; u < 3; ++u) {
        for (int t = 0; t < 4; ++t) {
          EXPECT_NEAR(second.outputs[0][(i * 3 + u) * 4 + t],
                      whole.outputs[0][(i * 3 + u) * 8 + 4 + t], 1e-5)
              << cell << " image " << i << " unit " << u << " step " << t;
        }
      }
    }
  }
}

// Zero initial states given as an input compute what the default does.
TEST(StatesValuesTest, ZeroInitialStatesGiveTheDefault) {
  for (const char* cell : {"lstm", "gru"}) {
    const std::string base =
        std::string("{type: ") + cell + ", hidden: 3, layers: 2, bidirectional: true";
    LayerHarness plain(base + "}", {Shape(2, 3, 1, 4)});
    const int64_t states = (std::string(cell) == "lstm" ? 2 : 1) * 2 * 2 * 3;
    LayerHarness given(base + ", initial: input}", {Shape(2, 3, 1, 4), Shape(2, states, 1, 1)});
    plain.Randomize(9);
    given.Randomize(9);
    std::fill(given.inputs[1].begin(), given.inputs[1].end(), 0.0f);
    plain.Forward();
    given.Forward();
    ExpectBitIdentical(plain.outputs, given.outputs, std::string(cell) + " outputs");
  }
}

TEST(StatesValuesTest, ErrorsNameTheKeysAndTheExpectedShape) {
  EXPECT_DEATH_IF_SUPPORTED(LayerHarness("{type: lstm, hidden: 2, carry: true, initial: input}",
                                         {Shape(2, 3, 1, 4), Shape(2, 4, 1, 1)}),
                            "initial: input cannot go with carry: true");
  EXPECT_DEATH_IF_SUPPORTED(
      LayerHarness("{type: lstm, hidden: 3, layers: 2, bidirectional: true, initial: input}",
                   {Shape(2, 3, 1, 4), Shape(2, 12, 1, 1)}),
      "expected 2x24x1x1, got 2x12x1x1");
  EXPECT_DEATH_IF_SUPPORTED(
      LayerHarness("{type: gru, hidden: 2, initial: input}", {Shape(2, 3, 1, 4)}),
      "expected 2x2x1x1, got no second input");
  EXPECT_DEATH_IF_SUPPORTED(
      LayerHarness("{type: gru, hidden: 2, initial: carried}", {Shape(2, 3, 1, 4)}),
      "initial: must be one of: zeros, input");
}

// ---- An encoder-decoder network (seq2seq) ----

// The encoder's final states are the decoder's initial states; nothing reads
// the encoder's sequence output. The decoder reads the ids again through its
// own embedding, and a classifier scores every position.
constexpr char kEncoderDecoder[] = R"(
params: {cell: lstm}
layers:
  - {name: data, type: input, shape: [1, 1, 6], labels: pixels}
  - {name: enc_embed, type: embedding, vocabulary: 7, size: 4}
  - {name: enc, type: $cell, hidden: 5, layers: 2, final: true}
  - {name: dec_input, type: embedding, inputs: [data], vocabulary: 7, size: 4}
  - {name: dec, type: $cell, inputs: [dec_input, enc:1], hidden: 5, layers: 2, initial: input}
  - {name: scores, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss}
)";

TEST(EncoderDecoderTest, TrainsThroughTheFinalStates) {
  for (const char* cell : {"lstm", "gru"}) {
    const NetSpec spec = testing::MustParse(kEncoderDecoder, {{"cell", YAML::Node(cell)}});
    testing::SyntheticRun run;
    run.batch = 3;
    run.steps = 12;
    run.learning_rate = 0.1f;
    run.same_batch = true;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    const std::vector<double>& losses = trace->losses;
    EXPECT_LT(losses.back(), 0.25 * losses.front()) << cell;
    // The encoder learns only through the states it hands on: its
    // embedding's gradient is not zero.
    const std::vector<float>& encoder_table = trace->grads[0];
    EXPECT_TRUE(std::any_of(encoder_table.begin(), encoder_table.end(), [](float g) {
      return g != 0;
    })) << cell;
  }
}

// Slices of the batch (memory.chunk) and offloading move the states input
// and output like any tensor: the losses and parameters of the whole batch,
// bit for bit.
TEST(EncoderDecoderTest, SlicesAndOffloadTrainBitIdentically) {
  const NetSpec spec = testing::MustParse(kEncoderDecoder);
  auto run = [&](const std::string& mode, int64_t chunk) {
    testing::SyntheticRun r = testing::SmallMemoryRun(mode);
    r.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
    SPILL_CHECK(r.memory.settings.Set("min_offload", "0").ok());  // offload these small maps
    r.memory.batch_chunk = chunk;
    auto trace = testing::TrainSynthetic(spec, r);
    SPILL_CHECK(trace.ok()) << mode << ": " << trace.status().ToString();
    return *trace;
  };
  const testing::TrainTrace baseline = run("baseline", kBatchChunkOff);
  for (const auto& [mode, chunk] : {std::pair<std::string, int64_t>{"baseline", 1},
                                    {"baseline", 2},
                                    {"offload", kBatchChunkOff}}) {
    const testing::TrainTrace trace = run(mode, chunk);
    const std::string what = mode + " chunk " + std::to_string(chunk);
    ASSERT_EQ(baseline.losses.size(), trace.losses.size()) << what;
    for (size_t s = 0; s < trace.losses.size(); ++s) {
      EXPECT_EQ(0, std::memcmp(&baseline.losses[s], &trace.losses[s], sizeof(double)))
          << what << " step " << s;
    }
    ExpectBitIdentical(baseline.params, trace.params, what + " parameters");
  }
}

TEST(EncoderDecoderTest, WiringErrorsAreNamed) {
  auto build = [](const std::string& yaml) {
    auto net = Net::Build(testing::MustParse(yaml), {2, DeviceType::kCpu});
    return net.ok() ? std::string() : net.status().ToString();
  };
  const std::string head = R"(
layers:
  - {name: data, type: input, shape: [1, 1, 6], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 7, size: 4}
)";
  const std::string tail = R"(
  - {name: scores, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss}
)";
  // The encoder has no final states to hand on.
  EXPECT_NE(build(head + R"(
  - {name: enc, type: lstm, hidden: 5}
  - {name: dec, type: lstm, inputs: [embed, enc:1], hidden: 5, initial: input})" +
                  tail)
                .find("reads 'enc:1' but 'enc' has 1 output"),
            std::string::npos);
  // The decoder takes no initial states.
  EXPECT_NE(build(head + R"(
  - {name: enc, type: lstm, hidden: 5, final: true}
  - {name: dec, type: lstm, inputs: [embed, enc:1], hidden: 5})" +
                  tail)
                .find("takes 1 input, got 2"),
            std::string::npos);
  // The decoder's states are not the encoder's: 2 x (2 * 1 * 1 * 4).
  EXPECT_NE(build(head + R"(
  - {name: enc, type: lstm, hidden: 5, final: true}
  - {name: dec, type: lstm, inputs: [embed, enc:1], hidden: 4, initial: input})" +
                  tail)
                .find("expected 2x8x1x1, got 2x10x1x1"),
            std::string::npos);
}

TEST(EmbeddingTest, GathersRowsAndScattersGradients) {
  LayerHarness h("{type: embedding, vocabulary: 3, size: 2}", {Shape(1, 1, 1, 4)});
  h.inputs[0] = {2, 0, 2, 7};
  h.params[0] = {1, 2, 3, 4, 5, 6};
  h.Forward();
  // N x size x 1 x T: the first component of each position's row, then the second.
  EXPECT_EQ(h.outputs[0], (std::vector<float>{5, 1, 5, 0, 6, 2, 6, 0}));
  h.output_grads[0] = {1, 2, 3, 4, 10, 20, 30, 40};
  h.Backward();
  EXPECT_EQ(h.param_grads[0], (std::vector<float>{2, 20, 0, 0, 4, 40}));
}

TEST(EmbeddingTest, GradientMatchesFiniteDifferencesAndSlices) {
  LayerHarness h("{type: embedding, vocabulary: 5, size: 3}", {Shape(3, 1, 1, 4)});
  h.Randomize(2);
  FillIds(h, 5);
  GradientCheckOptions options;
  options.skip_inputs = {0};
  EXPECT_EQ(CheckGradients(h, options), "");

  LayerHarness whole("{type: embedding, vocabulary: 5, size: 3}", {Shape(5, 1, 1, 4)});
  LayerHarness sliced("{type: embedding, vocabulary: 5, size: 3}", {Shape(5, 1, 1, 4)});
  sliced.slice_images = 2;
  for (LayerHarness* l : {&whole, &sliced}) {
    l->Randomize(6);
    FillIds(*l, 5);
    l->Forward();
    RandomGrads(*l, 8);
    l->Backward();
  }
  ExpectBitIdentical(whole.outputs, sliced.outputs, "outputs");
  ExpectBitIdentical(whole.param_grads, sliced.param_grads, "table gradient");
}

}  // namespace
}  // namespace spill
