// The memory runtime's seams on their own: allocators behind the allocator
// interface, the event log (allocation trace), the transfer plan, eviction
// rules and the static allocator. These tests build their schedules by hand -
// no network file, no layer code - as any new policy's tests can.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>

#include "framework/device/cpu_device.h"
#include "framework/schedule/schedule.h"
#include "memory/allocators/allocator.h"
#include "memory/allocators/dsa_exact.h"
#include "memory/allocators/dsa_solver.h"
#include "memory/eviction/eviction.h"
#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/report/events_json.h"
#include "memory/runtime/runtime.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;

// A small network with a fan and a join, declared without any layer code:
// data -> conv1 -> relu1 -> conv2 -> add(conv2, relu1) -> fc -> loss.
struct HandNet {
  Schedule schedule;
  NetworkView view;
};

LayerDecl Decl(const std::string& name, std::vector<LayerDecl::Input> inputs, Shape out) {
  LayerDecl d;
  d.name = name;
  d.inputs = std::move(inputs);
  d.output_shapes = {out};
  d.needs.inputs.assign(d.inputs.size(), true);
  d.propagates.assign(d.inputs.size(), true);
  return d;
}

std::unique_ptr<HandNet> MakeHandNet(int64_t n) {
  const Shape map({n, 8, 16, 16});
  std::vector<LayerDecl> layers;
  LayerDecl data = Decl("data", {}, map);
  data.is_input = true;
  LayerDecl labels = Decl("labels", {}, Shape({n, 1, 1, 1}));
  labels.is_input = true;
  LayerDecl conv1 = Decl("conv1", {{0, 0}}, map);
  conv1.params = {{"weight", Shape({8, 8, 3, 3}), {}, true, 1.0f}};
  conv1.forward_workspace = 64 * kKiB;
  conv1.backward_workspace = 96 * kKiB;
  LayerDecl relu1 = Decl("relu1", {{2, 0}}, map);
  relu1.needs.inputs = {false};
  relu1.needs.outputs = true;
  LayerDecl conv2 = Decl("conv2", {{3, 0}}, map);
  conv2.params = {{"weight", Shape({8, 8, 3, 3}), {}, true, 1.0f}};
  conv2.forward_workspace = 64 * kKiB;
  LayerDecl add = Decl("add", {{4, 0}, {3, 0}}, map);
  add.needs.inputs = {false, false};
  LayerDecl fc = Decl("fc", {{5, 0}}, Shape({n, 10, 1, 1}));
  fc.params = {{"weight", Shape({10, 8 * 16 * 16, 1, 1}), {}, true, 1.0f}};
  LayerDecl loss = Decl("loss", {{6, 0}, {1, 0}}, Shape({n, 10, 1, 1}));
  loss.is_loss = true;
  loss.propagates = {true, false};
  loss.needs.inputs = {false, true};
  loss.needs.outputs = true;
  layers = {data, labels, conv1, relu1, conv2, add, fc, loss};
  auto net = std::make_unique<HandNet>();
  net->schedule = BuildSchedule(layers, {0, 1, 2, 3, 4, 5, 6, 7});
  net->view.schedule = &net->schedule;
  net->view.batch = n;
  const char* types[] = {"input",       "input", "convolution",     "relu",
                         "convolution", "add",   "fully_connected", "softmax_loss"};
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool heavy = i == 2 || i == 4 || i == 6 || layers[i].is_input;
    net->view.layers.push_back({layers[i].name, types[i],
                                heavy ? LayerCost::kCheckpoint : LayerCost::kCheap,
                                layers[i].is_loss, layers[i].is_input});
  }
  return net;
}

class NoCompute : public StepRunner {
 public:
  Status Recompute(int) override { return Status::Ok(); }
};

MemoryOptions Mode(const std::string& mode, const std::string& allocator, size_t budget) {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
  options.allocator = allocator;
  options.device_budget = budget;
  options.record_events = true;
  return options;
}

