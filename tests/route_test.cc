// The execution route (SuperNeurons Algorithm 1) and the step schedule, on
// the nonlinear examples of the paper: a fan (Fig. 3c / Fig. 5), a join
// (Fig. 3b) and nested fans (Fig. 6).
#include "framework/graph/route.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "framework/base/random.h"
#include "framework/graph/net.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

std::vector<std::string> Names(const std::vector<int>& order,
                               const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (int i : order) out.push_back(names[i]);
  return out;
}

RouteGraph MakeGraph(int n, const std::vector<std::pair<int, int>>& edges) {
  RouteGraph g;
  g.Resize(n);
  for (auto [a, b] : edges) g.AddEdge(a, b);
  return g;
}

// Figure 6: layers a..j with two nested fans (b -> c, d and f -> g, h);
// i joins e, g and h.
TEST(RouteTest, NestedFansOfFigure6) {
  enum { a, b, c, d, e, f, g, h, i, j };
  std::vector<std::string> names = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  RouteGraph graph = MakeGraph(
      10, {{a, b}, {b, c}, {b, d}, {c, e}, {d, f}, {f, g}, {f, h}, {e, i}, {g, i}, {h, i}, {i, j}});
  auto route = ConstructRoute(graph, names);
  ASSERT_TRUE(route.ok());
  // Depth first: a, b, then c's branch up to the join, then d's branch; i
  // runs only once e, g and h are done.
  EXPECT_EQ(Names(*route, names),
            (std::vector<std::string>{"a", "b", "c", "e", "d", "f", "g", "h", "i", "j"}));
}

// Figure 3b: DATA feeds a branch and, through a join, the FC layer directly.
TEST(RouteTest, JoinWaitsForEveryProducer) {
  enum { data, conv, pool, fc, softmax };
  std::vector<std::string> names = {"data", "conv", "pool", "fc", "softmax"};
  RouteGraph graph =
      MakeGraph(5, {{data, fc}, {data, conv}, {conv, pool}, {pool, fc}, {fc, softmax}});
  auto route = ConstructRoute(graph, names);
  ASSERT_TRUE(route.ok());
  EXPECT_EQ(Names(*route, names),
            (std::vector<std::string>{"data", "conv", "pool", "fc", "softmax"}));
}

TEST(RouteTest, RandomDagsGiveTopologicalOrders) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const int n = 2 + static_cast<int>(Mix64(seed) % 40);
    RouteGraph graph;
    graph.Resize(n);
    for (int v = 1; v < n; ++v) {
      graph.AddEdge(static_cast<int>(Mix64(seed * 1000 + v) % v), v);  // connected to the root
      if (Mix64(seed * 77 + v) % 3 == 0)
        graph.AddEdge(static_cast<int>(Mix64(seed * 31 + v) % v), v);
    }
    std::vector<std::string> names(n, "x");
    auto route = ConstructRoute(graph, names);
    ASSERT_TRUE(route.ok());
    ASSERT_EQ(static_cast<int>(route->size()), n);
    std::vector<int> position(n, -1);
    for (int k = 0; k < n; ++k) position[(*route)[k]] = k;
    for (int v = 0; v < n; ++v) {
      ASSERT_GE(position[v], 0);
      for (int p : graph.prev[v]) ASSERT_LT(position[p], position[v]) << "seed " << seed;
    }
  }
}

TEST(RouteTest, CyclesAndUnreachableLayersAreErrors) {
  std::vector<std::string> names = {"a", "b", "c"};
  RouteGraph cyclic = MakeGraph(3, {{0, 1}, {1, 2}, {2, 1}});
  EXPECT_EQ(FindCycle(cyclic), (std::vector<int>{1, 2, 1}));
  EXPECT_FALSE(ConstructRoute(cyclic, names).ok());
}

TEST(RouteTest, TwentyFiveThousandLayerChainDoesNotRecurse) {
  const int n = 25000;
  RouteGraph graph;
  graph.Resize(n);
  for (int v = 1; v < n; ++v) graph.AddEdge(v - 1, v);
  auto route = ConstructRoute(graph, std::vector<std::string>(n, "x"));
  ASSERT_TRUE(route.ok());
  EXPECT_EQ(route->back(), n - 1);
}

