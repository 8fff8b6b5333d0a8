// Deep chains: networks of thousands of cheap layers, where anything
// recursive overflows the stack and anything quadratic takes minutes.
//
// A chain of 10,000 ReLUs behind a convolution (so that backward runs
// through every ReLU) plans and trains under recompute and
// offload_recompute: the rebuilds walk the dropped chain on an explicit
// stack, and the long memory-centric segment is cut into speed-centric runs
// (recomputations linear in depth, memory about 2 sqrt(n) tensors instead of
// n). The chain of the depth benchmark (tools/bench/RESULTS.md) plans in
// every mode with GTBM's footprint within twice the max load, and planning
// time grows linearly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>

#include "memory/planner.h"
#include "tests/testing/net_harness.h"
#include "tools/bench/relu_chain.h"

namespace spill {
namespace {

// `n` ReLUs after a convolution: backward runs through every one, and each
// output is droppable (cheap) and needed by its own backward.
std::string TrainedChain(int n) {
  return ReluChainYaml(n, /*classes=*/4, /*convolution_first=*/true);
}

MemoryOptions Mode(const std::string& mode) {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
  options.device_budget = kUnlimitedBudget;
  return options;
}

constexpr int kDeep = 10000;
constexpr size_t kTrainingBudget = 256 * kMiB;

TEST(DeepChainTest, RecomputationPlansAreLinearAndSaveMemory) {
  auto net = testing::BuildTrainingNet(testing::MustParse(TrainedChain(kDeep)), 32);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto liveness = Plan((*net)->view(), Mode("liveness"));
  ASSERT_TRUE(liveness.ok() && liveness->fits);
  for (const char* mode : {"recompute", "offload_recompute"}) {
    auto plan = Plan((*net)->view(), Mode(mode));
    ASSERT_TRUE(plan.ok()) << mode << ": " << plan.status().ToString();
    ASSERT_TRUE(plan->fits) << mode << ": " << plan->failure;
    // Each ReLU rebuilt about once (memory-centric rebuilding gave n^2 / 2).
    EXPECT_LE(plan->recomputations, 2 * kDeep) << mode;
    EXPECT_GT(plan->recomputations, kDeep / 2) << mode;
    // The chain's 10,000 activations are not all live at once.
    EXPECT_LT(plan->peak * 10, liveness->peak) << mode;
  }
}

TEST(DeepChainTest, TenThousandLayersTrainUnderRecomputationBitIdentically) {
  const NetSpec spec = testing::MustParse(TrainedChain(kDeep));
  testing::SyntheticRun run;
  run.steps = 2;
  run.memory = Mode("liveness");
  run.memory.device_budget = kTrainingBudget;
  auto baseline = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  for (const char* mode : {"recompute", "offload_recompute"}) {
    run.memory = Mode(mode);
    run.memory.device_budget = kTrainingBudget;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << mode << ": " << trace.status().ToString();
    EXPECT_EQ(trace->losses, baseline->losses) << mode;
    EXPECT_EQ(trace->params, baseline->params) << mode;
    EXPECT_GT(trace->recomputations, 0) << mode;
  }
}

// Per mode, the process time of a plan of the chain at `n` layers.
double PlanSeconds(const std::string& mode, int n, MemoryPlan* out) {
  auto net = testing::BuildTrainingNet(testing::MustParse(ReluChainYaml(n)), 32);
  SPILL_CHECK(net.ok()) << net.status().ToString();
  const std::clock_t start = std::clock();
  auto plan = Plan((*net)->view(), Mode(mode));
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  SPILL_CHECK(plan.ok()) << plan.status().ToString();
  *out = *plan;
  return seconds;
}

// Eight times the depth costs about eight times the planning time, not 64
// (the dymem schedule's window scan and GTBM's sizing were quadratic).
// Process time, so that other work on the machine does not count; the bound
// leaves room for cache and heap effects (a plan's data outgrows the caches
// between these depths).
TEST(DeepChainTest, PlanningTimeIsLinearInDepthAndGtbmReusesFreedSpace) {
  constexpr int kShallow = 2500, kFactor = 8;
  constexpr double kMaxRatio = 3.0 * kFactor;
  for (const std::string& mode : MemoryModeNames()) {
    if (mode == "baseline") continue;  // nothing is freed: its footprint is the chain
    MemoryPlan shallow, deep;
    const double t1 = PlanSeconds(mode, kShallow, &shallow);
    const double t2 = PlanSeconds(mode, kShallow * kFactor, &deep);
    ASSERT_TRUE(shallow.fits && deep.fits) << mode;
    std::printf("%s: %.3f s at %d layers, %.3f s at %d\n", mode.c_str(), t1, kShallow, t2,
                kShallow * kFactor);
    EXPECT_LT(t2, kMaxRatio * std::max(t1, 0.01)) << mode << ": " << t1 << " s, then " << t2;
    EXPECT_LE(deep.footprint, 2 * deep.peak)
        << mode << ": footprint " << deep.footprint << " for a max load of " << deep.peak;
  }
}

}  // namespace
}  // namespace spill