// Every allocator keeps its invariants (no overlap, blocks inside the
// region, stats equal to the live blocks) after every step of every mode,
// roomy and at the smallest budget - checked on a schedule written by hand.
TEST(AllocatorSeamTest, EveryAllocatorKeepsItsInvariantsInEveryMode) {
  auto net = MakeHandNet(4);
  NoCompute runner;
  int checked = 0;
  for (const std::string& allocator : AllocatorNames()) {
    for (const std::string& mode : MemoryModeNames()) {
      MemoryOptions options = Mode(mode, allocator, kUnlimitedBudget);
      auto minimum = MinimumBudget(net->view, options, kPoolBlockBytes);
      ASSERT_TRUE(minimum.ok()) << allocator << " " << mode << ": " << minimum.status().ToString();
      for (size_t budget : {size_t{64} << 20, *minimum}) {
        options.device_budget = budget;
        auto runtime = MemoryRuntime::Create(net->view, options, nullptr);
        ASSERT_TRUE(runtime.ok()) << allocator << " " << mode << ": "
                                  << runtime.status().ToString();
        for (int iteration = 0; iteration < 2; ++iteration) {
          ASSERT_TRUE((*runtime)->BeginIteration(Phase::kTrain).ok());
          for (const Step& step : net->schedule.steps) {
            ASSERT_TRUE((*runtime)->PrepareStep(step, runner).ok())
                << allocator << " " << mode << " step " << step.index;
            EXPECT_EQ((*runtime)->allocator().CheckInvariants(), "")
                << allocator << " " << mode << " step " << step.index;
            (*runtime)->FinishStep(step);
            EXPECT_EQ((*runtime)->allocator().CheckInvariants(), "")
                << allocator << " " << mode << " step " << step.index;
            ++checked;
          }
          ASSERT_TRUE((*runtime)->EndIteration().ok()) << allocator << " " << mode;
        }
        EXPECT_LE((*runtime)->allocator().stats().total_peak, budget);
      }
    }
  }
  // Allocators x modes x 2 budgets x 2 iterations x 16 steps.
  EXPECT_EQ(checked,
            static_cast<int>(AllocatorNames().size() * MemoryModeNames().size()) * 2 * 2 * 16);
}

// The allocation trace is the plan's accounting, event by event: replayed,
// its live bytes peak at the plan's peak, its blocks end within the plan's
// footprint, and in a liveness mode every block placed in the iteration is
// given back in it.
TEST(EventLogTest, AllocationTraceReproducesThePlan) {
  auto net = MakeHandNet(4);
  for (const char* allocator : {"first_fit", "best_fit", "static", "ideal"}) {
    MemoryOptions options = Mode("liveness", allocator, kUnlimitedBudget);
    auto plan = Plan(net->view, options);
    ASSERT_TRUE(plan.ok() && plan->fits) << allocator;
    const TraceMetrics m = MeasureTrace(plan->events, plan->persistent);
    EXPECT_EQ(m.max_load, plan->peak) << allocator;
    EXPECT_LE(m.footprint, plan->footprint) << allocator;
    std::map<AllocationId, int> open;
    int computes = 0;
    for (const MemoryEvent& e : plan->events) {
      if (e.type == MemoryEventType::kAlloc) {
        ++open[e.block];
        EXPECT_GE(e.unusable_free, 0.0);
        EXPECT_LE(e.unusable_free, 1.0);
      }
      if (e.type == MemoryEventType::kFree) --open[e.block];
      computes += e.type == MemoryEventType::kCompute;
    }
    for (const auto& [block, count] : open) EXPECT_EQ(count, 0) << allocator << " block " << block;
    int active = 0;
    for (const Step& s : net->schedule.steps) active += s.active;
    EXPECT_EQ(computes, active) << allocator;
  }
}