// The fan of Figure 3c: DATA0 feeds two branches that join in FC.
const char kFanNet[] = R"(
layers:
  - {name: data, type: input, shape: [1, 4, 4]}
  - {name: conv1, type: convolution, filters: 2, kernel: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 2, kernel: 3, pad: 1, inputs: [conv1]}
  - {name: relu2, type: relu}
  - {name: join, type: concat, inputs: [relu1, relu2]}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)";

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto net = Net::Build(testing::MustParse(kFanNet), {2, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    net_ = std::move(net).value();
  }
  TensorId Id(const std::string& name) {
    const auto& t = net_->schedule().tensors;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i].name == name) return static_cast<TensorId>(i);
    }
    ADD_FAILURE() << "no tensor " << name;
    return kNoTensor;
  }
  const Step& Backward(const std::string& layer) {
    return net_->schedule().backward(net_->FindLayer(layer));
  }
  std::unique_ptr<Net> net_;
};

TEST_F(ScheduleTest, StepsFollowTheRouteForwardThenInReverse) {
  const Schedule& s = net_->schedule();
  EXPECT_EQ(
      Names(s.route, net_->layer_names()),
      (std::vector<std::string>{"data", "conv1", "relu1", "conv2", "relu2", "join", "fc", "loss"}));
  ASSERT_EQ(s.steps.size(), 16u);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(s.steps[k].pass, Pass::kForward);
    EXPECT_EQ(s.steps[k].layer, s.route[k]);
    EXPECT_EQ(s.steps[8 + k].pass, Pass::kBackward);
    EXPECT_EQ(s.steps[8 + k].layer, s.route[7 - k]);
  }
}

TEST_F(ScheduleTest, ForwardStepsReadInputsAndParamsAndWriteOutputs) {
  const Step& conv2 = net_->schedule().forward(net_->FindLayer("conv2"));
  EXPECT_EQ(conv2.reads,
            (std::vector<TensorId>{Id("conv1"), Id("conv2/weight"), Id("conv2/bias")}));
  EXPECT_EQ(conv2.writes, (std::vector<TensorId>{Id("conv2")}));
  const Step& loss = net_->schedule().forward(net_->FindLayer("loss"));
  // The labels come from the input layer without being named.
  EXPECT_EQ(loss.reads, (std::vector<TensorId>{Id("fc"), Id("data:1")}));
}

TEST_F(ScheduleTest, BackwardStepsListSavedTensorsAndGradients) {
  // Convolution needs its input; ReLU its output; concat neither.
  EXPECT_EQ(Backward("conv2").saved, std::vector<TensorId>{Id("conv1")});
  EXPECT_EQ(Backward("relu1").saved, std::vector<TensorId>{Id("relu1")});
  EXPECT_TRUE(Backward("join").saved.empty());
  EXPECT_EQ(Backward("loss").saved, (std::vector<TensorId>{Id("data:1"), Id("loss")}));
  // conv1 reads the data, which needs no gradient: only parameter gradients.
  EXPECT_EQ(Backward("conv1").writes,
            (std::vector<TensorId>{Id("conv1/weight.grad"), Id("conv1/bias.grad")}));
  EXPECT_FALSE(Backward("data").active);
}

TEST_F(ScheduleTest, FannedTensorGradientAccumulates) {
  // conv1's output is read by relu1 and conv2. Backward meets conv2 first
  // (reverse route), which creates conv1.grad; relu1 then adds into it.
  const Step& conv2 = Backward("conv2");
  const Step& relu1 = Backward("relu1");
  EXPECT_LT(conv2.index, relu1.index);
  TensorId g = Id("conv1.grad");
  EXPECT_NE(std::find(conv2.writes.begin(), conv2.writes.end(), g), conv2.writes.end());
  EXPECT_TRUE(conv2.accumulates.empty());
  EXPECT_EQ(relu1.accumulates, std::vector<TensorId>{g});
  EXPECT_TRUE(net_->schedule().layers[net_->FindLayer("relu1")].accumulate[0]);
  EXPECT_FALSE(net_->schedule().layers[net_->FindLayer("conv2")].accumulate[0]);
}

// A residual unit: the sum hands its gradient to the branch's end (fc2, read
// by the sum alone) and to the unit's input (relu0, also read by fc1). Both
// share the sum's gradient tensor: fc2's backward reads it, and fc1's - which
// runs after it - adds the input's other share into it.
constexpr char kResidual[] = R"(
layers:
  - {name: data, type: input, shape: [1, 2, 2]}
  - {name: fc0, type: fully_connected, outputs: 4}
  - {name: relu0, type: relu}
  - {name: fc1, type: fully_connected, outputs: 4}
  - {name: relu1, type: relu}
  - {name: fc2, type: fully_connected, outputs: 4}
  - {name: sum, type: add, inputs: [fc2, relu0]%s}
  - {name: relu2, type: relu}
  - {name: loss, type: softmax_loss}
)";

