// Dymem's parts on schedules written by hand (no network file, no layer
// code): tensor mobility on an Inception-A block and a residual block (the
// paper's Fig. 10 and its residual example), the GTBM allocator's arenas,
// incremental stack and sizing, and the dymem and vdnn schedulers' plans.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "framework/schedule/schedule.h"
#include "memory/allocators/gtbm_allocator.h"
#include "memory/fragmentation.h"
#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/planning/pool_sizing.h"
#include "memory/report/dymem_reports.h"
#include "memory/report/fragmentation_svg.h"
#include "memory/runtime/runtime.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

struct LayerSpec {
  std::string name;
  std::string type;
  std::vector<std::string> inputs;
};

// A network of LayerSpecs in route order: every activation is a
// batch x channels x 8 x 8 map, fully connected layers give 10 scores.
struct HandNet {
  Schedule schedule;
  NetworkView view;
  std::map<std::string, int> layer;

  TensorId Out(const std::string& name) const { return schedule.layers[layer.at(name)].outputs[0]; }
  TensorId Grad(const std::string& name) const {
    return schedule.layers[layer.at(name)].output_grads[0];
  }
};

LayerDecl Declare(const LayerSpec& spec, const std::map<std::string, int>& ids, int64_t batch,
                  int64_t channels) {
  LayerDecl d;
  d.name = spec.name;
  for (const std::string& in : spec.inputs) d.inputs.push_back({ids.at(in), 0});
  const size_t inputs = d.inputs.size();
  d.needs.inputs.assign(inputs, false);
  d.propagates.assign(inputs, true);
  d.output_shapes = {Shape({batch, channels, 8, 8})};
  const std::string& t = spec.type;
  if (t == "input") {
    d.is_input = true;
    if (spec.name == "labels") d.output_shapes = {Shape({batch, 1, 1, 1})};
  } else if (t == "convolution") {
    d.params = {{"weight", Shape({channels, channels, 3, 3}), {}, true, 1.0f}};
    d.needs.inputs = {true};
  } else if (t == "relu") {
    d.needs.outputs = true;
  } else if (t == "fully_connected") {
    d.output_shapes = {Shape({batch, 10, 1, 1})};
    d.params = {{"weight", Shape({10, channels * 64, 1, 1}), {}, true, 1.0f}};
    d.needs.inputs = {true};
  } else if (t == "softmax_loss") {
    d.output_shapes = {Shape({batch, 10, 1, 1})};
    d.is_loss = true;
    d.propagates = {true, false};
    d.needs.inputs = {false, true};
    d.needs.outputs = true;
  }
  return d;
}

std::unique_ptr<HandNet> Build(const std::vector<LayerSpec>& specs, int64_t batch = 4,
                               int64_t channels = 4) {
  auto net = std::make_unique<HandNet>();
  std::vector<LayerDecl> decls;
  std::vector<int> route;
  for (const LayerSpec& spec : specs) {
    net->layer[spec.name] = static_cast<int>(decls.size());
    decls.push_back(Declare(spec, net->layer, batch, channels));
    route.push_back(static_cast<int>(route.size()));
  }
  net->schedule = BuildSchedule(decls, route);
  net->view.schedule = &net->schedule;
  net->view.batch = batch;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& t = specs[i].type;
    const bool heavy = t == "convolution" || t == "fully_connected" || t == "input";
    net->view.layers.push_back({specs[i].name, t,
                                heavy ? LayerCost::kCheckpoint : LayerCost::kCheap,
                                decls[i].is_loss, decls[i].is_input});
    // As the layers declare themselves (Layer::memory_traits).
    MemoryTraits& traits = net->view.layers.back().traits;
    if (t == "convolution") traits = MemoryTraits::Convolution();
    if (t == "relu" || t == "concat") traits = MemoryTraits::FeatureMaps();
    if (t == "fully_connected" || t == "softmax_loss") traits = MemoryTraits::SmallOutputs();
  }
  return net;
}

// The Inception-A block of Dymem's Fig. 10, in its DFS route: l0 fans out
// to four branches (l1 -> l5, l2, l3 -> l6, l4 -> l7 -> l8), joined by l9.
std::unique_ptr<HandNet> InceptionA(int64_t batch = 4) {
  return Build({{"data", "input", {}},
                {"labels", "input", {}},
                {"l0", "convolution", {"data"}},
                {"l1", "avg_pool", {"l0"}},
                {"l5", "convolution", {"l1"}},
                {"l2", "convolution", {"l0"}},
                {"l3", "convolution", {"l0"}},
                {"l6", "convolution", {"l3"}},
                {"l4", "convolution", {"l0"}},
                {"l7", "convolution", {"l4"}},
                {"l8", "convolution", {"l7"}},
                {"l9", "concat", {"l5", "l2", "l6", "l8"}},
                {"fc", "fully_connected", {"l9"}},
                {"loss", "softmax_loss", {"fc", "labels"}}},
               batch);
}

// A residual block without batch norm: x forks into conv1 -> relu1 -> conv2
// and the identity, joined by add.
std::unique_ptr<HandNet> Residual(int64_t batch = 4) {
  return Build({{"data", "input", {}},
                {"labels", "input", {}},
                {"x", "convolution", {"data"}},
                {"conv1", "convolution", {"x"}},
                {"relu1", "relu", {"conv1"}},
                {"conv2", "convolution", {"relu1"}},
                {"add", "add", {"conv2", "x"}},
                {"relu", "relu", {"add"}},
                {"fc", "fully_connected", {"relu"}},
                {"loss", "softmax_loss", {"fc", "labels"}}},
               batch);
}

std::set<std::string> Named(const HandNet& net, const MobilityClasses& classes, Pass pass,
                            Mobility mobility, const std::vector<std::string>& layers) {
  std::set<std::string> out;
  for (const std::string& l : layers) {
    const TensorId t = pass == Pass::kForward ? net.Out(l) : net.Grad(l);
    if (classes.Of(t, pass) == mobility) out.insert(l);
  }
  return out;
}