// `plan --trace`: one JSON object per event, alloc/free with their block,
// offset and kind.
TEST(EventLogTest, JsonLinesNameEveryEvent) {
  auto net = MakeHandNet(2);
  auto plan = Plan(net->view, Mode("offload", "first_fit", kUnlimitedBudget));
  ASSERT_TRUE(plan.ok());
  const std::string json = MemoryEventsJson(plan->events, net->schedule);
  EXPECT_EQ(static_cast<size_t>(std::count(json.begin(), json.end(), '\n')), plan->events.size());
  EXPECT_THAT(json, HasSubstr("\"event\":\"alloc\""));
  EXPECT_THAT(json, HasSubstr("\"event\":\"begin_offload\""));
  EXPECT_THAT(json, HasSubstr("\"kind\":\"workspace\""));
  EXPECT_THAT(json, HasSubstr("\"tensor\":\"conv1\""));
}

// The ideal allocator's footprint is the max load; the others can only add
// fragmentation to it.
TEST(AllocatorSeamTest, IdealAllocatorIsTheLowerBound) {
  auto net = MakeHandNet(4);
  MemoryOptions options = Mode("liveness", "ideal", kUnlimitedBudget);
  options.compact = false;
  auto ideal = Plan(net->view, options);
  ASSERT_TRUE(ideal.ok());
  EXPECT_EQ(ideal->footprint, ideal->peak);
  for (const char* allocator : {"first_fit", "best_fit", "static"}) {
    options.allocator = allocator;
    auto plan = Plan(net->view, options);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->peak, ideal->peak) << allocator;
    EXPECT_GE(plan->footprint, ideal->footprint) << allocator;
  }
}

