// Blocked and channels-last layouts (framework/device/tensor.h,
// framework/graph/layouts.h): which tensors a network keeps out of plain, and
// that every layer that takes them computes what it computes on plain ones - exactly where the
// arithmetic is the same (copies, maxima, sums in the same order: every convolution algorithm but
// oneDNN's computes on plain copies), within float rounding where only the order of a sum differs
// (batch norm's reductions, oneDNN) - and that a network trains the same in either layout.
#include "framework/graph/layouts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <set>

#include "framework/graph/net.h"
#include "layers/cpu/conv_layouts.h"
#include "memory/workspace_selector.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tools/common/net_options.h"

namespace spill {
namespace {

constexpr Layout kPlain = Layout::kPlain, kBlocked = Layout::kBlocked16,
                 kChannelsLast = Layout::kChannelsLast;

LayoutNode Node(LayoutRule rule, std::vector<int> inputs, std::vector<int> outputs,
                Layout prefers = kBlocked) {
  return {rule, std::move(inputs), std::move(outputs), prefers};
}

// data -> conv -> bn -> relu -> conv -> global pool -> fc
TEST(ChooseLayoutsTest, ActivationsStayBlockedBetweenConvolutions) {
  const std::vector<Shape> shapes = {{2, 3, 8, 8},  {2, 16, 8, 8}, {2, 16, 8, 8}, {2, 16, 8, 8},
                                     {2, 32, 4, 4}, {2, 32, 1, 1}, {2, 10, 1, 1}};
  const std::vector<LayoutNode> layers = {
      Node(LayoutRule::kPlain, {}, {0}), Node(LayoutRule::kFree, {0}, {1}),
      Node(LayoutRule::kTied, {1}, {2}), Node(LayoutRule::kTied, {2}, {3}),
      Node(LayoutRule::kFree, {3}, {4}), Node(LayoutRule::kTied, {4}, {5}),
      Node(LayoutRule::kPlain, {5}, {6})};
  EXPECT_EQ(ChooseLayouts(shapes, layers),
            (std::vector<Layout>{kPlain, kBlocked, kBlocked, kBlocked, kBlocked, kPlain, kPlain}));
}

// A layer that computes only on plain tensors keeps every tensor tied to
// its input plain, back to the convolution that converts.
TEST(ChooseLayoutsTest, APlainConsumerKeepsItsGroupPlain) {
  const std::vector<Shape> shapes(4, Shape(2, 16, 8, 8));
  const std::vector<LayoutNode> layers = {
      Node(LayoutRule::kFree, {}, {0}), Node(LayoutRule::kTied, {0}, {1}),
      Node(LayoutRule::kFree, {1}, {2}), Node(LayoutRule::kPlain, {1}, {3})};
  EXPECT_EQ(ChooseLayouts(shapes, layers), (std::vector<Layout>{kPlain, kPlain, kBlocked, kPlain}));
}

// Blocked tensors carry no padding: a group with a tensor whose channels do
// not fill whole blocks stays plain, even where the others' would.
TEST(ChooseLayoutsTest, ChannelsOutsideWholeBlocksKeepTheGroupPlain) {
  const std::vector<Shape> shapes = {{2, 16, 4, 4}, {2, 8, 4, 4}, {2, 24, 4, 4}, {2, 16, 4, 4}};
  const std::vector<LayoutNode> layers = {
      Node(LayoutRule::kFree, {}, {0}), Node(LayoutRule::kFree, {}, {1}),
      Node(LayoutRule::kTied, {0, 1}, {2}), Node(LayoutRule::kFree, {2}, {3})};
  EXPECT_EQ(ChooseLayouts(shapes, layers), (std::vector<Layout>{kPlain, kPlain, kPlain, kBlocked}));
}

// 1x1 planes are the same bytes in both layouts: always labelled plain, and
// a plain consumer of one does not force its group plain.
TEST(ChooseLayoutsTest, OneByOnePlanesArePlainAndForceNothing) {
  const std::vector<Shape> shapes = {{2, 16, 4, 4}, {2, 16, 1, 1}, {2, 5, 1, 1}};
  const std::vector<LayoutNode> layers = {Node(LayoutRule::kFree, {}, {0}),
                                          Node(LayoutRule::kTied, {0}, {1}),
                                          Node(LayoutRule::kPlain, {1}, {2})};
  EXPECT_EQ(ChooseLayouts(shapes, layers), (std::vector<Layout>{kBlocked, kPlain, kPlain}));
}

// Each group takes the layout the convolutions around it compute in; where
// two of them disagree it stays plain.
TEST(ChooseLayoutsTest, AGroupTakesTheLayoutItsConvolutionsPrefer) {
  const std::vector<Shape> shapes(5, Shape(2, 16, 8, 8));
  // conv(nhwc) -> relu -> conv(nhwc) -> conv(blocked); conv(nhwc) -> [4]
  const std::vector<LayoutNode> layers = {
      Node(LayoutRule::kFree, {}, {0}, kChannelsLast), Node(LayoutRule::kTied, {0}, {1}),
      Node(LayoutRule::kFree, {1}, {2}, kChannelsLast), Node(LayoutRule::kFree, {2}, {3}, kBlocked),
      Node(LayoutRule::kFree, {3}, {4}, kChannelsLast)};
  EXPECT_EQ(ChooseLayouts(shapes, layers),
            (std::vector<Layout>{kChannelsLast, kChannelsLast, kPlain, kPlain, kChannelsLast}));
}

class BlockedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::BlockedLayoutsPay())
      GTEST_SKIP() << "this CPU computes convolutions in plain layouts";
  }
};