// ---- Mobility (Algorithm 3) ----

// The paper's sets for Fig. 10: in forward, the fork l0 and the branch ends
// l5, l2, l6 that wait for the join are temporary, l8 (joined right away)
// and the chains' inner layers movable. In backward the branch ends'
// gradients are read at once (movable); dl0, accumulated from the four
// branches, is temporary.
TEST(MobilityTest, InceptionABlockGivesThePapersSets) {
  auto net = InceptionA();
  const MobilityClasses c = ClassifyMobility(net->view, 0);
  const std::vector<std::string> block = {"l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"};
  using S = std::set<std::string>;
  EXPECT_EQ(Named(*net, c, Pass::kForward, Mobility::kTemporary, block),
            (S{"l0", "l5", "l2", "l6"}));
  EXPECT_EQ(Named(*net, c, Pass::kForward, Mobility::kMovable, block),
            (S{"l1", "l3", "l4", "l7", "l8"}));
  EXPECT_TRUE(Named(*net, c, Pass::kForward, Mobility::kReclaimed, block).empty());
  EXPECT_EQ(Named(*net, c, Pass::kBackward, Mobility::kMovable, {"l5", "l2", "l6"}),
            (S{"l5", "l2", "l6"}));
  EXPECT_EQ(c.backward[net->Grad("l0")], Mobility::kTemporary);
  // The classifier's own small-tensor and layer-type rules: fully connected
  // outputs and gradients are reclaimed, parameters persistent.
  EXPECT_EQ(c.forward[net->Out("fc")], Mobility::kReclaimed);
  EXPECT_EQ(c.backward[net->Grad("fc")], Mobility::kReclaimed);
  EXPECT_EQ(c.forward[net->schedule.layers[net->layer.at("l0")].params[0]], Mobility::kPersistent);
  const MobilityClasses small = ClassifyMobility(net->view, 1 << 20);  // maps are 4 KiB
  EXPECT_EQ(small.forward[net->Out("l0")], Mobility::kReclaimed);
}

// The residual block: the block input is a fork (temporary), the conv
// branch's output feeds the join next (movable); the identity path is the
// fork tensor itself. In backward dx gathers two contributions (temporary).
TEST(MobilityTest, ResidualBlockForkIsTemporaryAndItsBranchMovable) {
  auto net = Residual();
  const MobilityClasses c = ClassifyMobility(net->view, 0);
  EXPECT_EQ(c.forward[net->Out("x")], Mobility::kTemporary);
  EXPECT_EQ(c.forward[net->Out("conv2")], Mobility::kMovable);
  EXPECT_EQ(c.forward[net->Out("conv1")], Mobility::kMovable);
  EXPECT_EQ(c.forward[net->Out("relu1")], Mobility::kMovable);
  EXPECT_EQ(c.forward[net->Out("add")], Mobility::kMovable);
  EXPECT_EQ(c.backward[net->Grad("x")], Mobility::kTemporary);
  EXPECT_EQ(c.backward[net->Grad("conv2")], Mobility::kMovable);
  // No tensor of its own for the shortcut: add reads x itself.
  const auto& add_inputs = net->schedule.layers[net->layer.at("add")].inputs;
  EXPECT_EQ(add_inputs[1], net->Out("x"));
}

// A forward tensor allocated in backward (prefetched or rebuilt) is movable
// however many backward steps read it: relu1 is read by its own backward and
// conv2's, the fork l0 by the backward of the four branches' first layers.
// Prefetches leave in the order they arrive, which a stack would strand.
TEST(MobilityTest, ForwardTensorsBroughtBackInBackwardAreMovable) {
  auto residual = Residual();
  const MobilityClasses r = ClassifyMobility(residual->view, 0);
  const Schedule& rs = residual->schedule;
  const TensorId relu1 = residual->Out("relu1");
  int readers = 0;
  for (int s = rs.num_layers(); s < 2 * rs.num_layers(); ++s) {
    const auto& reads = rs.steps[s].reads;
    readers += std::count(reads.begin(), reads.end(), relu1) > 0 ? 1 : 0;
  }
  ASSERT_EQ(readers, 2);
  EXPECT_EQ(r.backward[relu1], Mobility::kMovable);
  EXPECT_EQ(r.forward[residual->Out("x")], Mobility::kTemporary);  // the fork, in forward
  EXPECT_EQ(r.backward[residual->Out("x")], Mobility::kMovable);
  EXPECT_EQ(r.backward[residual->Grad("x")], Mobility::kTemporary);  // gradients keep theirs

  auto inception = InceptionA();
  const MobilityClasses c = ClassifyMobility(inception->view, 0);
  EXPECT_EQ(c.forward[inception->Out("l0")], Mobility::kTemporary);
  EXPECT_EQ(c.backward[inception->Out("l0")], Mobility::kMovable);
  EXPECT_EQ(c.backward[inception->Grad("l0")], Mobility::kTemporary);
  EXPECT_EQ(c.backward[inception->Out("fc")], Mobility::kReclaimed);  // the type rule first
}

// ---- Offload sets ----

TEST(OffloadSetTest, DymemTakesLargeFeatureMapsButNotFullyConnectedOnes) {
  auto net = Residual();
  const std::vector<bool> dymem = DymemOffloadSet(net->view, 0);
  // Needed by backward: data (x's input), x (conv1's input), relu1 (its own
  // backward and conv2's), relu's output (its own backward and fc's input).
  EXPECT_TRUE(dymem[net->Out("data")]);
  EXPECT_TRUE(dymem[net->Out("x")]);
  EXPECT_TRUE(dymem[net->Out("relu1")]);
  EXPECT_TRUE(dymem[net->Out("relu")]);
  EXPECT_FALSE(dymem[net->Out("conv1")]);  // only relu1's forward reads it
  EXPECT_FALSE(dymem[net->Out("fc")]);     // fully connected: never
  EXPECT_FALSE(DymemOffloadSet(net->view, 1 << 20)[net->Out("x")]);  // too small
  // vDNN's: the inputs of convolutions only.
  const std::vector<bool> conv = ConvInputOffloadSet(net->view, 0);
  EXPECT_TRUE(conv[net->Out("data")]);
  EXPECT_TRUE(conv[net->Out("x")]);
  EXPECT_TRUE(conv[net->Out("relu1")]);
  EXPECT_FALSE(conv[net->Out("relu")]);
}