TEST(AllocatorSeamTest, UnknownNamesAndPlanOnlyAllocatorsAreRefused) {
  auto unknown = CreateAllocator("worst_fit", {kPoolBlockBytes * 4, {}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown allocator 'worst_fit'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("best_fit"));
  MemoryOptions options;
  options.eviction = "random";
  EXPECT_THAT(options.Validate().message(), HasSubstr("unknown eviction rule 'random'"));
  auto net = MakeHandNet(2);
  CpuDevice device;
  options = Mode("liveness", "ideal", 64 << 20);
  auto runtime = MemoryRuntime::Create(net->view, options, &device);
  ASSERT_FALSE(runtime.ok());
  EXPECT_THAT(runtime.status().message(), HasSubstr("only plans"));
}

// ---- The static allocator, served by hand ----

struct Request {
  TensorId tensor;
  size_t bytes;
};

// Allocates `sequence` in order inside one iteration, freeing each block
// `lifetimes[i]` requests later (0: at the end). Returns the offsets.
std::vector<size_t> Serve(DeviceAllocator& allocator, const std::vector<Request>& sequence,
                          const std::vector<int>& lifetimes) {
  SPILL_CHECK(allocator.BeginIteration(Phase::kTrain).ok());
  std::vector<size_t> offsets;
  std::multimap<size_t, AllocationId> due;  // request index -> block to free after it
  std::vector<AllocationId> all;
  for (size_t i = 0; i < sequence.size(); ++i) {
    AllocRequest r;
    r.tensor = sequence[i].tensor;
    r.bytes = sequence[i].bytes;
    r.step = static_cast<int>(i);
    auto block = allocator.Allocate(r);
    SPILL_CHECK(block.ok()) << block.status().ToString();
    offsets.push_back(block->offset);
    all.push_back(block->id);
    if (lifetimes[i] > 0) due.insert({i + lifetimes[i], block->id});
    for (auto it = due.begin(); it != due.end() && it->first <= i;) {
      allocator.Free(it->second);
      all.erase(std::find(all.begin(), all.end(), it->second));
      it = due.erase(it);
    }
    SPILL_CHECK(allocator.CheckInvariants().empty()) << allocator.CheckInvariants();
  }
  for (AllocationId id : all) allocator.Free(id);
  allocator.EndIteration();
  return offsets;
}

// The profile of Serve(sequence, lifetimes): the same events on the same
// clock (one tick per allocation and per free).
AllocationProfile ProfileOf(const std::vector<Request>& sequence, const std::vector<int>& lifetimes,
                            size_t budget) {
  AllocationProfile profile;
  profile.budget = budget;
  int64_t clock = 0;
  std::multimap<size_t, size_t> due;  // request index -> request to free after it
  std::vector<size_t> open;
  for (size_t i = 0; i < sequence.size(); ++i) {
    ProfiledRequest r;
    r.tensor = sequence[i].tensor;
    r.step = static_cast<int>(i);
    r.bytes = RoundToBlocks(sequence[i].bytes);
    r.alloc_time = clock++;
    profile.requests.push_back(r);
    open.push_back(i);
    if (lifetimes[i] > 0) due.insert({i + lifetimes[i], i});
    for (auto it = due.begin(); it != due.end() && it->first <= i;) {
      profile.requests[it->second].free_time = clock++;
      open.erase(std::find(open.begin(), open.end(), it->second));
      it = due.erase(it);
    }
  }
  for (size_t k : open) profile.requests[k].free_time = clock++;
  return profile;
}

TEST(StaticAllocatorTest, ServesProfiledOffsetsAndReplansWhenRequestsChange) {
  const std::vector<Request> profiled = {{0, 8 * kKiB}, {1, 4 * kKiB}, {2, 8 * kKiB},
                                         {3, 2 * kKiB}, {4, 8 * kKiB}, {kNoTensor, 4 * kKiB}};
  const std::vector<int> lifetimes = {3, 1, 2, 1, 1, 1};
  const size_t capacity = 256 * kKiB;
  int profiles = 0;
  AllocatorContext context;
  context.capacity = capacity;
  context.profiler = [&](Phase, size_t budget, ProfilePlans) -> StatusOr<AllocationProfile> {
    ++profiles;
    return ProfileOf(profiled, lifetimes, budget);
  };
  auto created = CreateAllocator("static", context);
  ASSERT_TRUE(created.ok());
  DeviceAllocator& allocator = **created;
  // Persistent state first, outside any iteration: at the bottom.
  AllocRequest weights;
  weights.bytes = 16 * kKiB;
  weights.category = MemoryCategory::kParameters;
  ASSERT_EQ(allocator.Allocate(weights)->offset, 0u);
  // The iteration is served at the solver's offsets above the weights.
  std::vector<DsaBlock> blocks;
  for (const ProfiledRequest& r : ProfileOf(profiled, lifetimes, capacity).requests) {
    blocks.push_back({r.bytes, r.alloc_time, r.free_time});
  }
  const DsaSolution solution = SolveDsaBestFit(blocks);
  const std::vector<size_t> offsets = Serve(allocator, profiled, lifetimes);
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i], 16 * kKiB + solution.offsets[i]) << i;
  }
  EXPECT_EQ(allocator.mismatches(), 0);
  EXPECT_EQ(allocator.stats().high_water, 16 * kKiB + solution.footprint);
  // Again: the same offsets, no second profile.
  EXPECT_EQ(Serve(allocator, profiled, lifetimes), offsets);
  EXPECT_EQ(profiles, 1);
  // A request grows (say, another algorithm's workspace): it cannot take its
  // slot; it and the rest of the iteration are placed by best fit, without
  // overlap (Serve checks), and the iteration becomes the new profile.
  std::vector<Request> changed = profiled;
  changed[3].bytes = 24 * kKiB;
  Serve(allocator, changed, lifetimes);
  EXPECT_EQ(allocator.mismatches(), 1);
  const std::vector<size_t> replanned = Serve(allocator, changed, lifetimes);
  EXPECT_EQ(allocator.mismatches(), 1);
  EXPECT_EQ(Serve(allocator, changed, lifetimes), replanned);
  EXPECT_EQ(allocator.mismatches(), 1);
}

