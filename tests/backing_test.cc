// The Backing seam (memory/backing.h): a run's backing moves bytes on the
// device's queues and hands back the events of its copies; a plan's backing
// moves nothing, makes no events and has no addresses, so the runtime's
// decision code can call either unconditionally.
#include "memory/backing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "framework/device/cpu_device.h"

namespace spill {
namespace {

constexpr size_t kRegionBytes = size_t{1} << 20;  // 1 MiB of device memory
constexpr size_t kHostBytes = size_t{1} << 20;    // 1 MiB of host memory
constexpr size_t kBlockBytes = 4096;

std::unique_ptr<DeviceAllocator> FirstFit() {
  AllocatorContext context;
  context.capacity = kRegionBytes;
  auto allocator = CreateAllocator("first_fit", context);
  EXPECT_TRUE(allocator.ok()) << allocator.status().ToString();
  return std::move(*allocator);
}

TEST(BackingTest, PlanningMovesNothingAndMakesNoEvents) {
  std::unique_ptr<DeviceAllocator> allocator = FirstFit();
  std::unique_ptr<Backing> backing = MakePlanningBacking();
  ASSERT_TRUE(backing->Reserve(*allocator, kHostBytes, "ram").ok());
  EXPECT_FALSE(backing->computes());
  EXPECT_EQ(backing->device_address(0), nullptr);
  EXPECT_EQ(backing->host_address(kBlockBytes), nullptr);
  EXPECT_EQ(backing->CopyOut(0, 0, kBlockBytes), nullptr);
  EXPECT_EQ(backing->CopyIn(0, 0, kBlockBytes, nullptr), nullptr);
  EXPECT_EQ(backing->CopySliceIn(nullptr, 0, kBlockBytes, nullptr), nullptr);
  EXPECT_EQ(backing->CopySliceOut(0, nullptr, kBlockBytes), nullptr);
  EXPECT_TRUE(backing->PinHost(kHostBytes).ok());
  EXPECT_EQ(backing->HoldsData().code(), StatusCode::kInternal);
  // A plan does not compute: no solver step is needed.
  EXPECT_TRUE(backing->RequireUpdate(nullptr, "fc1.weight").ok());
}

TEST(BackingTest, DeviceCopiesOutAndInOnItsQueues) {
  CpuDevice device;
  std::unique_ptr<DeviceAllocator> allocator = FirstFit();
  std::unique_ptr<Backing> backing = MakeDeviceBacking(device);
  ASSERT_TRUE(backing->Reserve(*allocator, kHostBytes, "ram").ok());
  EXPECT_TRUE(backing->computes());
  EXPECT_TRUE(backing->HoldsData().ok());
  ASSERT_NE(backing->device_address(0), nullptr);
  ASSERT_NE(backing->host_address(0), nullptr);
  ASSERT_TRUE(backing->PinHost(2 * kBlockBytes).ok());

  std::vector<float> values(kBlockBytes / sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  std::memcpy(backing->device_address(0), values.data(), kBlockBytes);

  // Out on one queue, straight back in on the other: the copy in waits for
  // the copy out it names, so it reads the bytes the copy out wrote.
  std::shared_ptr<Event> out = backing->CopyOut(kBlockBytes, 0, kBlockBytes);
  ASSERT_NE(out, nullptr);
  std::shared_ptr<Event> in = backing->CopyIn(2 * kBlockBytes, kBlockBytes, kBlockBytes, out);
  ASSERT_NE(in, nullptr);
  in->Synchronize();
  EXPECT_TRUE(out->IsComplete());
  EXPECT_EQ(std::memcmp(backing->host_address(kBlockBytes), values.data(), kBlockBytes), 0);
  backing->ComputeWaits(in);
  backing->SynchronizeCopies();
  EXPECT_EQ(std::memcmp(backing->device_address(2 * kBlockBytes), values.data(), kBlockBytes), 0);

  // A freed block is poisoned with NaN on the compute queue.
  backing->Poison(0, kBlockBytes);
  device.compute_queue().Synchronize();
  const float* poisoned = reinterpret_cast<const float*>(backing->device_address(0));
  EXPECT_TRUE(std::isnan(poisoned[0]));
  EXPECT_TRUE(std::isnan(poisoned[values.size() - 1]));
}

TEST(BackingTest, ARunNeedsTheSolverStepAndNamesTheParameter) {
  CpuDevice device;
  std::unique_ptr<Backing> backing = MakeDeviceBacking(device);
  const Status missing = backing->RequireUpdate(nullptr, "fc1.weight");
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("'fc1.weight'"), std::string::npos) << missing.message();
  const SlotUpdate update = [](const ParameterSlot&, float*, const float*,
                               const std::vector<float*>&, bool) {};
  EXPECT_TRUE(backing->RequireUpdate(update, "fc1.weight").ok());
}

}  // namespace
}  // namespace spill