// ---- The GTBM allocator ----

MemoryOptions Gtbm(const std::string& mode, size_t budget) {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
  options.allocator = "gtbm";
  options.compact = false;
  options.device_budget = budget;
  // These maps are small: place every tensor by mobility.
  SPILL_CHECK(options.settings.Set("min_offload", "0").ok());
  options.record_events = true;
  options.check_allocator = true;  // every invariant after every allocation and free
  return options;
}

const GtbmAllocator& AsGtbm(const MemoryRuntime& runtime) {
  const auto* gtbm = dynamic_cast<const GtbmAllocator*>(&runtime.allocator());
  SPILL_CHECK(gtbm != nullptr);
  return *gtbm;
}

// Every block lands in the arena of its class: temporaries above every
// movable (the top-down search), reclaimed tensors in the incremental space
// above the main one - and the arenas never interleave (checked after every
// event by the allocator itself, `check_allocator`).
TEST(GtbmTest, BlocksLandInTheirArenas) {
  auto net = InceptionA();
  for (const char* mode : {"liveness", "offload", "dymem", "superneurons"}) {
    MemoryOptions options = Gtbm(mode, 64 << 20);
    size_t main_size = 0;
    auto plan = Plan(net->view, options,
                     [&](const MemoryRuntime& r) { main_size = AsGtbm(r).main_size(); });
    ASSERT_TRUE(plan.ok() && plan->fits) << mode;
    const MobilityClasses classes = ClassifyMobility(net->view, 0);
    const int n = net->schedule.num_layers();
    int seen[4] = {0, 0, 0, 0};
    std::map<AllocationId, std::pair<size_t, Mobility>> live;
    for (const MemoryEvent& e : plan->events) {
      if (e.type == MemoryEventType::kFree) live.erase(e.block);
      if (e.type != MemoryEventType::kAlloc || e.tensor == kNoTensor) continue;
      const Mobility m = classes.Of(e.tensor, e.step < n ? Pass::kForward : Pass::kBackward);
      ++seen[static_cast<int>(m)];
      if (m == Mobility::kReclaimed) {
        EXPECT_GE(e.offset, main_size) << mode << " " << net->schedule.tensors[e.tensor].name;
      } else {
        EXPECT_LT(e.offset, main_size) << mode;
      }
      live[e.block] = {e.offset, m};
      for (const auto& [block, other] : live) {
        if (m == Mobility::kTemporary && other.second == Mobility::kMovable) {
          EXPECT_GT(e.offset, other.first) << mode << " " << net->schedule.tensors[e.tensor].name;
        }
      }
    }
    EXPECT_GT(seen[static_cast<int>(Mobility::kMovable)], 0) << mode;
    EXPECT_GT(seen[static_cast<int>(Mobility::kTemporary)], 0) << mode;
    EXPECT_GT(seen[static_cast<int>(Mobility::kReclaimed)], 0) << mode;
  }
}

// Temporaries a step writes at once go longest-lived first, so the first
// placed (highest) leaves last; the other writes keep their order, first.
TEST(GtbmTest, SameStepTemporariesArePlacedLongestLivedFirst) {
  // a and b fork (each read by the next layer and by the join e), so e's
  // backward writes two temporaries, da and db, and a movable, dc. da lives
  // until a's backward, after b's.
  auto net = Build({{"data", "input", {}},
                    {"labels", "input", {}},
                    {"a", "convolution", {"data"}},
                    {"b", "convolution", {"a"}},
                    {"c", "convolution", {"b"}},
                    {"e", "add", {"a", "b", "c"}},
                    {"fc", "fully_connected", {"e"}},
                    {"loss", "softmax_loss", {"fc", "labels"}}});
  const MobilityClasses classes = ClassifyMobility(net->view, 0);
  ASSERT_EQ(classes.backward[net->Grad("a")], Mobility::kTemporary);
  ASSERT_EQ(classes.backward[net->Grad("b")], Mobility::kTemporary);
  ASSERT_EQ(classes.backward[net->Grad("c")], Mobility::kMovable);
  const Step& e_backward = net->schedule.backward(net->layer.at("e"));
  ASSERT_EQ(e_backward.writes,
            (std::vector<TensorId>{net->Grad("a"), net->Grad("b"), net->Grad("c")}));
  GtbmAllocator gtbm(1 << 20, 0, net->view, classes);
  EXPECT_EQ(gtbm.PlacementOrder(e_backward),
            (std::vector<TensorId>{net->Grad("c"), net->Grad("a"), net->Grad("b")}));
  // Planned: da sits above db.
  MemoryOptions options = Gtbm("liveness", 64 << 20);
  auto plan = Plan(net->view, options);
  ASSERT_TRUE(plan.ok() && plan->fits);
  std::map<TensorId, size_t> offset;
  for (const MemoryEvent& e : plan->events) {
    if (e.type == MemoryEventType::kAlloc && e.tensor != kNoTensor) offset[e.tensor] = e.offset;
  }
  EXPECT_GT(offset[net->Grad("a")], offset[net->Grad("b")]);
}