// The network's tensors: activations and their gradients blocked from the
// first convolution's output to the global pooling's input; the data, the
// pooled features and the scores plain; everything plain when blocked
// layouts are off. The plan's bytes are the plain bytes.
TEST_F(BlockedTest, NetworkKeepsActivationsBlockedBetweenConvolutions) {
  const NetSpec spec = testing::MustParse(testing::kBlocked);
  for (bool blocked : {true, false}) {
    auto net = Net::Build(spec, {3, DeviceType::kCpu, blocked});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    const Schedule& s = (*net)->schedule();
    int blocked_tensors = 0;
    for (const TensorInfo& t : s.tensors) {
      EXPECT_EQ(t.bytes, t.shape.bytes()) << t.name;
      const bool activation =
          t.kind == TensorKind::kActivation || t.kind == TensorKind::kActivationGrad;
      const bool between = activation && t.layer > 0 && t.shape.h() * t.shape.w() > 1;
      EXPECT_EQ(t.layout, blocked && between ? kBlocked : kPlain) << t.name;
      blocked_tensors += t.layout == kBlocked;
    }
    EXPECT_EQ(blocked_tensors > 0, blocked);
  }
}

// A pinned channels-last layout takes the blocked one's place, tensor for
// tensor.
TEST_F(BlockedTest, APinnedLayoutTakesEveryPlaceTheFastestWould) {
  const NetSpec spec = testing::MustParse(testing::kBlocked);
  NetOptions options{3, DeviceType::kCpu, true};
  auto fastest = Net::Build(spec, options);
  options.layout = kChannelsLast;
  auto pinned = Net::Build(spec, options);
  ASSERT_TRUE(fastest.ok() && pinned.ok());
  const std::vector<TensorInfo>& a = (*fastest)->schedule().tensors;
  const std::vector<TensorInfo>& b = (*pinned)->schedule().tensors;
  ASSERT_EQ(a.size(), b.size());
  int moved = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(b[t].layout, a[t].layout == kPlain ? kPlain : kChannelsLast) << a[t].name;
    EXPECT_EQ(b[t].bytes, a[t].bytes) << a[t].name;
    moved += b[t].layout == kChannelsLast;
  }
  EXPECT_GT(moved, 0);
}

// Unpinned, the layout follows the convolutions' preference: bfloat16
// activations lie channels-last where the processor has AMX tiles (oneDNN's
// bfloat16 kernels compute in it), blocked elsewhere and in float32; a
// pinned layout overrides it in every precision.
TEST_F(BlockedTest, BfloatActivationsLieChannelsLastOnAmx) {
  const NetSpec spec = testing::MustParse(testing::kBlocked);
  const auto layouts = [&](Precision precision, std::optional<Layout> pin) {
    NetOptions options{3, DeviceType::kCpu, true};
    options.precision = precision;
    options.layout = pin;
    auto net = Net::Build(spec, options);
    EXPECT_TRUE(net.ok()) << net.status().ToString();
    std::set<Layout> left_plain;
    for (const TensorInfo& t : (*net)->schedule().tensors) {
      if (t.layout != kPlain) left_plain.insert(t.layout);
    }
    return left_plain;
  };
  const Layout bf16 = cpu::Bf16Tiles() ? kChannelsLast : kBlocked;
  EXPECT_EQ(layouts(Precision::kFp32, std::nullopt), std::set<Layout>{kBlocked});
  EXPECT_EQ(layouts(Precision::kFp16, std::nullopt), std::set<Layout>{kBlocked});
  EXPECT_EQ(layouts(Precision::kBf16, std::nullopt), std::set<Layout>{bf16});
  EXPECT_EQ(layouts(Precision::kBf16, kBlocked), std::set<Layout>{kBlocked});
  EXPECT_EQ(layouts(Precision::kFp32, kChannelsLast), std::set<Layout>{kChannelsLast});
}

