// What the memory runtime tells a device beyond copies, checked with the CPU
// device's stand-ins:
//   * host memory is page-locked as offloading reaches into it, chunk by
//     chunk up to the host budget - never the whole budget up front - and a
//     refusal to lock more shows in the out-of-memory report;
//   * every block carved out of the device region, and every block given
//     back (tensors, workspaces, compaction's moves), is announced once, as
//     compute-sanitizer needs to see overruns between tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "framework/device/cpu_device.h"
#include "framework/graph/net.h"
#include "memory/planning/planner.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

testing::SyntheticRun RunOn(CpuDevice* device, const std::string& mode) {
  testing::SyntheticRun run;
  run.use_device = device;
  run.batch = 4;
  run.steps = 2;
  SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok());
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  return run;
}

size_t SmallestBudget(const NetSpec& spec, const MemoryOptions& options, int64_t batch) {
  auto net = testing::BuildTrainingNet(spec, batch);
  SPILL_CHECK(net.ok()) << net.status().ToString();
  auto minimum = MinimumBudget((*net)->view(), options, kPoolBlockBytes);
  SPILL_CHECK(minimum.ok()) << minimum.status().ToString();
  return *minimum;
}

TEST(HostPinningTest, GrowsInChunksUpToTheRegion) {
  CpuDevice device;
  const size_t region = 3 * kHostPinChunkBytes + 1000;
  auto base = device.ReserveHostRegion(region);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(device.pinned_bytes(), 0u);  // reserving locks nothing
  ASSERT_TRUE(device.EnsureHostPinned(*base, 1).ok());
  EXPECT_EQ(device.pinned_bytes(), kHostPinChunkBytes);
  ASSERT_TRUE(device.EnsureHostPinned(*base, kHostPinChunkBytes).ok());
  EXPECT_EQ(device.pinned_bytes(), kHostPinChunkBytes);  // already covered
  ASSERT_TRUE(device.EnsureHostPinned(*base, kHostPinChunkBytes + 1).ok());
  EXPECT_EQ(device.pinned_bytes(), 2 * kHostPinChunkBytes);
  ASSERT_TRUE(device.EnsureHostPinned(*base, 3 * kHostPinChunkBytes + 1).ok());
  EXPECT_EQ(device.pinned_bytes(), region);  // the last chunk stops at the region's end
  device.ReleaseHostRegion(*base);
  EXPECT_EQ(device.pinned_bytes(), 0u);
  EXPECT_EQ(device.pinned_peak(), region);
}