// The incremental space holds reclaimed tensors, sized by the profiled
// iteration: it never overflows in a planned iteration and its peak is what
// the profile said.
TEST(GtbmTest, IncrementalSpaceIsSizedByTheProfileAndNeverOverflows) {
  auto net = InceptionA();
  for (const char* mode : {"liveness", "dymem"}) {
    const MemoryOptions options = Gtbm(mode, 64 << 20);
    auto profile = ProfileAllocations(net->view, options, Phase::kTrain, options.device_budget);
    ASSERT_TRUE(profile.ok());
    const size_t expected =
        IncrementalSpacePeak(*profile, net->view, ClassifyMobility(net->view, 0));
    EXPECT_GT(expected, 0u);
    size_t size = 0, peak = 0;
    int64_t overflows = -1;
    auto plan = Plan(net->view, options, [&](const MemoryRuntime& r) {
      size = AsGtbm(r).incremental_size();
      peak = AsGtbm(r).incremental_peak();
      overflows = AsGtbm(r).overflows();
    });
    ASSERT_TRUE(plan.ok() && plan->fits);
    EXPECT_EQ(size, expected) << mode;
    EXPECT_EQ(peak, expected) << mode;
    EXPECT_EQ(overflows, 0) << mode;
  }
}

// Frees out of order, by hand: blocks that leave last-in first-out stack up
// from the start of the incremental space, and the hole of a block freed
// below the top is reused at once (a stack that waited for the blocks above
// grew by a block per layer of a chain of small layers).
TEST(GtbmTest, IncrementalSpaceReusesTheHolesOfOutOfOrderFrees) {
  auto net = InceptionA();
  const MobilityClasses classes = ClassifyMobility(net->view, 0);
  const size_t kKiB = 1024;
  GtbmAllocator gtbm(64 * kKiB, 16 * kKiB, net->view, classes);
  // The forward step of fc writes its (reclaimed) output.
  AllocRequest r;
  r.tensor = net->Out("fc");
  r.step = net->schedule.forward_step[net->layer.at("fc")];
  r.bytes = 4 * kKiB;
  auto a = gtbm.Allocate(r);
  auto b = gtbm.Allocate(r);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offset, 48 * kKiB);
  EXPECT_EQ(b->offset, 52 * kKiB);
  gtbm.Free(a->id);  // below the top: its hole is free at once
  auto c = gtbm.Allocate(r);
  EXPECT_EQ(c->offset, 48 * kKiB);
  EXPECT_EQ(gtbm.CheckInvariants(), "");
  gtbm.Free(c->id);
  gtbm.Free(b->id);
  auto d = gtbm.Allocate(r);
  EXPECT_EQ(d->offset, 48 * kKiB);
  EXPECT_EQ(gtbm.incremental_peak(), 8 * kKiB);
  // A reclaimed request beyond the incremental space goes to the high end.
  r.bytes = 16 * kKiB;
  auto big = gtbm.Allocate(r);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->offset, 32 * kKiB);
  EXPECT_EQ(gtbm.overflows(), 1);
  EXPECT_EQ(gtbm.CheckInvariants(), "");
}

// A movable request never goes above the lowest temporary, even when a
// hole there would hold it: the arenas stay apart.
TEST(GtbmTest, MovablesStayBelowTheLowestTemporary) {
  auto net = Residual();
  const MobilityClasses classes = ClassifyMobility(net->view, 0);
  const size_t kKiB = 1024;
  GtbmAllocator gtbm(32 * kKiB, 0, net->view, classes);
  const int x_step = net->schedule.forward_step[net->layer.at("x")];
  AllocRequest temporary;
  temporary.tensor = net->Out("x");
  temporary.step = x_step;
  temporary.bytes = 4 * kKiB;
  auto t1 = gtbm.Allocate(temporary);  // [28, 32)
  auto t2 = gtbm.Allocate(temporary);  // [24, 28)
  auto t3 = gtbm.Allocate(temporary);  // [20, 24)
  ASSERT_TRUE(t1.ok() && t2.ok() && t3.ok());
  EXPECT_EQ(t1->offset, 28 * kKiB);
  EXPECT_EQ(t3->offset, 20 * kKiB);
  gtbm.Free(t2->id);  // a 4 KiB hole among the temporaries
  AllocRequest movable;
  movable.tensor = net->Out("conv1");
  movable.step = net->schedule.forward_step[net->layer.at("conv1")];
  movable.bytes = 4 * kKiB;
  auto m = gtbm.Allocate(movable);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->offset, 0u);  // not the hole at 24
  // 16 KiB are left below the temporaries; 20 are free in all.
  EXPECT_FALSE(gtbm.CanAllocate(20 * kKiB));
  movable.bytes = 16 * kKiB;
  auto m2 = gtbm.Allocate(movable);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(gtbm.LowFrontier(), 20 * kKiB);
  EXPECT_EQ(gtbm.HighFrontier(), 20 * kKiB);
  EXPECT_EQ(gtbm.squeeze_gap(), 0u);
  // The temporary's hole is still there, for temporaries only.
  auto t4 = gtbm.Allocate(temporary);
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(t4->offset, 24 * kKiB);
  EXPECT_EQ(gtbm.CheckInvariants(), "");
}

