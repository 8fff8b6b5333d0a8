// Deep chains: networks of thousands of cheap layers, where anything
// recursive overflows the stack and anything quadratic takes minutes.
//
// A chain of 10,000 ReLUs behind a convolution (so that backward runs
// through every ReLU) plans and trains under recompute and
// offload_recompute: the rebuilds walk the dropped chain on an explicit
// stack, and the long memory-centric segment is cut into speed-centric runs
// (recomputations linear in depth, memory about 2 sqrt(n) tensors instead of
// n). The chain of the depth benchmark (tools/bench/RESULTS.md) plans in
// every mode with GTBM's footprint within twice the max load. Nothing here
// measures time: the suite runs this test again beside a load on every core
// (deep_chain_loaded_test.sh).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "memory/planning/planner.h"
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

// Every mode plans the chain of the depth benchmark at two depths, and the
// allocator's footprint stays within twice the max load (GTBM's sizing
// reuses the space freed by earlier tensors). How planning time grows with
// depth is measured by tools/bench/bench_depth (tools/bench/RESULTS.md,
// "Planning time against depth"), not asserted here: a time ratio depends
// on what else the machine runs.
TEST(DeepChainTest, EveryModePlansTheDepthBenchmarksChainAndGtbmReusesFreedSpace) {
  constexpr int kShallow = 2500, kFactor = 8;
  for (const std::string& mode : MemoryModeNames()) {
    if (mode == "baseline") continue;  // nothing is freed: its footprint is the chain
    for (int depth : {kShallow, kShallow * kFactor}) {
      auto net = testing::BuildTrainingNet(testing::MustParse(ReluChainYaml(depth)), 32);
      ASSERT_TRUE(net.ok()) << net.status().ToString();
      auto plan = Plan((*net)->view(), Mode(mode));
      ASSERT_TRUE(plan.ok()) << mode << ": " << plan.status().ToString();
      ASSERT_TRUE(plan->fits) << mode << " at " << depth << ": " << plan->failure;
      EXPECT_LE(plan->footprint, 2 * plan->peak)
          << mode << " at " << depth << ": footprint " << plan->footprint << " for a max load of "
          << plan->peak;
    }
  }
}

}  // namespace
}  // namespace spill
