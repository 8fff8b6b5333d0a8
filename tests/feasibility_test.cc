// More memory never fails (memory/planning/feasibility.h): for every memory mode and
// every allocator, on the test networks and on ResNet-50 at batch 32, 40
// budgets from the minimum to twice it all run - the policy's own plan, or
// a smaller budget's layout inside the budget - with a footprint within the
// budget. Plans only: tests/memory_test.cc shows that plans equal runs.
//
// The planners that search plan anew at every budget: greedy and memonger
// in milliseconds, so on every network; the learned and the exact planner
// train or solve at each budget the minimum search and the sweep probe, so
// they run on the test networks, briefly trained (as memory_test trains
// them) and with CBC given a second per limit. The searching planners sweep
// 16 budgets over the same range, from a minimum found to 0.5 %.
#include "memory/planning/feasibility.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "framework/graph/net.h"
#include "layers/cpu/conv_timer.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

constexpr int kBudgets = 40;        // from the minimum to twice it, both ends included
constexpr int kSearchBudgets = 16;  // the same range, for the planners that search
// Costly modes (memory/memory_options.h) train or solve a program per
// budget: seconds a budget on ResNet-50 (minutes for the learned planner),
// milliseconds on the test networks with their quick settings.
bool Costly(const std::string& mode) { return FindMemoryMode(mode)->costly; }
int Budgets(const std::string& mode) {
  return FindMemoryMode(mode)->searches ? kSearchBudgets : kBudgets;
}

// The minimum search's resolution: MinimumBudget's own (0.01 %) for the
// heuristics; for the planners that search, 0.5 % of the footprint without
// a limit - half the probes, each a search.
size_t Resolution(const NetworkView& view, MemoryOptions options, const std::string& mode) {
  if (!FindMemoryMode(mode)->searches) return 0;
  options.device_budget = kUnlimitedBudget;
  auto roomy = Plan(view, options);
  SPILL_CHECK(roomy.ok()) << roomy.status().ToString();
  return std::max<size_t>(kPoolBlockBytes, roomy->footprint / 200);
}

// Settings that make a costly planner quick on the test networks, each set
// where the mode reads it.
const std::pair<const char*, const char*> kQuickSettings[] = {{"planner.episodes", "12"},
                                                              {"planner.embedding", "8"},
                                                              {"planner.milp_seconds", "1"},
                                                              {"planner.evaluations", "200"}};

struct Case {
  std::string network;  // a test network's name, or "resnet50"
  std::string mode;
  std::string allocator;
};

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.network + "_" + info.param.mode + "_" + info.param.allocator;
}

std::vector<Case> Cases() {
  std::vector<std::string> networks = {"resnet50"};
  for (const testing::Network& n : testing::kNetworks) networks.push_back(n.name);
  std::vector<Case> cases;
  for (const std::string& network : networks) {
    for (const std::string& mode : MemoryModeNames()) {
      if (network == "resnet50" && Costly(mode)) continue;
      for (const std::string& allocator : AllocatorNames()) {
        cases.push_back({network, mode, allocator});
      }
    }
  }
  return cases;
}

// The test networks with their solver state at batch 3, as memory_test
// trains them; ResNet-50 as `plan --config models/resnet50.yaml --batch 32`.
std::unique_ptr<Net> Build(const std::string& network) {
  if (network == "resnet50") {
    auto spec = LoadNetFile("models/resnet50.yaml", {});
    SPILL_CHECK(spec.ok()) << spec.status().ToString();
    auto net = Net::Build(*spec, {32, DeviceType::kCpu});
    SPILL_CHECK(net.ok()) << net.status().ToString();
    return std::move(net).value();
  }
  for (const testing::Network& n : testing::kNetworks) {
    if (network != n.name) continue;
    auto net = testing::BuildTrainingNet(testing::MustParse(n.yaml), 3);
    SPILL_CHECK(net.ok()) << net.status().ToString();
    return std::move(net).value();
  }
  SPILL_CHECK(false) << network;
  return nullptr;
}