// The stacking rules, by hand on the residual block's backward. dx, the
// block input's gradient, is a temporary at the top; relu1 and conv2's
// gradient leave before it (relu1's and conv2's backward come first), x
// after relu1 (conv1's backward reads it). Under `prefetched` a forward
// tensor brought back joins the stack right below the block it leaves
// before - with the strict arenas it would go to the low end - and a
// gradient stays low; under `movables` the gradient joins too.
TEST(GtbmTest, MovablesThatLeaveFirstJoinTheHighEndsStack) {
  auto net = Residual();
  const MobilityClasses classes = ClassifyMobility(net->view, 0);
  const Schedule& schedule = net->schedule;
  const Liveness live = AnalyzeLiveness(schedule, Phase::kTrain);
  const TensorId dx = net->Grad("x"), relu1 = net->Out("relu1"), x = net->Out("x");
  const TensorId dconv2 = net->Grad("conv2");
  ASSERT_LT(live.last_use[relu1], live.last_use[x]);
  ASSERT_LT(live.last_use[x], live.last_use[dx]);
  ASSERT_LT(live.last_use[dconv2], live.last_use[dx]);
  ASSERT_LT(live.last_use[dconv2], live.last_use[relu1]);
  const size_t kKiB = 1024;
  auto request = [&](TensorId tensor, const std::string& layer) {
    AllocRequest r;
    r.tensor = tensor;
    r.step = schedule.backward_step[net->layer.at(layer)];
    r.bytes = 4 * kKiB;
    return r;
  };
  for (GtbmStacking stacking :
       {GtbmStacking::kNone, GtbmStacking::kPrefetched, GtbmStacking::kMovables}) {
    SCOPED_TRACE(GtbmStackingName(stacking));
    GtbmAllocator gtbm(32 * kKiB, 0, net->view, classes, /*soft=*/false, stacking);
    ASSERT_TRUE(gtbm.BeginIteration(Phase::kTrain).ok());
    auto t = gtbm.Allocate(request(dx, "add"));  // [28, 32)
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->offset, 28 * kKiB);
    auto g = gtbm.Allocate(request(dconv2, "add"));
    auto p = gtbm.Allocate(request(relu1, "relu"));
    auto later = gtbm.Allocate(request(x, "relu"));  // leaves after relu1
    ASSERT_TRUE(g.ok() && p.ok() && later.ok());
    switch (stacking) {
      case GtbmStacking::kNone:
        EXPECT_EQ(g->offset, 0u);
        EXPECT_EQ(p->offset, 4 * kKiB);
        break;
      case GtbmStacking::kPrefetched:
        EXPECT_EQ(g->offset, 0u);
        EXPECT_EQ(p->offset, 24 * kKiB);  // right below dx
        break;
      case GtbmStacking::kMovables:
        EXPECT_EQ(g->offset, 24 * kKiB);  // right below dx
        EXPECT_EQ(p->offset, 0u);         // leaves after the gradient on top
        break;
    }
    EXPECT_LT(later->offset, gtbm.LowFrontier());  // at the low end
    EXPECT_EQ(gtbm.stacked(), stacking == GtbmStacking::kNone ? 0 : 1);
    EXPECT_EQ(gtbm.CheckInvariants(), "");
    // An empty high end takes a prefetched tensor only under `prefetched`.
    gtbm.Free(p->id);
    gtbm.Free(g->id);
    gtbm.Free(t->id);
    auto first = gtbm.Allocate(request(relu1, "relu"));
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->offset == 28 * kKiB, stacking == GtbmStacking::kPrefetched);
    EXPECT_EQ(gtbm.CheckInvariants(), "");
  }
}

// The factory replays the profiled iteration (in an oversized pool) under
// every stacking rule and keeps the tightest; the replay reproduces the
// footprint of a roomy plan with that rule.
TEST(GtbmTest, FactoryKeepsTheStackingRuleThatPacksTheProfileTightest) {
  for (auto* make : {&InceptionA, &Residual}) {
    auto net = make(4);
    for (const char* mode : {"liveness", "dymem"}) {
      SCOPED_TRACE(mode);
      const MemoryOptions options = Gtbm(mode, kUnlimitedBudget);
      const MobilityClasses classes = ClassifyMobility(net->view, 0);
      auto profile = ProfileAllocations(net->view, options, Phase::kTrain, kUnlimitedBudget);
      ASSERT_TRUE(profile.ok());
      const size_t incremental = IncrementalSpacePeak(*profile, net->view, classes);
      std::map<GtbmStacking, size_t> replayed;
      for (GtbmStacking s :
           {GtbmStacking::kNone, GtbmStacking::kPrefetched, GtbmStacking::kMovables}) {
        replayed[s] = GtbmReplayFootprint(*profile, net->view, classes, incremental, s);
      }
      GtbmStacking chosen = GtbmStacking::kNone;
      auto plan =
          Plan(net->view, options, [&](const MemoryRuntime& r) { chosen = AsGtbm(r).stacking(); });
      ASSERT_TRUE(plan.ok() && plan->fits);
      for (const auto& [s, footprint] : replayed) EXPECT_LE(replayed[chosen], footprint);
      EXPECT_EQ(plan->footprint, replayed[chosen] + plan->persistent) << plan->persistent;
    }
  }
}

// gtbm_soft (the paper's "soft guarantee"): a request that finds no room in
// its arena takes the other's free space.
TEST(GtbmTest, SoftVariantCrossesIntoTheOtherArenaWhenItsOwnIsFull) {
  auto net = Residual();
  const size_t kKiB = 1024;
  GtbmAllocator soft(32 * kKiB, 0, net->view, ClassifyMobility(net->view, 0), /*soft=*/true);
  EXPECT_STREQ(soft.name(), "gtbm_soft");
  AllocRequest temporary;
  temporary.tensor = net->Out("x");
  temporary.step = net->schedule.forward_step[net->layer.at("x")];
  temporary.bytes = 4 * kKiB;
  auto t1 = soft.Allocate(temporary);  // [28, 32)
  auto t2 = soft.Allocate(temporary);  // [24, 28)
  temporary.bytes = 8 * kKiB;
  auto t3 = soft.Allocate(temporary);  // [16, 24)
  ASSERT_TRUE(t1.ok() && t2.ok() && t3.ok());
  soft.Free(t2->id);  // a 4 KiB hole among the temporaries
  AllocRequest movable;
  movable.tensor = net->Out("conv1");
  movable.step = net->schedule.forward_step[net->layer.at("conv1")];
  movable.bytes = 16 * kKiB;
  ASSERT_TRUE(soft.Allocate(movable).ok());  // [0, 16): the low arena is full
  movable.bytes = 4 * kKiB;
  EXPECT_TRUE(soft.CanAllocate(4 * kKiB));
  auto crossed = soft.Allocate(movable);
  ASSERT_TRUE(crossed.ok());
  EXPECT_EQ(crossed->offset, 24 * kKiB);  // the temporaries' hole
  EXPECT_EQ(soft.crossings(), 1);
  EXPECT_EQ(soft.CheckInvariants(), "");
}

