#include "tests/testing/equivalence.h"

#include <gtest/gtest.h>

#include "memory/planning/planner.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace testing {
namespace {

// The index of the event that freed `block` in `events`; -1 when none did
// (no block, or one freed in an earlier iteration).
int64_t FreeEventOf(const std::vector<MemoryEvent>& events, AllocationId block) {
  if (block < 0) return -1;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].type == MemoryEventType::kFree && events[i].block == block) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace

void ExpectSameMath(const TrainTrace& baseline, const TrainTrace& trace, const std::string& what) {
  ASSERT_EQ(trace.losses.size(), baseline.losses.size()) << what;
  for (size_t i = 0; i < trace.losses.size(); ++i) {
    EXPECT_EQ(trace.losses[i], baseline.losses[i]) << what << " step " << i;
  }
  EXPECT_TRUE(BitEqual(baseline.params, trace.params)) << what;
}

void ExpectBitIdentical(const TrainTrace& baseline, const TrainTrace& trace,
                        const std::string& what) {
  ExpectSameMath(baseline, trace, what);
  EXPECT_LE(trace.log.peak, baseline.log.peak) << what;
}

void ExpectRunAsPlanned(const NetSpec& spec, const SyntheticRun& run, const TrainTrace& measured,
                        const std::string& what, DeviceType device) {
  auto net = BuildTrainingNet(spec, NetOptionsOf(run, device));
  ASSERT_TRUE(net.ok());
  auto plan =
      run.inference ? PlanInference((*net)->view(), run.memory) : Plan((*net)->view(), run.memory);
  ASSERT_TRUE(plan.ok() && plan->fits) << what;
  const MemoryLog& m = measured.log;
  ASSERT_EQ(plan->log.steps.size(), m.steps.size());
  for (size_t s = 0; s < m.steps.size(); ++s) {
    const StepRecord &p = plan->log.steps[s], &r = m.steps[s];
    ASSERT_EQ(p.total, r.total) << what << " step " << s + 1;
    ASSERT_EQ(p.peak, r.peak) << what << " step " << s + 1;
    ASSERT_EQ(p.in_use, r.in_use) << what << " step " << s + 1;
    ASSERT_EQ(p.live_tensors, r.live_tensors) << what << " step " << s + 1;
    ASSERT_EQ(p.to_host, r.to_host) << what << " step " << s + 1;
    ASSERT_EQ(p.to_device, r.to_device) << what << " step " << s + 1;
    ASSERT_EQ(p.on_demand, r.on_demand) << what << " step " << s + 1;
    ASSERT_EQ(p.recomputed, r.recomputed) << what << " step " << s + 1;
    ASSERT_EQ(p.slice_images, r.slice_images) << what << " step " << s + 1;
    ASSERT_EQ(p.stream_buffers, r.stream_buffers) << what << " step " << s + 1;
  }
  EXPECT_EQ(plan->peak, m.peak) << what;
  EXPECT_LE(plan->peak, run.memory.device_budget) << what;
  ASSERT_EQ(plan->events.size(), measured.events.size()) << what;
  for (size_t i = 0; i < plan->events.size(); ++i) {
    const MemoryEvent &p = plan->events[i], &r = measured.events[i];
    ASSERT_TRUE(p.type == r.type && p.tensor == r.tensor && p.step == r.step &&
                p.bytes == r.bytes && p.offset == r.offset)
        << what << ": event " << i << " planned " << MemoryEventName(p.type) << " at step "
        << p.step << " offset " << p.offset << ", ran " << MemoryEventName(r.type) << " at step "
        << r.step << " offset " << r.offset;
    // Chunks mapped and unmapped (va), and the free each unmap waits for:
    // the same event of the iteration (block ids count from the
    // allocator's first request, which plan and run need not share).
    ASSERT_TRUE(p.maps == r.maps && p.unmaps == r.unmaps &&
                FreeEventOf(plan->events, p.fence) == FreeEventOf(measured.events, r.fence))
        << what << ": event " << i << " planned " << p.maps << " maps, " << p.unmaps
        << " unmaps after event " << FreeEventOf(plan->events, p.fence) << "; ran " << r.maps
        << ", " << r.unmaps << ", " << FreeEventOf(measured.events, r.fence);
  }
  EXPECT_EQ(plan->footprint, measured.footprint) << what;
  EXPECT_LE(plan->footprint, run.memory.device_budget) << what;
  // A static plan is served as profiled: no request differs from it.
  EXPECT_EQ(plan->mismatches, 0) << what;
  EXPECT_EQ(measured.mismatches, 0) << what;
}

}  // namespace testing
}  // namespace spill