// Blocked layouts serve the algorithms that compute on them: a pinned
// algorithm that computes on plain tensors would only convert every blocked
// tensor to a whole-batch plain copy and back, so the programs then build
// the network plain (tools/common/net_options.h), as they do when the
// policy asks for the least memory.
TEST_F(BlockedTest, APinnedPlainAlgorithmKeepsEveryLayoutPlain) {
  const NetSpec spec = testing::MustParse(testing::kBlocked);
  auto blocked_tensors = [&](const char* workspace) {
    auto net =
        Net::Build(spec, NetOptionsFor(3, DeviceType::kCpu, *ParseWorkspacePolicy(workspace)));
    SPILL_CHECK(net.ok()) << net.status().ToString();
    int blocked = 0;
    for (const TensorInfo& t : (*net)->schedule().tensors) blocked += t.layout == kBlocked;
    return blocked;
  };
  EXPECT_EQ(blocked_tensors("pin:im2col_image"), 0);
  EXPECT_EQ(blocked_tensors("pin:direct"), 0);
  EXPECT_GT(blocked_tensors("pin:dnnl"), 0);
  EXPECT_GT(blocked_tensors("dynamic"), 0);
  EXPECT_EQ(blocked_tensors("memory_optimal"), 0);  // the least memory: no plain copies
  // Layouts are the CPU's: a CUDA network's options are left as they are.
  EXPECT_TRUE(NetOptionsFor(3, DeviceType::kCuda, *ParseWorkspacePolicy("pin:im2col_image"))
                  .blocked_layouts);
}

// One layer, the same inputs, in both layouts: outputs, input and parameter
// gradients (overwritten and accumulated) agree.
struct LayerCase {
  const char* name;
  const char* entry;
  std::vector<Shape> inputs;
  double tolerance;  // relative to the largest value; 0: bit for bit
};

void ExpectClose(const std::vector<std::vector<float>>& plain,
                 const std::vector<std::vector<float>>& blocked, double tolerance,
                 const std::string& what) {
  ASSERT_EQ(plain.size(), blocked.size());
  for (size_t t = 0; t < plain.size(); ++t) {
    double scale = 1e-30;
    for (float v : plain[t]) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < plain[t].size(); ++i) {
      if (tolerance == 0) {
        ASSERT_EQ(plain[t][i], blocked[t][i]) << what << " tensor " << t << " [" << i << "]";
      } else {
        ASSERT_NEAR(plain[t][i], blocked[t][i], tolerance * scale)
            << what << " tensor " << t << " [" << i << "]";
      }
    }
  }
}

class LayerLayoutTest : public ::testing::TestWithParam<LayerCase> {
 protected:
  void SetUp() override {
    if (!cpu::BlockedLayoutsPay())
      GTEST_SKIP() << "this CPU computes convolutions in plain layouts";
  }
};

void ExpectComputesWhatPlainComputes(const LayerCase& c, Layout layout) {
  testing::LayerHarness plain(c.entry, c.inputs), blocked(c.entry, c.inputs);
  blocked.UseLayouts(layout);
  ASSERT_TRUE(blocked.layer().input_layout(0) == layout ||
              blocked.layer().output_layout(0) == layout);
  for (testing::LayerHarness* h : {&plain, &blocked}) {
    h->Randomize(5);
    h->Forward();
    for (size_t o = 0; o < h->output_grads.size(); ++o) {
      for (size_t i = 0; i < h->output_grads[o].size(); ++i) {
        h->output_grads[o][i] = std::sin(static_cast<float>(i) * 0.7f + o);
      }
    }
  }
  ExpectClose(plain.outputs, blocked.outputs, c.tolerance, "forward");
  ExpectClose(plain.aux, blocked.aux, c.tolerance, "saved tensors");
  for (bool accumulate : {false, true}) {
    const std::vector<bool> flags(c.inputs.size(), accumulate);
    for (testing::LayerHarness* h : {&plain, &blocked}) {
      for (auto& g : h->input_grads) std::fill(g.begin(), g.end(), 0.25f);
      h->Backward(flags);
    }
    const std::string what = accumulate ? "accumulated backward" : "backward";
    ExpectClose(plain.input_grads, blocked.input_grads, c.tolerance, what);
    ExpectClose(plain.param_grads, blocked.param_grads, c.tolerance, what);
  }
}

TEST_P(LayerLayoutTest, BlockedComputesWhatPlainComputes) {
  ExpectComputesWhatPlainComputes(GetParam(), kBlocked);
}

TEST_P(LayerLayoutTest, ChannelsLastComputesWhatPlainComputes) {
  ExpectComputesWhatPlainComputes(GetParam(), kChannelsLast);
}