TEST(StaticAllocatorTest, AProfileThatCannotBePackedIsOutOfMemory) {
  AllocatorContext context;
  context.capacity = 16 * kKiB;
  context.profiler = [](Phase, size_t budget, ProfilePlans) -> StatusOr<AllocationProfile> {
    return ProfileOf({{0, 12 * kKiB}, {1, 12 * kKiB}}, {0, 0}, budget);
  };
  auto allocator = std::move(*CreateAllocator("static", context));
  Status status = allocator->BeginIteration(Phase::kTrain);
  EXPECT_EQ(status.code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(status.message(), HasSubstr("packs into"));
}

// On the trace of a real iteration the heuristic's offsets are optimal (CBC
// proves the bound) - the paper found the same on AlexNet and GoogLeNet.
TEST(StaticAllocatorTest, HeuristicMatchesTheExactOptimumOnIterationTraces) {
  for (int64_t batch : {2, 5}) {
    auto net = MakeHandNet(batch);
    MemoryOptions options = Mode("liveness", "first_fit", kUnlimitedBudget);
    auto profile = ProfileAllocations(net->view, options, Phase::kTrain, kUnlimitedBudget);
    ASSERT_TRUE(profile.ok());
    std::vector<DsaBlock> blocks;
    for (const ProfiledRequest& r : profile->requests) {
      blocks.push_back({r.bytes, r.alloc_time, r.free_time});
    }
    ASSERT_GE(blocks.size(), 10u);
    const DsaSolution heuristic = SolveDsaBestFit(blocks);
    auto exact = SolveDsaExact(blocks, {20.0, true});
    ASSERT_TRUE(exact.ok()) << exact.status().ToString();
    ASSERT_TRUE(exact->optimal) << "CBC did not prove an optimum for batch " << batch;
    EXPECT_EQ(heuristic.footprint, exact->solution.footprint) << "batch " << batch;
    // And the static allocator serves exactly that footprint on top of the
    // persistent tensors.
    options.allocator = "static";
    auto plan = Plan(net->view, options);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->footprint, plan->persistent + heuristic.footprint);
  }
}

// ---- Transfer plans ----

TEST(TransferPlanTest, SuperNeuronsOffloadPlansCopiesOutAndBackForEachCheckpoint) {
  auto net = MakeHandNet(4);
  MemoryOptions options = Mode("offload", "first_fit", kUnlimitedBudget);
  auto plans = MakeTransferPlans(net->view, options);
  ASSERT_TRUE(plans.ok());
  const TransferPlan& train = plans->train;
  // Checkpoint outputs that backward needs (here the data and the labels)
  // leave after their producer and come back before backward needs them.
  const int begins = train.Count(TransferOp::kBeginOffload);
  EXPECT_EQ(begins, 2);
  EXPECT_EQ(begins, train.Count(TransferOp::kFinishOffload));
  EXPECT_EQ(begins, train.Count(TransferOp::kPrefetch));
  for (int s = 0; s < train.num_steps(); ++s) {
    for (const TransferAction& a : train.after[s]) {
      if (a.op != TransferOp::kBeginOffload) continue;
      // Offloads start right after the step that writes the tensor.
      const auto& writes = net->schedule.steps[s].writes;
      EXPECT_NE(std::find(writes.begin(), writes.end(), a.tensor), writes.end());
    }
  }
  // Every transient tensor is released exactly once per iteration.
  std::map<TensorId, int> released;
  for (const auto& list : train.after) {
    for (const TransferAction& a : list) released[a.tensor] += a.op == TransferOp::kRelease;
  }
  for (TensorId t = 0; t < static_cast<TensorId>(net->schedule.tensors.size()); ++t) {
    if (IsTransient(net->schedule.tensors[t].kind) && train.liveness.last_use[t] >= 0) {
      EXPECT_EQ(released[t], 1) << net->schedule.tensors[t].name;
    }
  }
  // Evaluation only releases.
  EXPECT_EQ(plans->eval.Count(TransferOp::kBeginOffload), 0);
  EXPECT_EQ(plans->eval.Count(TransferOp::kPrefetch), 0);
  EXPECT_GT(plans->eval.Count(TransferOp::kRelease), 0);
}