// The footprint is the sized pool: the most the two ends held at once plus
// the incremental peak, and a budget of exactly that runs.
TEST(GtbmTest, FootprintIsTheSqueezedPoolAndRuns) {
  for (auto* make : {&InceptionA, &Residual}) {
    auto net = make(4);
    for (const char* mode : {"liveness", "dymem"}) {
      MemoryOptions options = Gtbm(mode, 64 << 20);
      size_t main_size = 0, squeeze = 0, incremental = 0;
      auto plan = Plan(net->view, options, [&](const MemoryRuntime& r) {
        main_size = AsGtbm(r).main_size();
        squeeze = AsGtbm(r).squeeze_gap();
        incremental = AsGtbm(r).incremental_peak();
      });
      ASSERT_TRUE(plan.ok() && plan->fits);
      EXPECT_EQ(plan->footprint, main_size - squeeze + incremental) << mode;
      EXPECT_GE(plan->footprint, plan->peak) << mode;
      options.device_budget = plan->footprint;
      auto sized = Plan(net->view, options);
      ASSERT_TRUE(sized.ok());
      EXPECT_TRUE(sized->fits) << mode << ": " << sized->failure;
    }
  }
}

TEST(GtbmTest, NeedsTheNetwork) {
  auto allocator = CreateAllocator("gtbm", {1 << 20, {}});
  ASSERT_FALSE(allocator.ok());
  EXPECT_THAT(allocator.status().message(), HasSubstr("needs the network"));
}

// ---- The dymem and vdnn schedulers ----

std::vector<std::pair<int, TransferOp>> ActionsOn(const TransferPlan& plan, TensorId t,
                                                  bool before) {
  std::vector<std::pair<int, TransferOp>> out;
  for (int s = 0; s < plan.num_steps(); ++s) {
    for (const TransferAction& a : before ? plan.before[s] : plan.after[s]) {
      if (a.tensor == t) out.push_back({s, a.op});
    }
  }
  return out;
}

MemoryOptions Dymem(const std::string& mode = "dymem") {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
  SPILL_CHECK(options.settings.Set("min_offload", "0").ok());
  return options;
}

// Lazy release: x starts copying after its step, joins the lazy FIFO after
// its last forward reader (add), and goes at the end of forward at the
// latest. Eager: it goes after add. Barrier: the compute waits for the copy
// at the end of the next step (conv1), and x keeps its block until add.
TEST(DymemSchedulerTest, ReleaseAndBarrierSwitches) {
  auto net = Residual();
  const int n = net->schedule.num_layers();
  const int x = net->schedule.forward_step[net->layer.at("x")];
  const int conv1 = net->schedule.forward_step[net->layer.at("conv1")];
  const int add = net->schedule.forward_step[net->layer.at("add")];
  using A = std::vector<std::pair<int, TransferOp>>;
  MemoryOptions options = Dymem();
  auto lazy = MakeTransferPlans(net->view, options);
  ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  const TensorId t = net->Out("x");
  const A forward_lazy = {{x, TransferOp::kBeginOffload},
                          {add, TransferOp::kFinishOffloadLazily},
                          {n - 1, TransferOp::kFinishOffload}};
  A got = ActionsOn(lazy->train, t, false);
  got.erase(std::remove_if(got.begin(), got.end(),
                           [&](const auto& a) { return a.second == TransferOp::kRelease; }),
            got.end());
  EXPECT_EQ(got, forward_lazy);
  ASSERT_TRUE(options.settings.Set("release", "eager").ok());
  auto eager = MakeTransferPlans(net->view, options);
  got = ActionsOn(eager->train, t, false);
  EXPECT_EQ(got[1], std::make_pair(add, TransferOp::kFinishOffload));
  ASSERT_TRUE(options.settings.Set("barrier", "true").ok());
  auto barrier = MakeTransferPlans(net->view, options);
  got = ActionsOn(barrier->train, t, false);
  const A forward_barrier = {{x, TransferOp::kBeginOffload},
                             {conv1, TransferOp::kCancelOffload},
                             {add, TransferOp::kBeginOffload},
                             {add, TransferOp::kFinishOffload}};
  EXPECT_EQ(A(got.begin(), got.begin() + 4), forward_barrier);
  // Neither recomputes nor caches.
  options.recompute = true;
  EXPECT_THAT(MakeTransferPlans(net->view, options).status().message(),
              HasSubstr("neither recomputes nor caches"));
}

// Algorithm 2 on the Inception block's backward (l9 l8 l7 l4 l6 l3 l2 l5 l1
// l0): before l8 (a convolution) the window holds the layers up to the next
// convolution, l7; before l9 (a concat) up to the second one ahead, l7.
TEST(DymemSchedulerTest, PrefetchWindowEndsBeforeTheThirdConvolution) {
  auto net = InceptionA();
  auto plans = MakeTransferPlans(net->view, Dymem());
  ASSERT_TRUE(plans.ok());
  const TransferPlan& train = plans->train;
  EXPECT_TRUE(train.prefetch_in_order);
  auto listed = [&](const std::string& layer) {
    std::set<std::string> names;
    for (const TransferAction& a :
         train.before[net->schedule.backward_step[net->layer.at(layer)]]) {
      EXPECT_EQ(a.op, TransferOp::kPrefetch);
      names.insert(net->schedule.tensors[a.tensor].name);
    }
    return names;
  };
  using S = std::set<std::string>;
  // l8's backward saves l7 (its input); l7's saves l4.
  EXPECT_EQ(listed("l8"), (S{"l4"}));                // l7, the one convolution ahead
  EXPECT_EQ(listed("l9"), (S{"l7", "l4"}));          // l8 and l7
  EXPECT_EQ(listed("fc"), (S{"l7", "l4"}));          // l9 saves nothing; l8, l7
  EXPECT_EQ(listed("loss"), (S{"l9", "l7", "l4"}));  // fc saves l9
  // vdnn: one layer ahead of first use.
  auto vdnn = MakeTransferPlans(net->view, Dymem("vdnn"));
  ASSERT_TRUE(vdnn.ok());
  const int l7_backward = net->schedule.backward_step[net->layer.at("l7")];
  ASSERT_EQ(ActionsOn(vdnn->train, net->Out("l4"), true).size(), 1u);
  EXPECT_EQ(ActionsOn(vdnn->train, net->Out("l4"), true)[0].first, l7_backward - 1);
  EXPECT_FALSE(vdnn->train.prefetch_in_order);
}