const Shape kImages(3, 32, 6, 6);
const LayerCase kLayerCases[] = {
    {"relu", "{type: relu, negative_slope: 0.1}", {kImages}, 0},
    {"add", "{type: add}", {kImages, kImages}, 0},
    {"concat", "{type: concat}", {kImages, Shape(3, 16, 6, 6)}, 0},
    {"max_pool", "{type: max_pool, kernel: 3, stride: 2, pad: 1}", {kImages}, 0},
    {"avg_pool", "{type: avg_pool, kernel: 3, stride: 1, pad: 1}", {kImages}, 0},
    {"global_avg_pool", "{type: global_avg_pool}", {kImages}, 0},
    {"batch_norm", "{type: batch_norm}", {kImages}, 1e-5},
    // Every algorithm but oneDNN's computes on plain copies: the same bits.
    {"im2col_image",
     "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: im2col_image}",
     {kImages},
     0},
    {"im2col_batch",
     "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: im2col_batch}",
     {kImages},
     0},
    {"im2col_chunk",
     "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: im2col_chunk}",
     {kImages},
     0},
    {"direct",
     "{type: convolution, filters: 16, kernel: 3, stride: 2, algorithm: direct}",
     {kImages},
     0},
    {"dnnl",
     "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: dnnl}",
     {kImages},
     1e-5},
    {"dnnl_1x1",
     "{type: convolution, filters: 32, kernel: 1, stride: 2, algorithm: dnnl}",
     {kImages},
     1e-5},
    {"depthwise",
     "{type: convolution, filters: 32, kernel: 3, stride: 2, pad: 1, groups: 32, "
     "algorithm: depthwise}",
     {kImages},
     0},
    {"dnnl_groups",
     "{type: convolution, filters: 16, kernel: 3, groups: 2, algorithm: dnnl}",
     {kImages},
     1e-5},
    // Plain input (three channels), blocked output: a network's first layer.
    {"dnnl_from_plain",
     "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: dnnl}",
     {Shape(3, 3, 6, 6)},
     1e-5},
};

INSTANTIATE_TEST_SUITE_P(Layers, LayerLayoutTest, ::testing::ValuesIn(kLayerCases),
                         [](const ::testing::TestParamInfo<LayerCase>& i) {
                           return std::string(i.param.name);
                         });

// The gradients of the layers with kernels of their own in the blocked and
// channels-last layouts are right there too (the finite differences are
// taken on the plain values the harness converts).
TEST_F(BlockedTest, GradientsAreRightInBlockedAndChannelsLastLayouts) {
  for (const Layout layout : {kBlocked, kChannelsLast}) {
    for (const char* entry :
         {"{type: batch_norm}", "{type: max_pool, kernel: 2}",
          "{type: avg_pool, kernel: 3, stride: 2, pad: 1}",
          "{type: convolution, filters: 16, kernel: 3, pad: 1, algorithm: dnnl}"}) {
      testing::LayerHarness h(entry, {Shape(2, 32, 4, 4)});
      h.UseLayouts(layout);
      ASSERT_EQ(h.layer().input_layout(0), layout) << entry;
      h.Randomize(3);
      EXPECT_EQ(testing::CheckGradients(h), "") << entry << " in " << LayoutName(layout);
    }
  }
}

// A network trains the same in every layout, to float rounding, whichever
// algorithm computes its convolutions.
TEST_F(BlockedTest, NetworkTrainsAlikeInEveryLayout) {
  const NetSpec spec = testing::MustParse(testing::kBlocked);
  for (const char* algorithm : {"pin:im2col_image", "pin:dnnl"}) {
    std::vector<testing::TrainTrace> traces;
    for (const Layout layout : {kPlain, kBlocked, kChannelsLast}) {
      testing::SyntheticRun run;
      run.batch = 4;
      run.steps = 3;
      run.learning_rate = 0.05f;
      run.blocked_layouts = layout != kPlain;
      if (layout != kPlain) run.layout = layout;
      run.memory.workspace = *ParseWorkspacePolicy(algorithm);
      auto trace = testing::TrainSynthetic(spec, run);
      ASSERT_TRUE(trace.ok()) << trace.status().ToString();
      traces.push_back(*trace);
    }
    for (size_t k = 1; k < traces.size(); ++k) {
      for (size_t i = 0; i < traces[0].losses.size(); ++i) {
        EXPECT_NEAR(traces[0].losses[i], traces[k].losses[i], 1e-4 * std::fabs(traces[0].losses[i]))
            << algorithm << " layout " << k << " step " << i;
      }
      ExpectClose(traces[0].params, traces[k].params, 1e-4, algorithm);
    }
  }
}

}  // namespace
}  // namespace spill
