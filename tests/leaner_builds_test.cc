// The default never reaches less: where the plan of the default workspace
// policy (dynamic, with blocked layouts where the CPU computes in them) does
// not fit, the programs plan and train leaner builds of the same network -
// every layout plain, then the algorithms of least workspace
// (tools/common/net_options.h) - so for every memory mode (the searching
// planners briefly; the exact program, milp, left out for its solve time)
// the largest batch under the default is at least memory_optimal's, and
// where everything fits nothing changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "memory/memory_options.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tools/common/net_options.h"
#include "tools/planning/experiments.h"

namespace spill {
namespace {

constexpr int64_t kBatchLimit = 512;  // the searches stop here
constexpr int64_t kProbeBatch = 8;    // the budget: liveness's peak at this batch

ExperimentOptions Options(const std::string& mode, size_t budget, const std::string& workspace) {
  ExperimentOptions o;
  o.device = "cpu";
  EXPECT_TRUE(ApplyMemoryMode(mode, &o.memory).ok()) << mode;
  o.memory.device_budget = budget;
  o.memory.host_budget = size_t{1} << 30;
  auto policy = ParseWorkspacePolicy(workspace);
  EXPECT_TRUE(policy.ok());
  o.memory.workspace = *policy;
  // The searching planners, briefly (as the memory tests run them).
  if (FindMemoryMode(mode)->searches) {
    EXPECT_TRUE(o.memory.settings.Set("planner.episodes", "12").ok());
    EXPECT_TRUE(o.memory.settings.Set("planner.embedding", "8").ok());
    EXPECT_TRUE(o.memory.settings.Set("planner.evaluations", "300").ok());
  }
  return o;
}

NetSpec Network(const std::string& name) {
  for (const testing::Network& n : testing::kNetworks) {
    if (name == n.name) return testing::MustParse(n.yaml);
  }
  ADD_FAILURE() << "no test network " << name;
  return NetSpec();
}

int64_t Reach(const NetSpec& spec, const ExperimentOptions& o) {
  int probes = 0;
  auto reach = LargestFitting(
      1, kBatchLimit, [&](int64_t batch) { return PlanProbe(spec, batch, o); }, &probes);
  EXPECT_TRUE(reach.ok()) << reach.status().ToString();
  return reach.ok() ? *reach : -1;
}

TEST(LeanerBuildsTest, TheDefaultReachesAtLeastAsFarAsMemoryOptimalInEveryMode) {
  for (const char* name : {"blocked", "resnet", "alexnet", "inception"}) {
    const NetSpec spec = Network(name);
    auto roomy = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "dynamic"));
    ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
    const size_t budget = roomy->plan.peak;
    for (const MemoryMode& mode : MemoryModes()) {
      // The exact program solves for seconds per plan: the others only.
      if (std::string(mode.name) == "milp") continue;
      const int64_t reach = Reach(spec, Options(mode.name, budget, "dynamic"));
      const int64_t optimal = Reach(spec, Options(mode.name, budget, "memory_optimal"));
      EXPECT_GE(reach, optimal) << name << " under " << mode.name;
      EXPECT_GE(reach, 1) << name << " under " << mode.name;
    }
  }
}

// Where the default's own plan fits, it is the one used.
TEST(LeanerBuildsTest, ARoomyBudgetKeepsTheDefault) {
  const NetSpec spec = Network("blocked");
  auto probe = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "dynamic"));
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe->fits);
  EXPECT_TRUE(probe->leaner.empty()) << probe->leaner;
}

// Just below what the default needs, a leaner build runs where one exists.
TEST(LeanerBuildsTest, BelowTheDefaultsPeakALeanerBuildIsPlannedAndSaid) {
  const NetSpec spec = Network("blocked");
  auto roomy = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "dynamic"));
  auto lean = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "memory_optimal"));
  ASSERT_TRUE(roomy.ok() && lean.ok());
  if (lean->plan.peak >= roomy->plan.peak) {
    GTEST_SKIP() << "memory_optimal needs no less than the default here (" << lean->plan.peak
                 << " >= " << roomy->plan.peak << " bytes)";
  }
  auto probe = PlanProbe(spec, kProbeBatch, Options("liveness", lean->plan.peak, "dynamic"));
  ASSERT_TRUE(probe.ok());
  EXPECT_TRUE(probe->fits);
  EXPECT_FALSE(probe->leaner.empty());
  EXPECT_TRUE(probe->plain_layouts);
}

// The GPT of the memory tests with both attention layers of algorithm auto.
NetSpec AutoGpt() {
  std::string yaml = testing::kGpt;
  for (const char* from : {"causal: true, algorithm: naive}", "causal: true}"}) {
    const size_t at = yaml.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    yaml.replace(at, std::string(from).size(), "causal: true, algorithm: auto}");
  }
  return testing::MustParse(yaml);
}

// A network built with attention of algorithm auto computes the algorithm
// its options choose, and its specs say which.
TEST(LeanerBuildsTest, AttentionOfAlgorithmAutoIsBuiltAsTheOptionsChoose) {
  const NetSpec spec = AutoGpt();
  for (bool tiled : {false, true}) {
    NetOptions options{2, DeviceType::kCpu};
    options.tiled_attention = tiled;
    auto net = Net::Build(spec, options);
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    EXPECT_TRUE((*net)->chooses_attention());
    for (const char* name : {"attn", "attn2"}) {
      const int id = (*net)->FindLayer(name);
      ASSERT_GE(id, 0);
      EXPECT_EQ((*net)->spec(id).params["algorithm"].as<std::string>(), tiled ? "tiled" : "naive");
    }
  }
  auto fixed = Net::Build(Network("gpt"), NetOptions{2, DeviceType::kCpu});
  ASSERT_TRUE(fixed.ok());
  EXPECT_FALSE((*fixed)->chooses_attention());
}

// Attention of algorithm auto keeps the probabilities (naive) where the
// plan fits and its row statistics (tiled) where only that fits; under
// memory_optimal it keeps the row statistics always.
TEST(LeanerBuildsTest, AttentionOfAlgorithmAutoKeepsTheProbabilitiesUntilTheyDoNotFit) {
  const NetSpec spec = AutoGpt();
  auto roomy = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "dynamic"));
  auto least = PlanProbe(spec, kProbeBatch, Options("liveness", size_t{1} << 40, "memory_optimal"));
  ASSERT_TRUE(roomy.ok() && least.ok());
  EXPECT_TRUE(roomy->leaner.empty()) << roomy->leaner;
  EXPECT_FALSE(roomy->tiled_attention);
  ASSERT_LT(least->plan.peak, roomy->plan.peak);
  auto tight = PlanProbe(spec, kProbeBatch, Options("liveness", least->plan.peak, "dynamic"));
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  EXPECT_TRUE(tight->fits);
  EXPECT_TRUE(tight->tiled_attention);
  EXPECT_THAT(tight->leaner, ::testing::HasSubstr("attention of algorithm auto keeping 2 floats "
                                                  "per query (tiled)"));
  // The search for the largest batch goes as far as memory_optimal's.
  const int64_t reach = Reach(spec, Options("liveness", least->plan.peak, "dynamic"));
  const int64_t optimal = Reach(spec, Options("liveness", least->plan.peak, "memory_optimal"));
  EXPECT_GE(reach, optimal);
  EXPECT_GE(reach, kProbeBatch);
}

}  // namespace
}  // namespace spill