// Lazy release under pressure: on a chain of convolutions, whose forward
// would hold every input until backward, the smallest budget makes forward
// give blocks back - oldest first, when an allocation does not fit - and
// nothing is evicted; with room, nothing goes before the end of forward.
TEST(DymemSchedulerTest, LazyReleaseGivesBackOldestFirstOnlyUnderPressure) {
  std::vector<LayerSpec> chain = {{"data", "input", {}}, {"labels", "input", {}}};
  std::string previous = "data";
  for (int i = 1; i <= 8; ++i) {
    const std::string name = "conv" + std::to_string(i);
    chain.push_back({name, "convolution", {previous}});
    previous = name;
  }
  chain.push_back({"fc", "fully_connected", {previous}});
  chain.push_back({"loss", "softmax_loss", {"fc", "labels"}});
  auto net = Build(chain, 16);
  MemoryOptions options = Dymem();
  options.record_events = true;
  options.device_budget = 64 << 20;
  auto roomy = Plan(net->view, options);
  ASSERT_TRUE(roomy.ok() && roomy->fits);
  const int n = net->schedule.num_layers();
  for (const MemoryEvent& e : roomy->events) {
    if (e.type == MemoryEventType::kFinishOffload) {
      EXPECT_EQ(e.step, n - 1);
    }
  }
  auto minimum = MinimumBudget(net->view, options, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok());
  options.device_budget = *minimum;
  auto tight = Plan(net->view, options);
  ASSERT_TRUE(tight.ok() && tight->fits);
  // The order offloads join the FIFO: their last forward uses.
  std::vector<TensorId> queued, finished_early;
  auto plans = MakeTransferPlans(net->view, options);
  ASSERT_TRUE(plans.ok());
  for (int s = 0; s < n; ++s) {
    for (const TransferAction& a : plans->train.after[s]) {
      if (a.op == TransferOp::kFinishOffloadLazily) queued.push_back(a.tensor);
    }
  }
  for (const MemoryEvent& e : tight->events) {
    if (e.type == MemoryEventType::kFinishOffload && e.step < n - 1) {
      finished_early.push_back(e.tensor);
    }
    EXPECT_NE(e.type, MemoryEventType::kDrop);
  }
  ASSERT_FALSE(finished_early.empty()) << "the tight budget never needed a lazy release";
  // Oldest first: the early finishes are a prefix of the FIFO's order.
  ASSERT_LE(finished_early.size(), queued.size());
  EXPECT_TRUE(std::equal(finished_early.begin(), finished_early.end(), queued.begin()));
  EXPECT_LT(tight->peak, roomy->peak);
}

// ---- Fragmentation and pool sizing ----

// Per step, the most the placements spanned (carried over steps without
// events); U_f per allocation, its per-step mean and the mean at the peak.
TEST(FragmentationTest, FootprintPerStepAndUnusableFreeFromTheTrace) {
  std::vector<MemoryEvent> events;
  auto add = [&](MemoryEventType type, int step, size_t extent, double unusable) {
    MemoryEvent e;
    e.type = type;
    e.step = step;
    e.extent = extent;
    e.unusable_free = unusable;
    events.push_back(e);
  };
  add(MemoryEventType::kAlloc, -1, 10, 0.9);  // before the steps: only moves the extent
  add(MemoryEventType::kAlloc, 0, 30, 0.0);
  add(MemoryEventType::kCompute, 0, 0, 0);
  add(MemoryEventType::kAlloc, 0, 50, 0.5);
  add(MemoryEventType::kFree, 0, 40, 0);
  add(MemoryEventType::kFree, 2, 20, 0);  // step 1 has no allocation or free
  add(MemoryEventType::kAlloc, 2, 25, 0.2);
  const FragmentationProfile p = MeasureFragmentation(events, 4, "x");
  EXPECT_EQ(p.footprint, (std::vector<size_t>{50, 40, 40, 25}));
  ASSERT_EQ(p.unusable.size(), 3u);
  EXPECT_DOUBLE_EQ(p.unusable[0].x, 1.0 / 3);
  EXPECT_DOUBLE_EQ(p.unusable[1].x, 2.0 / 3);
  EXPECT_DOUBLE_EQ(p.unusable[2].x, 2.5);
  EXPECT_EQ(p.step_unusable, (std::vector<double>{0.25, 0, 0.2, 0}));
  EXPECT_DOUBLE_EQ(p.mean_unusable, 0.7 / 3);
  EXPECT_EQ(p.peak, 50u);
  EXPECT_EQ(p.peak_step, 0);
  EXPECT_DOUBLE_EQ(p.peak_unusable, 0.25);
  const std::string svg = FragmentationSvg({p}, "title");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("U_f per allocation"));
  EXPECT_THAT(svg, HasSubstr(">x</text>"));
}

