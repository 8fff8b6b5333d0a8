// Parameters, their gradients and solver state away from the device
// (memory.params), updated where they live (memory.update), and host memory
// backed by a file (memory.host_tier). The equivalence tests of
// memory_test.cc run every mode with parameters in host memory; these check
// that the policies act as they say and that the file tier holds more than
// the RAM tier allows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/transfer_plan.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

testing::SyntheticRun MakeRun(const std::string& mode, const std::string& params,
                              bool update_on_host) {
  testing::SyntheticRun run = testing::SmallMemoryRun(mode);
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  run.memory.params = *ParseParamPlacement(params);
  run.memory.update_on_host = update_on_host;
  run.memory.record_events = true;
  return run;
}

// The bytes `options` keeps in host memory between uses.
size_t HostHomeBytes(const Schedule& s, const MemoryOptions& options) {
  size_t bytes = 0;
  for (TensorId t = 0; t < static_cast<TensorId>(s.tensors.size()); ++t) {
    if (HomeOnHost(s, options, t)) bytes += RoundToBlocks(s.tensors[t].bytes);
  }
  return bytes;
}

size_t GradientBytes(const Schedule& s) {
  size_t bytes = 0;
  for (const TensorInfo& t : s.tensors) {
    if (t.kind == TensorKind::kParamGrad) bytes += RoundToBlocks(t.bytes);
  }
  return bytes;
}

size_t PersistentBytes(const Schedule& s) {
  size_t bytes = 0;
  for (const TensorInfo& t : s.tensors) {
    if (!IsTransient(t.kind)) bytes += RoundToBlocks(t.bytes);
  }
  return bytes;
}

// With parameters in host memory nothing persistent stays on the device: the
// device holds only what the current steps use, and a budget smaller than
// the parameters, their gradients and the solver state runs.
TEST(ParameterPlacementTest, PersistentStateLeavesTheDevice) {
  const NetSpec spec = testing::MustParse(testing::kLeNet);
  auto net = testing::BuildTrainingNet(spec, 3);
  ASSERT_TRUE(net.ok());
  const size_t persistent = PersistentBytes((*net)->schedule());
  for (bool update_on_host : {false, true}) {
    testing::SyntheticRun run = MakeRun("superneurons", "host", update_on_host);
    auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
    ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
    EXPECT_LT(*minimum, persistent) << "update on host " << update_on_host;
    run.memory.device_budget = *minimum;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    EXPECT_EQ(trace->log.persistent, 0u);
    // Parameters and state live there (and gradients, when updated there).
    const size_t home = HostHomeBytes((*net)->schedule(), run.memory);
    EXPECT_GE(trace->log.host_peak, home);
    EXPECT_EQ(home, persistent - (update_on_host ? 0 : GradientBytes((*net)->schedule())));
    // One solver step per trainable parameter per iteration, in host memory
    // when asked.
    int updates = 0, on_host = 0;
    for (const MemoryEvent& e : trace->events) {
      updates += e.type == MemoryEventType::kUpdate;
      on_host += e.type == MemoryEventType::kUpdate && e.offset == 1;
    }
    EXPECT_EQ(updates, static_cast<int>((*net)->schedule().parameters.size()));
    EXPECT_EQ(on_host, update_on_host ? updates : 0);
  }
}

// above:SIZE keeps small tensors on the device and sends large ones out.
TEST(ParameterPlacementTest, AboveASizeSplitsByBytes) {
  const NetSpec spec = testing::MustParse(testing::kLeNet);
  auto net = testing::BuildTrainingNet(spec, 3);
  ASSERT_TRUE(net.ok());
  testing::SyntheticRun run = MakeRun("liveness", "above:2KiB", false);
  auto plan = Plan((*net)->view(), run.memory);
  ASSERT_TRUE(plan.ok() && plan->fits);
  size_t small = 0;
  for (const TensorInfo& t : (*net)->schedule().tensors) {
    if (IsTransient(t.kind) || t.bytes >= 2 * 1024) continue;
    small += RoundToBlocks(t.bytes);
  }
  EXPECT_EQ(plan->persistent, small);
  EXPECT_LT(small, PersistentBytes((*net)->schedule()));
}

