// The memory runtime's promises: every mode trains bit-identically to the
// baseline; the plan computed from shapes equals the memory measured in a
// run, step by step; liveness on a linear network peaks at the paper's
// sum(l_f) + l_b(N); a budget that is too small gives a report with the
// smallest budget that works.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "framework/config/net_spec.h"
#include "framework/graph/layer_registry.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_layouts.h"
#include "memory/allocators/va_allocator.h"
#include "memory/liveness.h"
#include "memory/planning/feasibility.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "tests/testing/equivalence.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using testing::BitEqual;
using testing::ExpectBitIdentical;
using testing::ExpectRunAsPlanned;
using ::testing::HasSubstr;
using testing::kNetworks;
using testing::Network;

// A memory configuration the equivalence tests run under: every allocator
// and eviction rule must keep the math and the plan == run promise.
struct Variant {
  const char* name;
  const char* allocator;
  const char* eviction;
  bool compact;
  size_t chunk = kDefaultChunkBytes;  // va only
  const char* params = "device";      // where parameters, gradients and solver state live
  bool update_on_host = false;
  int64_t batch_chunk = kBatchChunkOff;  // images per slice of the batch
  const char* workspace = "pin:im2col_image";
  int stream_buffers = 2;                  // slices per staging block of a streamed step
  Precision precision = Precision::kFp32;  // run.precision
  // In 16 bits: every step that can is computed in slices to keep its
  // float32 copies small (NetOptions::slice_copies_from 0), or none is.
  bool slice_copies = true;
  // Where set: the layout activations take between convolutions
  // (NetOptions::layout), else this CPU's fastest.
  std::optional<Layout> layout = std::nullopt;
};
constexpr Variant kDefault = {"first_fit", "first_fit", "lru", true};
constexpr Variant kVariants[] = {
    kDefault,
    {"best_fit", "best_fit", "lru", true},
    {"best_fit_no_compaction", "best_fit", "lru", false},
    {"static", "static", "lru", true},
    {"belady", "first_fit", "belady", true},
    // Virtual addressing with real mappings, at one chunk size here (4 KiB
    // chunks: VaChunkTest): 64 KiB chunks put the smaller of these tensors
    // in shared arenas and give the larger their own ranges.
    {"va", "va", "lru", true, 64 * kKiB},
    {"params_host", "first_fit", "lru", true, kDefaultChunkBytes, "host", false},
    {"params_host_update_host", "first_fit", "lru", true, kDefaultChunkBytes, "host", true},
    {"params_above_1KiB", "best_fit", "lru", true, kDefaultChunkBytes, "above:1KiB", false},
    {"gtbm", "gtbm", "lru", false},
    {"gtbm_soft", "gtbm_soft", "lru", false},
    {"caching", "caching", "lru", false},
    // Steps computed over slices of the batch (memory.chunk): one image at a
    // time, and two (slices of 2 and 1 of the batch of 3); at the smallest
    // budgets steps stream, their tensors in host memory. `auto` slices only
    // the steps that stream, as large as fits.
    {"chunk_1", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, 1},
    {"chunk_2", "best_fit", "lru", true, kDefaultChunkBytes, "device", false, 2},
    {"chunk_auto", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkAuto},
    {"chunk_auto_gtbm", "gtbm", "lru", false, kDefaultChunkBytes, "device", false, kBatchChunkAuto},
    // Streamed steps alternate copies and compute in one buffer per tensor
    // instead of overlapping them in two (memory.stream_buffers).
    {"chunk_auto_single", "best_fit", "lru", true, kDefaultChunkBytes, "device", false,
     kBatchChunkAuto, "pin:im2col_image", 1},
    // oneDNN's convolutions, the fast path, on blocked tensors where the
    // network has them (whole batches only: oneDNN's filter gradient of a
    // slice rounds differently from the whole batch's).
    {"dnnl", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:dnnl"},
    // The same in channels-last (NHWC), the layout of oneDNN's AMX kernels.
    {"dnnl_nhwc", "best_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:dnnl", 2, Precision::kFp32, true, Layout::kChannelsLast},
    // Activations and their gradients in bfloat16, converted around each
    // computation in copies at the front of its workspace: whole batches,
    // slices (whose copies are a slice's), streamed steps, and parameters
    // in host memory.
    {"bf16", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:im2col_image", 2, Precision::kBf16},
    {"bf16_whole_steps", "best_fit", "lru", true, kDefaultChunkBytes, "device", false,
     kBatchChunkOff, "pin:im2col_image", 2, Precision::kBf16, false},
    {"bf16_chunk_2", "best_fit", "lru", true, kDefaultChunkBytes, "device", false, 2,
     "pin:im2col_image", 2, Precision::kBf16},
    {"bf16_chunk_auto", "first_fit", "lru", true, kDefaultChunkBytes, "device", false,
     kBatchChunkAuto, "pin:im2col_image", 2, Precision::kBf16},
    {"bf16_params_host", "va", "lru", true, 64 * kKiB, "host", true, kBatchChunkOff,
     "pin:im2col_image", 2, Precision::kBf16},
    // Convolutions in bfloat16 arithmetic on the 16-bit tensors as they are
    // (where the processor has it), whole batches as for dnnl: oneDNN's
    // convolution primitives (dnnl_bf16), and the same arithmetic as one
    // matrix product over the batch (gemm_bf16).
    {"bf16_dnnl", "best_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:dnnl_bf16", 2, Precision::kBf16, false},
    {"bf16_dnnl_nhwc", "first_fit", "lru", true, kDefaultChunkBytes, "device", false,
     kBatchChunkOff, "pin:dnnl_bf16", 2, Precision::kBf16, false, Layout::kChannelsLast},
    {"bf16_gemm", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:gemm_bf16", 2, Precision::kBf16, false},
    // IEEE half storage (fp16), converted like bfloat16; with the parameters
    // in host memory, updated there after the iteration (loss scaling checks
    // every gradient first).
    {"fp16", "first_fit", "lru", true, kDefaultChunkBytes, "device", false, kBatchChunkOff,
     "pin:im2col_image", 2, Precision::kFp16},
    {"fp16_params_host", "best_fit", "lru", true, kDefaultChunkBytes, "host", true, kBatchChunkOff,
     "pin:im2col_image", 2, Precision::kFp16},
};

testing::SyntheticRun SmallRun(const std::string& mode, const Variant& variant = kDefault) {
  testing::SyntheticRun run = testing::SmallMemoryRun(mode);
  // These maps are a few KiB: offload them and place them by mobility all the same.
  SPILL_CHECK(run.memory.settings.Set("min_offload", "0").ok());
  // Algorithms round differently: comparing modes bit for bit pins one.
  run.memory.workspace = *ParseWorkspacePolicy(variant.workspace);
  run.memory.allocator = variant.allocator;
  run.memory.eviction = variant.eviction;
  run.memory.compact = variant.compact;
  SPILL_CHECK(run.memory.settings.Set("va_chunk", std::to_string(variant.chunk)).ok());
  run.memory.params = *ParseParamPlacement(variant.params);
  run.memory.update_on_host = variant.update_on_host;
  run.memory.batch_chunk = variant.batch_chunk;
  run.memory.stream_buffers = variant.stream_buffers;
  run.precision = variant.precision;
  run.layout = variant.layout;
  run.memory.updates_after_iteration = variant.precision == Precision::kFp16;  // as train sets it
  if (variant.precision != Precision::kFp32 && variant.slice_copies) run.slice_copies_from = 0;
  // GTBM's arenas and stack, and the caching allocator's segments, are
  // checked after every allocation and free (the other allocators'
  // invariants, gtbm_soft's too, after every step: memory_seams_test).
  const std::string allocator = variant.allocator;
  run.memory.check_allocator = allocator == "gtbm" || allocator == "caching";
  // The learned planner trains briefly on these small graphs (a plan per
  // budget the searches below try).
  SPILL_CHECK(run.memory.settings.Set("planner.episodes", "12").ok());
  SPILL_CHECK(run.memory.settings.Set("planner.embedding", "8").ok());
  SPILL_CHECK(run.memory.settings.Set("planner.evaluations", "300").ok());
  return run;
}

const char* const kModes[] = {
    "baseline",     "liveness", "offload", "recompute", "offload_recompute",
    "superneurons", "window",   "lms",     "dymem",     "vdnn",
    "memonger",     "greedy",   "search",  "dqn"};

// Modes whose plan is searched for under the device budget (memory/planners/).
bool Searches(const std::string& mode) { return FindMemoryMode(mode)->searches; }

// The budget for a mode: the smallest that runs (forcing every technique to
// act), or a roomy one.
MemoryOptions Options(const NetSpec& spec, const std::string& mode, bool tight,
                      const Variant& variant = kDefault) {
  testing::SyntheticRun run = SmallRun(mode, variant);
  if (!tight) return run.memory;
  auto net = testing::BuildTrainingNet(spec, testing::NetOptionsOf(run, DeviceType::kCpu));
  SPILL_CHECK(net.ok());
  auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
  SPILL_CHECK(minimum.ok()) << minimum.status().ToString();
  run.memory.device_budget = *minimum;
  return run.memory;
}

class ModeTest : public ::testing::TestWithParam<Network> {};
class VariantTest : public ::testing::TestWithParam<std::tuple<Network, Variant>> {};

// Which networks a searching planner is run on at its smallest budget.
// Finding that budget runs the planner once per budget probed: milliseconds
// for greedy on the test networks, seconds for the learned planner, which
// trains anew at every probe (a minute on a small model). So at the smallest
// budgets the learned planner runs on the test networks under the default
// variant, greedy on them under every variant, and neither on the small
// models, which run them with room to spare; the planners' own plans at
// tight budgets are tested in planners_test.
enum class Scope { kNetwork, kSmallModel };
bool RunsTight(const std::string& mode, const Variant& variant, Scope scope) {
  if (!Searches(mode)) return true;
  if (scope == Scope::kSmallModel) return false;
  return mode == "greedy" || std::string(variant.name) == kDefault.name;
}

// Every mode, with a roomy budget and with the smallest that runs, under
// every allocator and eviction rule, gives the losses and parameters of the
// baseline (first fit) bit for bit - freed device memory is poisoned with
// NaN, so reading a tensor after it left would show - and runs as planned.
// (One run serves both promises.)
void ExpectEveryModeBitIdenticalAndPlanned(const NetSpec& spec, const Variant& variant,
                                           Scope scope = Scope::kNetwork) {
  const std::string workspace = variant.workspace;
  if ((workspace == "pin:dnnl_bf16" || workspace == "pin:gemm_bf16") && !cpu::Bf16Arithmetic()) {
    GTEST_SKIP() << "this processor has no AVX-512 BF16 for " << workspace.substr(4);
  }
  testing::SyntheticRun reference = SmallRun("baseline");
  reference.memory.workspace = *ParseWorkspacePolicy(variant.workspace);
  reference.precision = variant.precision;
  reference.layout = variant.layout;
  reference.slice_copies_from = SmallRun("baseline", variant).slice_copies_from;
  auto baseline = testing::TrainSynthetic(spec, reference);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  for (const char* mode : kModes) {
    // Steps that stream through host memory (memory.chunk) place their
    // tensors at run time, which the planners' drops and rebuilds do not
    // account for: those modes run without batch slices.
    const bool planned = std::string(mode) == "memonger" || Searches(mode);
    if (planned && variant.batch_chunk != kBatchChunkOff) continue;
    for (bool tight : {false, true}) {
      if (tight && !RunsTight(mode, variant, scope)) continue;
      const std::string what = std::string(mode) + (tight ? " tight" : "");
      testing::SyntheticRun run = SmallRun(mode, variant);
      run.memory = Options(spec, mode, tight, variant);
      run.memory.record_events = true;
      auto trace = testing::TrainSynthetic(spec, run);
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      ExpectBitIdentical(*baseline, *trace, what);
      ExpectRunAsPlanned(spec, run, *trace, what);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST_P(VariantTest, EveryModeTrainsBitIdenticallyToBaselineAndAsPlanned) {
  const auto& [network, variant] = GetParam();
  ExpectEveryModeBitIdenticalAndPlanned(testing::MustParse(network.yaml), variant);
}

// The small versions of the models of models/ that mobile and modern
// networks brought (test_networks.h), under every allocator and eviction rule.
NetSpec SmallModelSpec(const testing::SmallModel& model) {
  ParamOverrides overrides;
  for (const auto& item : YAML::Load(model.params)) overrides[item.first.Scalar()] = item.second;
  auto spec = LoadNetFile(model.file, overrides);
  SPILL_CHECK(spec.ok()) << spec.status().ToString();
  return *spec;
}

class SmallModelTest : public ::testing::TestWithParam<std::tuple<testing::SmallModel, Variant>> {};

TEST_P(SmallModelTest, EveryModeTrainsBitIdenticallyToBaselineAndAsPlanned) {
  const auto& [model, variant] = GetParam();
  ExpectEveryModeBitIdenticalAndPlanned(SmallModelSpec(model), variant, Scope::kSmallModel);
}

// Virtual addressing at the smallest chunk, a page: every request of the
// residual network (forks and joins, so ranges are freed out of order) of
// 1 KiB or more gets a range of its own, mapped, split, merged and grown.
// One network keeps this cheap; the variants above cover every network with
// one chunk size.
TEST(VaChunkTest, PageChunksKeepEveryModeBitIdenticalAndPlanned) {
  const Network& network = kNetworks[1];
  ASSERT_STREQ(network.name, "resnet");
  const Variant page = {"va_4k", "va", "lru", true, 4 * kKiB};
  ExpectEveryModeBitIdenticalAndPlanned(testing::MustParse(network.yaml), page);
  // Not vacuous: at the tightest window budget requests take fresh ranges
  // and reuse freed ones, within the bounds of Eq. 1 and Eq. 2.
  NetSpec spec = testing::MustParse(network.yaml);
  MemoryOptions options = Options(spec, "window", /*tight=*/true, page);
  auto net = Net::Build(spec, {SmallRun("window").batch, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  VaStats stats;
  auto plan = Plan((*net)->view(), options, [&](const MemoryRuntime& r) {
    stats = dynamic_cast<const VirtualAddressAllocator&>(r.allocator()).va_stats();
  });
  ASSERT_TRUE(plan.ok() && plan->fits);
  EXPECT_GT(stats.fresh, 0);
  EXPECT_GT(stats.maps, 0);
  EXPECT_GT(stats.exact_reuses + stats.splits, 0);
  EXPECT_LT(stats.max_internal, 4 * kKiB);
  EXPECT_EQ(stats.bound_breaks, 0);
}

// The runs above are not vacuous: each technique moves or drops tensors and
// lowers the peak below liveness's, and with room to spare the tensor cache
// moves nothing.
TEST_P(ModeTest, TechniquesActUnderTightBudgetsAndNotWithRoom) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto liveness = testing::TrainSynthetic(spec, SmallRun("liveness"));
  ASSERT_TRUE(liveness.ok());
  auto run = [&](const char* mode, bool tight) {
    testing::SyntheticRun r = SmallRun(mode);
    r.memory = Options(spec, mode, tight);
    auto trace = testing::TrainSynthetic(spec, r);
    SPILL_CHECK(trace.ok()) << trace.status().ToString();
    return *trace;
  };
  testing::TrainTrace offload = run("offload", false);
  EXPECT_GT(offload.to_host, 0u);
  EXPECT_EQ(offload.to_host, offload.to_device);
  testing::TrainTrace recompute = run("recompute", false);
  EXPECT_GT(recompute.recomputations, 0);
  testing::TrainTrace both = run("offload_recompute", false);
  EXPECT_GT(both.to_host, 0u);
  EXPECT_GT(both.recomputations, 0);
  testing::TrainTrace roomy = run("superneurons", false);
  EXPECT_EQ(roomy.to_host, 0u);
  EXPECT_EQ(roomy.to_device, 0u);
  EXPECT_EQ(roomy.recomputations, 0);
  EXPECT_EQ(roomy.log.peak, liveness->log.peak);
  // At their smallest budgets the schedulers that swap any tensor move
  // tensors, and the window scheduler runs below liveness's peak.
  for (const char* mode : {"window", "lms"}) EXPECT_GT(run(mode, true).to_host, 0u) << mode;
  EXPECT_LT(run("window", true).log.peak, liveness->log.peak);
  // The planners that search move or drop tensors at their smallest budgets
  // and peak below liveness; memonger drops tensors at any budget.
  for (const char* mode : {"greedy", "search", "dqn"}) {
    const testing::TrainTrace planned = run(mode, true);
    EXPECT_GT(planned.to_host + static_cast<size_t>(planned.recomputations), 0u) << mode;
    EXPECT_LT(planned.log.peak, liveness->log.peak) << mode;
  }
  EXPECT_GT(run("memonger", false).recomputations, 0);
  // At its smallest budget, superneurons peaks at the largest single step's
  // memory (the paper's max(l_i)) on top of the persistent tensors. (With
  // prefetching ahead, tensors also come back into any room left over.)
  auto net = testing::BuildTrainingNet(spec, SmallRun("liveness").batch);
  ASSERT_TRUE(net.ok());
  testing::SyntheticRun r = SmallRun("superneurons");
  ASSERT_TRUE(r.memory.settings.Set("prefetch_ahead", "0").ok());
  r.memory.device_budget = *MinimumBudget((*net)->view(), r.memory, kPoolBlockBytes);
  auto tight_run = testing::TrainSynthetic(spec, r);
  ASSERT_TRUE(tight_run.ok()) << tight_run.status().ToString();
  const testing::TrainTrace& tight = *tight_run;
  // l_i: the step's own tensors and the workspace its algorithms were given.
  const Schedule& schedule = (*net)->schedule();
  size_t l_peak = 0;
  for (int s = 0; s < 2 * (*net)->num_layers(); ++s) {
    const size_t tensors =
        StepBytes(schedule, s) - RoundToBlocks(schedule.steps[s].workspace_bytes);
    l_peak = std::max(l_peak, tensors + RoundToBlocks(tight.log.steps[s].workspace));
  }
  EXPECT_EQ(tight.log.peak, tight.log.persistent + l_peak);
  if (liveness->log.peak > tight.log.persistent + l_peak) {
    EXPECT_GT(tight.to_host + static_cast<size_t>(tight.recomputations), 0u);
  }
  // Streamed steps go below that floor: with memory.chunk auto the smallest
  // budget is under the largest step's memory, and steps run in slices.
  r.memory.batch_chunk = kBatchChunkAuto;
  r.memory.device_budget = *MinimumBudget((*net)->view(), r.memory, kPoolBlockBytes);
  auto streamed = testing::TrainSynthetic(spec, r);
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  EXPECT_LT(streamed->log.peak, tight.log.persistent + l_peak);
  EXPECT_GT(streamed->log.streamed, 0);
}

// Streamed steps keep two slices per staging block (memory.stream_buffers:
// 2, the default) where both fit, and one where they do not: the smallest
// budget is single buffering's, and above it steps double-buffer, training
// the same losses and weights bit for bit.
TEST_P(ModeTest, DoubleBufferedStreamingFallsBackToOneBufferAtTheSmallestBudget) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  testing::SyntheticRun doubled = SmallRun("liveness");
  doubled.batch = 8;
  doubled.memory.batch_chunk = kBatchChunkAuto;
  doubled.memory.record_events = true;
  testing::SyntheticRun single = doubled;
  single.memory.stream_buffers = 1;
  auto net = testing::BuildTrainingNet(spec, doubled.batch);
  ASSERT_TRUE(net.ok());
  auto minimum = MinimumBudget((*net)->view(), doubled.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
  EXPECT_EQ(*minimum, *MinimumBudget((*net)->view(), single.memory, kPoolBlockBytes));
  auto buffers_of = [](const testing::TrainTrace& trace) {
    std::set<int> buffers;
    for (const MemoryEvent& e : trace.events) {
      if (e.slices > 0) buffers.insert(e.buffers);
    }
    return buffers;
  };
  int double_buffered = 0;
  for (double scale : {1.0, 1.05, 1.1, 1.2, 1.3}) {
    // The budget runs (memory/planning/feasibility.h), with the layout of a smaller
    // one where the policy's own does not fit.
    for (testing::SyntheticRun* run : {&doubled, &single}) {
      run->memory.device_budget =
          RoundToBlocks(static_cast<size_t>(scale * static_cast<double>(*minimum)));
      auto runnable = RunnableBudget((*net)->view(), run->memory);
      ASSERT_TRUE(runnable.ok()) << scale << ": " << runnable.status().ToString();
      run->memory.device_budget = *runnable;
    }
    auto a = testing::TrainSynthetic(spec, doubled);
    auto b = testing::TrainSynthetic(spec, single);
    ASSERT_TRUE(b.ok()) << scale << ", single-buffered: " << b.status().ToString();
    ASSERT_TRUE(a.ok()) << scale << ", double-buffered: " << a.status().ToString();
    // The same math; the peaks are each run's own: where its budget has
    // room, double buffering spends it on a second buffer.
    testing::ExpectSameMath(*b, *a, "double-buffered at " + std::to_string(scale));
    if (scale == 1.0) {
      EXPECT_GT(a->log.streamed, 0);
    }
    EXPECT_LE(a->log.peak, doubled.memory.device_budget);
    EXPECT_LE(b->log.peak, single.memory.device_budget);
    const std::set<int> single_buffers = buffers_of(*b);
    EXPECT_TRUE(single_buffers.empty() || single_buffers == std::set<int>{1}) << scale;
    double_buffered += buffers_of(*a).count(2);
  }
  EXPECT_GT(double_buffered, 0);
}

// Inference (the forward pass alone, as eval and predict run it) in every
// mode, at a roomy budget and at the smallest that trains: the scores and
// losses of the baseline bit for bit, the run as PlanInference plans it, and
// never more memory than the training iteration.
TEST_P(ModeTest, InferenceComputesTheBaselinesScoresAsPlanned) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  testing::SyntheticRun baseline = SmallRun("baseline");
  baseline.inference = true;
  auto reference = testing::TrainSynthetic(spec, baseline);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(reference->scores.size(), static_cast<size_t>(baseline.steps));
  for (const char* mode : kModes) {
    for (bool tight : {false, true}) {
      const std::string what = std::string(mode) + (tight ? ", tight" : ", roomy");
      testing::SyntheticRun run = SmallRun(mode);
      run.memory = Options(spec, mode, tight);
      run.memory.record_events = true;
      run.inference = true;
      auto trace = testing::TrainSynthetic(spec, run);
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      EXPECT_TRUE(BitEqual(reference->scores, trace->scores)) << what;
      EXPECT_EQ(reference->losses, trace->losses) << what;
      testing::ExpectRunAsPlanned(spec, run, *trace, what);
      auto net = testing::BuildTrainingNet(spec, run.batch);
      ASSERT_TRUE(net.ok());
      auto training = Plan((*net)->view(), run.memory);
      ASSERT_TRUE(training.ok() && training->fits) << what;
      EXPECT_LE(trace->log.peak, training->peak) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, VariantTest,
                         ::testing::Combine(::testing::ValuesIn(kNetworks),
                                            ::testing::ValuesIn(kVariants)),
                         [](const ::testing::TestParamInfo<std::tuple<Network, Variant>>& i) {
                           return std::string(std::get<0>(i.param).name) + "_" +
                                  std::get<1>(i.param).name;
                         });

// Every small model under every third variant, the thirds rotating with the
// model: each variant meets at least two models with depthwise, grouped or
// per-pixel layers, and each model several allocators and placements, at a
// third of the full product's time.
std::vector<std::tuple<testing::SmallModel, Variant>> SmallModelCases() {
  std::vector<std::tuple<testing::SmallModel, Variant>> cases;
  const size_t models = std::size(testing::kSmallModels), variants = std::size(kVariants);
  for (size_t m = 0; m < models; ++m) {
    for (size_t v = 0; v < variants; ++v) {
      if ((m + v) % 3 == 0) cases.emplace_back(testing::kSmallModels[m], kVariants[v]);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Models, SmallModelTest, ::testing::ValuesIn(SmallModelCases()),
    [](const ::testing::TestParamInfo<std::tuple<testing::SmallModel, Variant>>& i) {
      return std::string(std::get<0>(i.param).name) + "_" + std::get<1>(i.param).name;
    });

INSTANTIATE_TEST_SUITE_P(Networks, ModeTest, ::testing::ValuesIn(kNetworks),
                         [](const ::testing::TestParamInfo<Network>& i) {
                           return std::string(i.param.name);
                         });

// A linear network (SuperNeurons §3.2): liveness keeps every forward output
// that backward needs - here all but fc3's, which only the loss's forward
// reads - and the peak comes at the first backward step, with
// sum(l_f) + l_b(N) on top of the persistent tensors. The widths make later
// backward steps smaller, as the paper's analysis assumes.
TEST(LivenessTest, LinearNetworkPeaksAtSumOfForwardPlusLastBackward) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [4, 16, 16]}
  - {name: fc1, type: fully_connected, outputs: 256}
  - {name: fc2, type: fully_connected, outputs: 128}
  - {name: fc3, type: fully_connected, outputs: 256}
  - {name: loss, type: softmax_loss}
)"),
                        {8, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  const TensorId fc3 = s.layers[(*net)->FindLayer("fc3")].outputs[0];
  size_t persistent = 0, forward = 0;
  for (TensorId id = 0; id < static_cast<TensorId>(s.tensors.size()); ++id) {
    const TensorInfo& t = s.tensors[id];
    size_t b = RoundToBlocks(t.bytes);
    if (!IsTransient(t.kind))
      persistent += b;
    else if (t.kind == TensorKind::kActivation && id != fc3)
      forward += b;
  }
  // l_b(N): what the loss layer's backward creates, the gradient of fc3.
  const Step& first_backward = s.steps[s.num_layers()];
  size_t last_backward = 0;
  for (TensorId t : first_backward.writes) last_backward += RoundToBlocks(s.tensors[t].bytes);
  EXPECT_EQ(last_backward, RoundToBlocks(s.tensors[fc3].bytes));
  MemoryOptions options;
  options.device_budget = kUnlimitedBudget;
  auto plan = Plan((*net)->view(), options);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->peak, persistent + forward + last_backward);
  // Reached at the first backward step (the loss's forward ties with it:
  // there fc3's output holds the place its gradient takes next).
  EXPECT_EQ(plan->log.steps[s.num_layers()].peak, plan->peak);
  // Baseline: every tensor of the iteration at once.
  ASSERT_TRUE(ApplyMemoryMode("baseline", &options).ok());
  auto baseline = Plan((*net)->view(), options);
  size_t all = 0;
  for (const TensorInfo& t : s.tensors) all += RoundToBlocks(t.bytes);
  EXPECT_EQ(baseline->peak, all);
}

TEST(LivenessTest, InAndOutSetsOfAFan) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 4, 4]}
  - {name: a, type: convolution, filters: 1, kernel: 1}
  - {name: b, type: relu, inputs: [a]}
  - {name: c, type: relu, inputs: [a]}
  - {name: j, type: add, inputs: [b, c]}
  - {name: fc, type: fully_connected, outputs: 2}
  - {name: loss, type: softmax_loss}
)"),
                        {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  Liveness eval = AnalyzeLiveness(s, Phase::kEval);
  auto name = [&](const std::vector<TensorId>& ids) {
    std::vector<std::string> out;
    for (TensorId id : ids) out.push_back(s.tensors[id].name);
    return out;
  };
  // In evaluation, a dies once both of its readers b and c have run.
  EXPECT_EQ(name(eval.OutSet(s.forward_step[(*net)->FindLayer("b")])),
            (std::vector<std::string>{"data:1", "a", "b"}));
  EXPECT_EQ(name(eval.OutSet(s.forward_step[(*net)->FindLayer("c")])),
            (std::vector<std::string>{"data:1", "b", "c"}));
  // In training, a's gradient is born in c's backward (c comes first in
  // reverse), receives b's contribution and dies after a's backward.
  Liveness train = AnalyzeLiveness(s, Phase::kTrain);
  TensorId grad = s.layers[(*net)->FindLayer("a")].output_grads[0];
  EXPECT_EQ(train.first_use[grad], s.backward_step[(*net)->FindLayer("c")]);
  EXPECT_EQ(train.last_use[grad], s.backward_step[(*net)->FindLayer("a")]);
  // a itself is not needed by any backward step (relu reads its output,
  // convolution its input), so it dies in the forward pass.
  TensorId a = s.layers[(*net)->FindLayer("a")].outputs[0];
  EXPECT_EQ(train.last_use[a], s.forward_step[(*net)->FindLayer("c")]);
}

// Memonger drops AlexNet's first maps; at its smallest budget with slices of
// the batch, norm1's backward reads relu1, whose rebuild streams and first
// rebuilds conv1, which cannot stream there (its workspace does not fit). A
// rebuild that cannot run leaves the tensor it was to write dropped, so that
// relu1's rebuild rebuilds conv1 in turn instead of streaming in a host block
// nobody wrote: the run trains the baseline's weights bit for bit, as planned.
TEST(StreamedRebuildTest, ARebuildThatCannotStreamLeavesItsTensorDropped) {
  const NetSpec spec = testing::MustParse(testing::kAlexNet);
  testing::SyntheticRun reference = SmallRun("baseline");
  reference.batch = 4;
  auto baseline = testing::TrainSynthetic(spec, reference);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  auto net = testing::BuildTrainingNet(spec, reference.batch);
  ASSERT_TRUE(net.ok());
  for (int64_t chunk : {2, 3}) {
    for (int buffers : {1, 2}) {
      const std::string what = "memonger, slices of " + std::to_string(chunk) + ", " +
                               std::to_string(buffers) + " buffers";
      testing::SyntheticRun run = SmallRun("memonger");
      run.batch = reference.batch;
      run.memory.batch_chunk = chunk;
      run.memory.stream_buffers = buffers;
      run.memory.record_events = true;
      auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
      ASSERT_TRUE(minimum.ok()) << what << ": " << minimum.status().ToString();
      run.memory.device_budget = *minimum;
      auto trace = testing::TrainSynthetic(spec, run);
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      EXPECT_GT(trace->recomputations, 0) << what;
      ExpectBitIdentical(*baseline, *trace, what);
      ExpectRunAsPlanned(spec, run, *trace, what);
    }
  }
}

TEST(OutOfMemoryTest, ReportNamesStepLiveTensorsAndTheSmallestBudget) {
  NetSpec spec = testing::MustParse(testing::kResNet);
  testing::SyntheticRun run = SmallRun("liveness");
  auto net = testing::BuildTrainingNet(spec, run.batch);
  ASSERT_TRUE(net.ok());
  auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
  // One block short of the minimum fails; the minimum itself trains.
  run.memory.device_budget = *minimum - kPoolBlockBytes;
  auto too_small = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.status().code(), StatusCode::kOutOfMemory);
  Status report = ExplainOutOfMemory(too_small.status(), (*net)->view(), run.memory);
  EXPECT_THAT(report.message(), HasSubstr("at step "));
  EXPECT_THAT(report.message(), HasSubstr("transient tensors live"));
  EXPECT_THAT(report.message(), HasSubstr("needs a device budget of at least"));
  run.memory.device_budget = *minimum;
  auto enough = testing::TrainSynthetic(spec, run);
  EXPECT_TRUE(enough.ok()) << enough.status().ToString();
}

TEST(OutOfMemoryTest, ParametersThatDoNotFitAreReportedAtCreation) {
  NetSpec spec = testing::MustParse(testing::kLeNet);
  testing::SyntheticRun run = SmallRun("liveness");
  run.memory.device_budget = 2 * kPoolBlockBytes;
  auto result = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(result.status().message(), HasSubstr("while allocating parameters"));
}

// The profile-guided static allocator (DSA) on the model zoo at the paper's
// sizes, liveness without compaction: its footprint stays within 2% of the
// max load, the bound no placement can beat, while first fit and best fit
// only come close by luck.
TEST(StaticAllocationTest, FootprintWithinTwoPercentOfMaxLoadOnTheZoo) {
  struct Case {
    const char* file;
    int64_t batch;
  };
  for (const Case& c : {Case{"alexnet.yaml", 200}, Case{"resnet50.yaml", 32},
                        Case{"inception_v4.yaml", 32}, Case{"densenet121.yaml", 32}}) {
    auto spec = LoadNetFile(std::string("models/") + c.file);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto net = Net::Build(*spec, {c.batch, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    MemoryOptions options;
    options.device_budget = kUnlimitedBudget;
    options.compact = false;
    options.allocator = "static";
    auto plan = Plan((*net)->view(), options);
    ASSERT_TRUE(plan.ok() && plan->fits) << c.file;
    EXPECT_EQ(plan->mismatches, 0) << c.file;
    EXPECT_GE(plan->footprint, plan->peak) << c.file;
    EXPECT_LE(plan->footprint, plan->peak + plan->peak / 50) << c.file;
  }
}

// The network the GPU equivalence tests train, built for the CUDA device,
// with their settings: its convolutions' workspaces and estimated times
// steer the cost-aware planners to plans of their own. At the smallest
// budgets the static allocator's first placement does not fit, and it
// profiles the iteration again at a lower budget - running the plans the
// runtime made for the device budget, so that the iteration is still served
// as profiled. Planned from shapes, this needs no GPU - only the CUDA
// layers, which --config=cuda builds link.
TEST(StaticAllocationTest, CudaNetworkIsServedAsProfiledAtItsSmallestBudgets) {
  const std::vector<std::string> cuda = LayerRegistry::Get().Types(DeviceType::kCuda);
  if (std::find(cuda.begin(), cuda.end(), "convolution") ==
      cuda.end()) {  // input's is always there
    GTEST_SKIP() << "this build has no CUDA layers (they come with --config=cuda)";
  }
  NetSpec spec = testing::MustParse(testing::kResNet);
  auto net = testing::BuildTrainingNet(spec, 4, DeviceType::kCuda);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  for (const char* mode : {"greedy", "memonger", "superneurons"}) {
    MemoryOptions options;
    ASSERT_TRUE(ApplyMemoryMode(mode, &options).ok());
    options.allocator = "static";
    options.host_budget = 64 * kMiB;
    options.workspace = *ParseWorkspacePolicy("pin:cudnn_fwd_implicit_gemm");
    ASSERT_TRUE(options.settings.Set("min_offload", "0").ok());
    ASSERT_TRUE(options.settings.Set("va_chunk", "2MiB").ok());
    auto minimum = MinimumBudget((*net)->view(), options, kPoolBlockBytes);
    ASSERT_TRUE(minimum.ok()) << mode << ": " << minimum.status().ToString();
    options.device_budget = *minimum;
    auto plan = Plan((*net)->view(), options);
    ASSERT_TRUE(plan.ok() && plan->fits) << mode;
    EXPECT_EQ(plan->mismatches, 0) << mode << " at " << *minimum << " bytes";
  }
}

// The models mobile and modern networks brought plan at their full size in
// every memory mode: with room to spare, and at the smallest budget that
// runs, which is below the plain run's peak.
TEST(ModelPlanTest, EveryNewModelPlansInEveryMode) {
  constexpr int64_t kBatch = 8;
  for (const char* file :
       {"mobilenet_v2.yaml", "mobilenet_v3_small.yaml", "efficientnet_b0.yaml",
        "shufflenet_v2.yaml", "regnet_y_400mf.yaml", "convnext_tiny.yaml", "unet.yaml"}) {
    auto spec = LoadNetFile(std::string("models/") + file);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto net = Net::Build(*spec, {kBatch, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    size_t baseline_peak = 0;
    for (const char* mode : kModes) {
      // A searching planner trains or searches anew at every budget the
      // minimum search probes: at full size that is far past this test's
      // time; planners_test and the small models above cover those modes.
      if (Searches(mode)) continue;
      MemoryOptions options;
      ASSERT_TRUE(ApplyMemoryMode(mode, &options).ok());
      options.device_budget = kUnlimitedBudget;
      options.host_budget = kUnlimitedBudget;
      auto roomy = Plan((*net)->view(), options);
      ASSERT_TRUE(roomy.ok() && roomy->fits) << file << " " << mode;
      if (std::string(mode) == "baseline") baseline_peak = roomy->peak;
      auto minimum = MinimumBudget((*net)->view(), options, kPoolBlockBytes);
      ASSERT_TRUE(minimum.ok()) << file << " " << mode << ": " << minimum.status().ToString();
      options.device_budget = *minimum;
      auto tight = Plan((*net)->view(), options);
      ASSERT_TRUE(tight.ok() && tight->fits) << file << " " << mode;
      EXPECT_LE(tight->peak, baseline_peak) << file << " " << mode;
    }
  }
}

class NoCompute : public StepRunner {
 public:
  Status Recompute(int) override { return Status::Ok(); }
};

// Window scheduling of ResNet-50 at 224x224, batch 32, in 1 GiB - well
// below its 2.74 GiB liveness peak: best fit without compaction runs out of
// holes, virtual addressing does not. Under va, each request wastes less
// than a chunk (Eq. 1) and at every moment the mapped footprint stays
// within live bytes + live requests x chunk (Eq. 2); the footprint is
// within the budget.
TEST(WindowVaTest, VirtualAddressingRemovesFragmentationWithinItsBounds) {
  auto spec = LoadNetFile("models/resnet50.yaml", {{"size", YAML::Load("224")}});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {32, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("window", &options).ok());
  options.device_budget = kGiB;
  options.host_budget = 64 * kGiB;
  options.compact = false;
  options.allocator = "best_fit";
  auto best_fit = Plan((*net)->view(), options);
  ASSERT_TRUE(best_fit.ok());
  EXPECT_FALSE(best_fit->fits);
  options.allocator = "va";
  for (size_t chunk : {64 * kKiB, 2 * kMiB}) {
    ASSERT_TRUE(options.settings.Set("va_chunk", std::to_string(chunk)).ok());
    auto runtime = MemoryRuntime::Create((*net)->view(), options, nullptr);
    ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
    const auto& va = dynamic_cast<const VirtualAddressAllocator&>((*runtime)->allocator());
    NoCompute runner;
    for (int iteration = 0; iteration < 2; ++iteration) {
      ASSERT_TRUE((*runtime)->BeginIteration(Phase::kTrain).ok());
      for (const Step& step : (*net)->schedule().steps) {
        ASSERT_TRUE((*runtime)->PrepareStep(step, runner).ok()) << chunk << " " << step.index;
        const VaStats& s = va.va_stats();
        EXPECT_LE(s.held * chunk, s.live_bytes + s.live_requests * chunk) << step.index;
        (*runtime)->FinishStep(step);
      }
      ASSERT_TRUE((*runtime)->EndIteration().ok());
    }
    EXPECT_LT(va.va_stats().max_internal, chunk);
    EXPECT_EQ(va.va_stats().bound_breaks, 0);
    EXPECT_LE(va.PeakFootprint(), options.device_budget);
    EXPECT_GT((*runtime)->residency().counters().to_host_bytes, 0u);
  }
}

}  // namespace
}  // namespace spill