std::unique_ptr<Net> BuildResidual(const std::string& options = "") {
  char yaml[1024];
  std::snprintf(yaml, sizeof(yaml), kResidual, options.c_str());
  auto net = Net::Build(testing::MustParse(yaml), {2, DeviceType::kCpu});
  SPILL_CHECK(net.ok()) << net.status().ToString();
  return std::move(net).value();
}

bool Named(const Schedule& s, const std::string& name) {
  for (const TensorInfo& t : s.tensors) {
    if (t.name == name) return true;
  }
  return false;
}

TEST(ScheduleSharedGradientTest, ASumSharesItsGradientWithItsInputs) {
  const std::unique_ptr<Net> net = BuildResidual();
  const Schedule& s = net->schedule();
  const LayerTensors& sum = s.layers[net->FindLayer("sum")];
  const TensorId g = sum.output_grads[0];
  EXPECT_EQ(s.tensors[g].name, "sum.grad");
  EXPECT_EQ(sum.input_grads, (std::vector<TensorId>{g, g}));
  EXPECT_EQ(s.layers[net->FindLayer("fc2")].output_grads[0], g);
  EXPECT_EQ(s.layers[net->FindLayer("relu0")].output_grads[0], g);
  EXPECT_FALSE(Named(s, "fc2.grad"));
  EXPECT_FALSE(Named(s, "relu0.grad"));
  // Nothing to write: the sum's backward reads the gradient it hands on.
  const Step& back = s.backward(net->FindLayer("sum"));
  EXPECT_TRUE(back.writes.empty());
  EXPECT_EQ(sum.accumulate, (std::vector<bool>{false, false}));
  // fc2 reads it as its output's gradient before fc1 adds into it.
  const Step& fc2 = s.backward(net->FindLayer("fc2"));
  const Step& fc1 = s.backward(net->FindLayer("fc1"));
  EXPECT_LT(fc2.index, fc1.index);
  EXPECT_NE(std::find(fc2.reads.begin(), fc2.reads.end(), g), fc2.reads.end());
  EXPECT_EQ(fc1.accumulates, std::vector<TensorId>{g});
  EXPECT_TRUE(s.layers[net->FindLayer("fc1")].accumulate[0]);
}

TEST(ScheduleSharedGradientTest, AnInputWhoseReaderAddsBeforeTheBranchIsReadKeepsItsOwn) {
  // The branch is fc2 alone, and fc2 reads the unit's input: its backward
  // reads the sum's gradient and adds into the input's in one call, so the
  // input keeps a tensor of its own; the branch's end still shares.
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 2, 2]}
  - {name: fc0, type: fully_connected, outputs: 4}
  - {name: relu0, type: relu}
  - {name: fc2, type: fully_connected, outputs: 4}
  - {name: sum, type: add, inputs: [fc2, relu0]}
  - {name: loss, type: softmax_loss}
)"),
                        {2, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  const Schedule& s = (*net)->schedule();
  const LayerTensors& sum = s.layers[(*net)->FindLayer("sum")];
  EXPECT_EQ(sum.input_grads[0], sum.output_grads[0]);
  EXPECT_NE(sum.input_grads[1], sum.output_grads[0]);
  EXPECT_EQ(s.tensors[sum.input_grads[1]].name, "relu0.grad");
  EXPECT_EQ(sum.accumulate, (std::vector<bool>{false, false}));
  EXPECT_TRUE(s.layers[(*net)->FindLayer("fc2")].accumulate[0]);
}

TEST(ScheduleSharedGradientTest, ABranchThatMayBeDroppedKeepsItsOwn) {
  // With stochastic depth the branch's gradient is zero in some iterations.
  const std::unique_ptr<Net> net = BuildResidual(", survival: 0.5");
  const Schedule& s = net->schedule();
  const LayerTensors& sum = s.layers[net->FindLayer("sum")];
  EXPECT_NE(sum.input_grads[0], sum.output_grads[0]);
  EXPECT_NE(sum.input_grads[1], sum.output_grads[0]);
  EXPECT_TRUE(Named(s, "fc2.grad"));
  EXPECT_TRUE(Named(s, "relu0.grad"));
}

TEST(ScheduleSelfJoinTest, LayerReadingOneTensorTwiceAccumulatesItsSecondSlot) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 2, 2]}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: twice, type: add, inputs: [fc, fc]}
  - {name: loss, type: softmax_loss}
)"),
                        {2, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const LayerTensors& lt = (*net)->schedule().layers[(*net)->FindLayer("twice")];
  EXPECT_EQ(lt.input_grads[0], lt.input_grads[1]);
  EXPECT_EQ(lt.accumulate, (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace spill