// The tensor cache may evict parameters like activations: bit-identical to
// keeping them, at a budget below what keeping them needs.
TEST(ParameterPlacementTest, CacheEvictsParametersAndKeepsTheMath) {
  const NetSpec spec = testing::MustParse(testing::kAlexNet);
  auto kept = testing::TrainSynthetic(spec, MakeRun("superneurons", "device", false));
  ASSERT_TRUE(kept.ok());
  auto net = testing::BuildTrainingNet(spec, 3);
  ASSERT_TRUE(net.ok());
  testing::SyntheticRun run = MakeRun("superneurons", "cache", false);
  auto device_minimum = MinimumBudget(
      (*net)->view(), MakeRun("superneurons", "device", false).memory, kPoolBlockBytes);
  auto cache_minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
  ASSERT_TRUE(device_minimum.ok() && cache_minimum.ok());
  EXPECT_LT(*cache_minimum, *device_minimum);
  run.memory.device_budget = *cache_minimum;
  auto cached = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(cached->losses, kept->losses);
  EXPECT_TRUE(testing::BitEqual(cached->params, kept->params));
  auto plan = Plan((*net)->view(), run.memory);
  ASSERT_TRUE(plan.ok() && plan->fits);
  EXPECT_EQ(plan->peak, cached->log.peak);
}

TEST(ParameterPlacementTest, ConfigurationErrorsSayWhatIsNeeded) {
  MemoryOptions options;
  options.params = *ParseParamPlacement("cache");
  EXPECT_THAT(options.Validate().message(), HasSubstr("needs the tensor cache"));
  options = MemoryOptions();
  options.update_on_host = true;
  EXPECT_THAT(options.Validate().message(), HasSubstr("needs parameters in host memory"));
  EXPECT_THAT(ParseParamPlacement("elsewhere").status().message(),
              HasSubstr("expected device, host, above:SIZE"));
  options = MemoryOptions();
  options.host_tier = "disk";
  EXPECT_THAT(options.Validate().message(), HasSubstr("ram or file:DIRECTORY"));
}

class HostTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spill_host_tier_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// More host memory than the RAM tier is given: the run stops, naming the
// tier; the same budget's worth on disk completes with the losses of a roomy
// RAM run, and leaves no file behind.
TEST_F(HostTierTest, AFileHoldsWhatRamMayNotAndChangesNothing) {
  const NetSpec spec = testing::MustParse(testing::kResNet);
  auto net = testing::BuildTrainingNet(spec, 3);
  ASSERT_TRUE(net.ok());
  testing::SyntheticRun roomy = MakeRun("superneurons", "host", true);
  auto minimum = MinimumBudget((*net)->view(), roomy.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok());
  roomy.memory.device_budget = *minimum;
  auto in_ram = testing::TrainSynthetic(spec, roomy);
  ASSERT_TRUE(in_ram.ok()) << in_ram.status().ToString();
  const size_t host_bytes = in_ram->log.host_peak;
  ASSERT_GT(host_bytes, 0u);

  testing::SyntheticRun small = roomy;
  small.memory.host_budget = host_bytes / 2;  // the RAM we may use
  auto refused = testing::TrainSynthetic(spec, small);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(refused.status().message(), HasSubstr("in RAM"));

  testing::SyntheticRun on_disk = roomy;
  on_disk.memory.host_tier = "file:" + dir_.string();
  on_disk.memory.host_budget = 4 * host_bytes;
  auto from_file = testing::TrainSynthetic(spec, on_disk);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ(from_file->losses, in_ram->losses);
  EXPECT_TRUE(testing::BitEqual(from_file->params, in_ram->params));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(HostTierTest, AMissingOrWrongDirectoryIsAClearError) {
  const NetSpec spec = testing::MustParse(testing::kLeNet);
  testing::SyntheticRun run = MakeRun("liveness", "host", false);
  run.memory.host_tier = "file:" + (dir_ / "missing").string();
  auto missing = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing"));
  EXPECT_THAT(missing.status().message(), HasSubstr("memory.host_tier"));
  std::ofstream(dir_ / "plain") << "x";
  run.memory.host_tier = "file:" + (dir_ / "plain").string();
  auto plain = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(), HasSubstr("not a directory"));
}

}  // namespace
}  // namespace spill