class FeasibilityTest : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() { cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""}); }
};

TEST_P(FeasibilityTest, EveryBudgetFromTheMinimumToTwiceItRuns) {
  const Case& c = GetParam();
  const std::unique_ptr<Net> net = Build(c.network);
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode(c.mode, &options).ok());
  options.allocator = c.allocator;
  options.host_budget = kUnlimitedBudget;
  // The test networks' maps are a few KiB: offload them and place them by
  // mobility all the same, as memory_test does.
  if (c.network != "resnet50") {
    ASSERT_TRUE(options.settings.Set("min_offload", "0").ok());
  }
  for (const auto& [key, value] : kQuickSettings) {
    if (ReadsKey(options, key)) {
      ASSERT_TRUE(options.settings.Set(key, value).ok()) << key;
    }
  }
  ASSERT_TRUE(options.Validate().ok()) << options.Validate().ToString();
  auto minimum = MinimumBudget(net->view(), options, Resolution(net->view(), options, c.mode));
  ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
  int own = 0, fallbacks = 0;
  const int budgets = Budgets(c.mode);
  for (int i = 0; i < budgets; ++i) {
    const size_t budget = *minimum + *minimum * i / (budgets - 1);
    options.device_budget = budget;
    auto runnable = PlanRunnable(net->view(), options, *minimum);
    ASSERT_TRUE(runnable.ok()) << budget << ": " << runnable.status().ToString();
    ASSERT_TRUE(runnable->plan.fits) << "budget " << budget << " (" << 1.0 * budget / *minimum
                                     << "x the minimum): " << runnable->plan.failure;
    EXPECT_LE(runnable->plan.footprint, budget);
    EXPECT_LE(runnable->layout_budget, budget);
    EXPECT_GE(runnable->layout_budget, *minimum);
    (runnable->fallback() ? fallbacks : own)++;
  }
  std::printf("%s %s %s: minimum %zu; %d budgets up to 2x: %d own plans, %d fallbacks\n",
              c.network.c_str(), c.mode.c_str(), c.allocator.c_str(), *minimum, budgets, own,
              fallbacks);
}

INSTANTIATE_TEST_SUITE_P(EveryModeAndAllocator, FeasibilityTest, ::testing::ValuesIn(Cases()),
                         Name);

// The budgets found not to fit before the fallback existed.
TEST(FeasibilityReproducersTest, ResNet50AboveItsMinimum) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  const std::unique_ptr<Net> net = Build("resnet50");
  struct Reproducer {
    const char* mode;
    const char* allocator;  // "" = the mode's
    double factor;
  };
  for (const Reproducer& r :
       {Reproducer{"dymem", "", 1.033}, Reproducer{"dymem", "", 1.05},
        Reproducer{"superneurons", "static", 1.05}, Reproducer{"superneurons", "static", 1.883}}) {
    MemoryOptions options;
    ASSERT_TRUE(ApplyMemoryMode(r.mode, &options).ok());
    if (*r.allocator) options.allocator = r.allocator;
    auto minimum = MinimumBudget(net->view(), options);
    ASSERT_TRUE(minimum.ok());
    options.device_budget = static_cast<size_t>(r.factor * *minimum);
    auto runnable = PlanRunnable(net->view(), options);
    ASSERT_TRUE(runnable.ok()) << runnable.status().ToString();
    EXPECT_TRUE(runnable->plan.fits)
        << r.mode << " " << r.allocator << " at " << r.factor << "x: " << runnable->plan.failure;
    EXPECT_LE(runnable->plan.footprint, options.device_budget);
    std::printf("%s %s at %.3fx the minimum (%zu): %s\n", r.mode, r.allocator, r.factor, *minimum,
                runnable->fallback() ? DescribeFallback(*runnable).c_str() : "its own plan");
  }
}

}  // namespace
}  // namespace spill