TEST(TransferPlanTest, RecomputationExtendsSourcesWithoutTouchingItsInput) {
  auto net = MakeHandNet(4);
  const Liveness liveness = AnalyzeLiveness(net->schedule, Phase::kTrain);
  const Liveness copy = liveness;
  std::vector<LayerCost> costs;
  std::vector<bool> is_loss;
  for (const LayerSummary& l : net->view.layers) {
    costs.push_back(l.cost);
    is_loss.push_back(l.is_loss);
  }
  RecomputePlan plan = PlanRecompute(net->schedule, liveness, costs, is_loss,
                                     RecomputeStrategy::kCostAware, /*eager=*/true);
  EXPECT_EQ(liveness.last_use, copy.last_use);
  const Liveness extended = ExtendLiveness(liveness, plan);
  for (TensorId t = 0; t < static_cast<TensorId>(liveness.last_use.size()); ++t) {
    EXPECT_GE(extended.last_use[t], liveness.last_use[t]);
  }
  // relu1's output is cheap and needed by backward: droppable. conv1's
  // output, which only relu1's forward reads, is its source: it lives until
  // relu1's output is dropped.
  const TensorId relu1 = net->schedule.layers[3].outputs[0];
  const TensorId conv1 = net->schedule.layers[2].outputs[0];
  ASSERT_TRUE(plan.droppable[relu1]);
  int drop_step = -1;
  for (int st = 0; st < static_cast<int>(plan.drop_after.size()); ++st) {
    for (TensorId t : plan.drop_after[st]) {
      if (t == relu1) drop_step = st;
    }
  }
  // At the earliest after add; later when relu1 is itself the source of a
  // dropped tensor (add's output), which is dropped after fc.
  EXPECT_EQ(drop_step, net->schedule.forward_step[6]);
  EXPECT_LT(liveness.last_use[conv1], drop_step);
  EXPECT_EQ(extended.last_use[conv1], drop_step);
}

// ---- Eviction rules ----

TEST(EvictionTest, BeladyEvictsTheTensorUsedFurthestAheadAndLruTheOldest) {
  auto net = MakeHandNet(2);
  const Schedule& s = net->schedule;
  const TensorId conv1 = s.layers[2].outputs[0];  // read again by relu1 (step 3)
  const TensorId relu1 = s.layers[3].outputs[0];  // read by conv2, add; backward
  const TensorId conv2 = s.layers[4].outputs[0];  // read by add (step 5)
  TensorCache cache(s.tensors.size());
  cache.Touch(conv1);
  cache.Touch(relu1);
  cache.Touch(conv2);
  auto any = [](TensorId) { return true; };
  auto lru = std::move(*CreateEviction("lru", s));
  auto belady = std::move(*CreateEviction("belady", s));
  EXPECT_EQ(lru->Victim(cache, any, 3), conv1);
  // After step 4 (conv2): conv2 is next read by add at step 5, relu1 too;
  // conv1 is next needed in backward (conv1's own backward reads its input,
  // relu1's backward its output...) - whichever is furthest goes.
  const int step = 4;
  auto next_use = [&](TensorId t) {
    int next = INT_MAX;
    for (const Step& st : s.steps) {
      if (st.index <= step) continue;
      for (const auto* l : {&st.reads, &st.writes, &st.saved, &st.accumulates}) {
        if (std::find(l->begin(), l->end(), t) != l->end()) next = std::min(next, st.index);
      }
    }
    return next;
  };
  TensorId expected = conv1;
  for (TensorId t : {relu1, conv2}) {
    if (next_use(t) > next_use(expected)) expected = t;
  }
  EXPECT_EQ(belady->Victim(cache, any, step), expected);
  // Locked tensors are never victims.
  cache.Lock(expected);
  EXPECT_NE(belady->Victim(cache, any, step), expected);
  EXPECT_EQ(belady->Victim(
                cache, [](TensorId) { return false; }, step),
            kNoTensor);
}

}  // namespace
}  // namespace spill