// The paper's baseline, the caching best fit (CNMeM, PyTorch): free blocks
// of two segments never merge, so a request larger than either grows the
// pool by its whole size (Dymem's Figs. 6 and 7); best fit's one region
// serves it from the same holes.
TEST(CachingAllocatorTest, HolesOfTwoSegmentsNeverMerge) {
  constexpr size_t kMiB = size_t{1} << 20;
  auto caching = std::move(*CreateAllocator("caching", {64 * kMiB, {}}));
  auto best_fit = std::move(*CreateAllocator("best_fit", {64 * kMiB, {}}));
  caching->set_check_every_event(true);
  for (DeviceAllocator* a : {caching.get(), best_fit.get()}) {
    auto t0 = a->Allocate({2 * kMiB});
    auto t1 = a->Allocate({3 * kMiB});
    auto kept = a->Allocate({1 * kMiB});  // the long-lived tensor between the holes
    ASSERT_TRUE(t0.ok() && t1.ok() && kept.ok());
    a->Free(t0->id);
    a->Free(t1->id);
    ASSERT_TRUE(a->Allocate({4 * kMiB}).ok());
  }
  // Caching: three segments of 2, 3 and 1 MiB, then a fourth of 4 MiB; the
  // freed 2 and 3 MiB are adjacent addresses but two segments.
  EXPECT_EQ(caching->PeakFootprint(), 10 * kMiB);
  EXPECT_EQ(caching->Extent(), 10 * kMiB);
  EXPECT_EQ(best_fit->PeakFootprint(), 6 * kMiB);
  EXPECT_EQ(caching->CheckInvariants(), "");
}

// Within a segment blocks split and coalesce; a request is served by the
// smallest cached block that holds it, and growth stops at the budget.
TEST(CachingAllocatorTest, SplitsCoalescesAndStopsAtTheBudget) {
  constexpr size_t kMiB = size_t{1} << 20;
  auto a = std::move(*CreateAllocator("caching", {8 * kMiB, {}}));
  a->set_check_every_event(true);
  auto big = a->Allocate({6 * kMiB});
  ASSERT_TRUE(big.ok());
  a->Free(big->id);
  auto x = a->Allocate({2 * kMiB});  // splits the cached 6 MiB block
  auto y = a->Allocate({2 * kMiB});
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->offset, 0u);
  EXPECT_EQ(y->offset, 2 * kMiB);
  EXPECT_EQ(a->PeakFootprint(), 6 * kMiB);
  a->Free(x->id);
  a->Free(y->id);  // coalesces back to one 6 MiB block
  EXPECT_TRUE(a->CanAllocate(6 * kMiB));
  auto z = a->Allocate({5 * kMiB});
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->offset, 0u);
  // 1 MiB cached, 2 MiB left to grow by: 3 MiB cannot be served.
  EXPECT_FALSE(a->CanAllocate(3 * kMiB));
  auto refused = a->Allocate({3 * kMiB});
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(a->PeakFootprint(), 6 * kMiB);
  EXPECT_NEAR(a->UnusableFree(3 * kMiB), 1.0, 1e-12);
  EXPECT_EQ(a->CheckInvariants(), "");
  // Between iterations the free segments at the top go back; a live block
  // keeps its segment.
  auto kept = a->Allocate({1 * kMiB});  // the cached 1 MiB tail of the segment
  ASSERT_TRUE(kept.ok());
  a->Free(z->id);
  a->EndIteration();
  EXPECT_EQ(a->Extent(), 6 * kMiB);
  a->Free(kept->id);
  a->EndIteration();
  EXPECT_EQ(a->Extent(), 0u);
  EXPECT_EQ(a->CheckInvariants(), "");
}

// `plan --fragmentation-svg`: every allocator in one pool, the largest of
// their footprints, so all fit and U_f is measured against the same memory.
TEST(FragmentationTest, AllocatorsAreComparedInOnePool) {
  auto net = InceptionA(8);
  MemoryOptions options = Gtbm("vdnn", kUnlimitedBudget);
  auto c = CompareFragmentation(net->view, options, {"first_fit", "best_fit", "gtbm"}, 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->profiles.size(), 3u) << FragmentationText(*c);
  EXPECT_TRUE(c->failures.empty());
  size_t largest = 0;
  for (const FragmentationProfile& p : c->profiles) {
    largest = std::max(largest, p.peak);
    EXPECT_EQ(p.footprint.size(), net->schedule.steps.size());
    EXPECT_GT(p.unusable.size(), 0u);
  }
  EXPECT_GE(c->pool, largest);
  EXPECT_THAT(FragmentationText(*c), HasSubstr("gtbm"));
}

// Dymem's sizing from an iteration planned in an oversized pool: the pool
// (init - squeeze gap + beta, plus the incremental peak) runs; without beta
// it is GTBM's footprint, at least the exact minimum; and the smallest beta'
// that runs is found to a block.
TEST(PoolSizingTest, SizedPoolRunsAndTheSmallestBetaIsExact) {
  auto net = InceptionA(8);
  for (const char* mode : {"liveness", "dymem"}) {
    MemoryOptions options = Gtbm(mode, 64 << 20);
    options.check_allocator = false;
    const size_t beta = 64 << 10;
    auto sizing = SizeGtbmPool(net->view, options, beta);
    ASSERT_TRUE(sizing.ok()) << sizing.status().ToString();
    EXPECT_EQ(sizing->init, size_t{64} << 20);
    EXPECT_TRUE(sizing->runs) << mode;
    EXPECT_EQ(sizing->pool(), sizing->squeezed() + beta);
    auto plan = Plan(net->view, options);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(sizing->squeezed(), plan->footprint) << mode;
    EXPECT_GE(sizing->squeezed(), sizing->minimum) << mode;
    EXPECT_LE(sizing->smallest_beta, beta) << mode;
    options.device_budget = sizing->squeezed() + sizing->smallest_beta;
    EXPECT_TRUE(Plan(net->view, options)->fits) << mode;
    if (sizing->smallest_beta > 0) {
      options.device_budget -= kPoolBlockBytes;
      EXPECT_FALSE(Plan(net->view, options)->fits) << mode;
    }
  }
  MemoryOptions best_fit = Gtbm("liveness", 64 << 20);
  best_fit.allocator = "best_fit";
  EXPECT_THAT(SizeGtbmPool(net->view, best_fit, 0).status().message(),
              HasSubstr("the best_fit allocator does not size its pool"));
}

}  // namespace
}  // namespace spill