TEST(HostPinningTest, ARefusalSaysHowFarPinningGot) {
  CpuDevice device;
  device.set_pin_limit(kHostPinChunkBytes + kMiB);
  auto base = device.ReserveHostRegion(4 * kHostPinChunkBytes);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(device.EnsureHostPinned(*base, 10).ok());
  Status refused = device.EnsureHostPinned(*base, kHostPinChunkBytes + 10);
  EXPECT_EQ(refused.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(refused.message().find("page-locking host memory failed at " +
                                   std::to_string(kHostPinChunkBytes) + " bytes"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(device.pinned_bytes(), kHostPinChunkBytes);  // what was pinned stays
  device.ReleaseHostRegion(*base);
}

// A run pins what its offloads reach - one chunk, or the whole budget when
// that is smaller - and nothing without offloading.
TEST(HostPinningTest, TheRuntimePinsOnlyWhatOffloadingUses) {
  NetSpec spec = testing::MustParse(testing::kResNet);
  for (size_t host_budget : {size_t{1} << 30, 16 * kMiB}) {
    CpuDevice device;
    testing::SyntheticRun run = RunOn(&device, "offload");
    run.memory.host_budget = host_budget;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    ASSERT_GT(trace->to_host, 0u);
    const size_t used = trace->host_pool.high_water;
    EXPECT_GT(used, 0u);
    EXPECT_LT(used, host_budget);
    EXPECT_EQ(device.pinned_peak(), PinnedExtentFor(used, host_budget)) << host_budget;
    EXPECT_LT(device.pinned_peak(), size_t{1} << 30) << "the whole budget was pinned";
    EXPECT_EQ(device.pinned_bytes(), 0u);  // released with the runtime
  }
  CpuDevice device;
  auto trace = testing::TrainSynthetic(spec, RunOn(&device, "liveness"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(device.pinned_peak(), 0u);
}

// A host budget no address space holds (1 PiB: more than the 128 TiB of a
// process's) is an error naming the setting, not the region it failed on.
TEST(HostPinningTest, AHostBudgetBeyondTheAddressSpaceNamesTheSetting) {
  NetSpec spec = testing::MustParse(testing::kResNet);
  CpuDevice device;
  testing::SyntheticRun run = RunOn(&device, "offload");
  run.memory.host_budget = size_t{1} << 50;
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), ::testing::HasSubstr("memory.host_budget 1.00 PiB"));
  EXPECT_THAT(trace.status().message(), ::testing::HasSubstr("lower memory.host_budget"));
}

// At the smallest budget that runs with offloading, a device that cannot
// lock host memory makes the run fail - and the report says why, rather
// than blaming the device budget alone.
TEST(HostPinningTest, TheOutOfMemoryReportNamesAPinningFailure) {
  NetSpec spec = testing::MustParse(testing::kResNet);
  for (const char* mode : {"offload", "superneurons"}) {
    CpuDevice device;
    device.set_pin_limit(0);
    testing::SyntheticRun run = RunOn(&device, mode);
    run.memory.host_budget = 16 * kMiB;
    MemoryOptions without = run.memory;
    without.offload = false;
    run.memory.device_budget = SmallestBudget(spec, run.memory, run.batch);
    ASSERT_LT(run.memory.device_budget, SmallestBudget(spec, without, run.batch))
        << mode << ": offloading must be needed at this budget";
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_FALSE(trace.ok()) << mode;
    EXPECT_EQ(trace.status().code(), StatusCode::kOutOfMemory);
    EXPECT_NE(trace.status().message().find(
                  "offloading could not make room: page-locking host memory failed at 0 bytes"),
              std::string::npos)
        << mode << ": " << trace.status().message();
    // Allowed to lock, the same run fits.
    CpuDevice unlimited;
    run.use_device = &unlimited;
    EXPECT_TRUE(testing::TrainSynthetic(spec, run).ok()) << mode;
  }
}

// Every block of the device region is announced when it is carved out and
// when it is given back - compaction's moves as a free and an allocation -
// and never contradicts what was announced before.
TEST(PoolAnnotationTest, EveryBlockIsAnnouncedOnceInEveryMode) {
  for (const testing::Network& network : testing::kNetworks) {
    NetSpec spec = testing::MustParse(network.yaml);
    for (const char* mode :
         {"baseline", "liveness", "offload", "recompute", "offload_recompute", "superneurons"}) {
      for (bool tight : {false, true}) {
        CpuDevice device;
        testing::SyntheticRun run = RunOn(&device, mode);
        run.memory.host_budget = 16 * kMiB;
        run.memory.device_budget = tight ? SmallestBudget(spec, run.memory, run.batch) : 64 * kMiB;
        auto trace = testing::TrainSynthetic(spec, run);
        const std::string what = std::string(network.name) + " " + mode + (tight ? " tight" : "");
        ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
        const PoolStats& pool = trace->device_pool;
        const AnnotationStats seen = device.annotations();
        EXPECT_EQ(seen.mismatches, 0) << what << ": " << seen.first_mismatch;
        EXPECT_EQ(seen.copies_outside, 0) << what << ": a move touched unannounced memory";
        // A move is announced twice: its whole span while it copies, then
        // the block at its new place.
        EXPECT_EQ(seen.allocations, pool.allocations + 2 * pool.moves) << what;
        EXPECT_EQ(seen.frees, pool.frees + 2 * pool.moves) << what;
        EXPECT_EQ(seen.live, 0) << what << ": the released region keeps no blocks";
      }
    }
  }
}

// Compaction moves blocks, and the annotations follow them: a move's copy
// reads and writes only announced memory, as compute-sanitizer requires.
TEST(PoolAnnotationTest, CompactionMovesAreAnnounced) {
  int64_t moves = 0;
  for (const testing::Network& network : testing::kNetworks) {
    NetSpec spec = testing::MustParse(network.yaml);
    CpuDevice device;
    testing::SyntheticRun run = RunOn(&device, "superneurons");
    run.memory.host_budget = 16 * kMiB;
    run.memory.device_budget = SmallestBudget(spec, run.memory, run.batch);
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << network.name << ": " << trace.status().ToString();
    EXPECT_EQ(device.annotations().copies_outside, 0)
        << network.name << ": a move read or wrote memory no block was announced for";
    moves += trace->device_pool.moves;
  }
  EXPECT_GT(moves, 0) << "no network compacted: the moves' annotations went untested";
}

}  // namespace
}  // namespace spill
