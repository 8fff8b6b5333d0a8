// Virtual memory over a driver (framework/device/virtual_memory_driver.h), the code
// a GPU's va allocator runs, with the driver replaced by one that records
// every call and backs each physical allocation with a memory file of its
// own - real memory, so networks train on it:
//   * addresses are reserved aligned to the granularity, never to the chunk
//     (a 6 MiB chunk is no power of two);
//   * chunk sizes that are not whole granules are refused, naming
//     memory.va_chunk and the sizes that would do;
//   * physical memory is made on a chunk's first mapping, once;
//   * a device that refuses physical memory fails the request with
//     kOutOfMemory in its own words, the va allocator undoes the request
//     (its invariants hold, a cached range still serves), and a training
//     run reports it at the step that asked.
#include "framework/device/virtual_memory_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <memory>

#include "framework/device/cpu_device.h"
#include "memory/allocators/va_allocator.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kMiB = size_t{1} << 20;

// What the driver was asked, for the tests to read.
struct DriverLog {
  size_t reserved_bytes = 0;
  size_t alignment = SIZE_MAX;
  int creates = 0;
  int releases = 0;
  int maps = 0;
  int unmaps = 0;
  int refused = 0;
};

// A driver over real memory: addresses from one PROT_NONE reservation, each
// physical allocation a memory file of its own. Refuses Create (out of
// memory) once `limit` allocations are live.
class FakeDriver : public MemoryMappingDriver {
 public:
  FakeDriver(size_t granularity, size_t limit, DriverLog* log)
      : granularity_(granularity), limit_(limit), log_(log) {}

  std::string Describe() const override { return "the fake GPU"; }
  StatusOr<size_t> Granularity() override { return granularity_; }

  StatusOr<uintptr_t> ReserveAddresses(size_t bytes, size_t alignment) override {
    log_->reserved_bytes = bytes;
    log_->alignment = alignment;
    void* base =
        mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return OutOfMemory("fake reserve");
    return reinterpret_cast<uintptr_t>(base);
  }
  void FreeAddresses(uintptr_t base, size_t bytes) override {
    munmap(reinterpret_cast<void*>(base), bytes);
  }

  StatusOr<uint64_t> Create(size_t bytes) override {
    if (files_.size() >= limit_) {
      log_->refused++;
      return OutOfMemory("fakeMemCreate: out of memory");
    }
    const int fd = memfd_create("fake-gpu-chunk", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return Internal("memfd");
    log_->creates++;
    files_[static_cast<uint64_t>(fd)] = bytes;
    return static_cast<uint64_t>(fd);
  }
  void Release(uint64_t handle) override {
    log_->releases++;
    close(static_cast<int>(handle));
    files_.erase(handle);
  }

  Status Map(uintptr_t address, size_t bytes, uint64_t handle) override {
    log_->maps++;
    void* at = mmap(reinterpret_cast<void*>(address), bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, static_cast<int>(handle), 0);
    return at == MAP_FAILED ? Internal("fake map") : Status::Ok();
  }
  Status Unmap(uintptr_t address, size_t bytes) override {
    log_->unmaps++;
    void* at = mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    return at == MAP_FAILED ? Internal("fake unmap") : Status::Ok();
  }
  std::string FreeMemory() override { return "0 B of its 1 GiB free"; }

 private:
  size_t granularity_;
  size_t limit_;
  DriverLog* log_;
  std::map<uint64_t, size_t> files_;
};

// The CPU device with the fake driver's virtual memory: what a GPU offers
// the va allocator, on real memory the CPU layers can compute in.
class FakeGpuDevice : public CpuDevice {
 public:
  FakeGpuDevice(size_t granularity, size_t limit) : granularity_(granularity), limit_(limit) {}
  StatusOr<std::unique_ptr<VirtualMemory>> CreateVirtualMemory(size_t chunk_bytes, size_t chunks,
                                                               size_t address_bytes) override {
    return CreateDriverVirtualMemory(std::make_unique<FakeDriver>(granularity_, limit_, &log),
                                     chunk_bytes, chunks, address_bytes);
  }
  DriverLog log;

 private:
  size_t granularity_;
  size_t limit_;
};

StatusOr<std::unique_ptr<VirtualMemory>> Make(size_t granularity, size_t chunk, size_t chunks,
                                              DriverLog* log, size_t limit = SIZE_MAX) {
  return CreateDriverVirtualMemory(std::make_unique<FakeDriver>(granularity, limit, log), chunk,
                                   chunks, 8 * chunks * chunk);
}

TEST(ReservationAlignmentTest, IsTheGranularityWhenAPowerOfTwo) {
  EXPECT_EQ(ReservationAlignment(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(ReservationAlignment(4096), 4096u);
  EXPECT_EQ(ReservationAlignment(3 * kMiB), 0u);  // the driver's default
  EXPECT_EQ(ReservationAlignment(0), 0u);
}

// A 6 MiB chunk is three granules - a valid chunk - but no power of two:
// the reservation is aligned to the granule, never to the chunk.
TEST(DriverVirtualMemoryTest, ReservesAlignedToTheGranularityNotTheChunk) {
  for (size_t chunk : {2 * kMiB, 6 * kMiB, 20 * kMiB}) {
    DriverLog log;
    auto vm = Make(2 * kMiB, chunk, 3, &log);
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    EXPECT_EQ(log.alignment, 2 * kMiB) << chunk;
    EXPECT_EQ(log.reserved_bytes, 24 * chunk) << chunk;
    EXPECT_EQ((*vm)->chunk_bytes(), chunk);
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*vm)->base()) % 4096, 0u);
  }
}

TEST(DriverVirtualMemoryTest, ChunksThatAreNotWholeGranulesAreRefusedClearly) {
  DriverLog log;
  auto three = Make(2 * kMiB, 3 * kMiB, 4, &log);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status().message(), HasSubstr("memory.va_chunk: 3.00 MiB (3145728 bytes)"));
  EXPECT_THAT(three.status().message(), HasSubstr("mapping granularity of the fake GPU, 2.00 MiB"));
  EXPECT_THAT(three.status().message(), HasSubstr("such as 2.00 MiB (2097152 bytes) or 4.00 MiB"));
  EXPECT_EQ(log.alignment, SIZE_MAX) << "nothing reserved for a refused chunk";
  auto small = Make(2 * kMiB, 64 * 1024, 4, &log);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("such as 2.00 MiB"));
  EXPECT_THAT(small.status().message(), Not(HasSubstr(" or ")));
  EXPECT_EQ(CheckChunkBytes(0, 2 * kMiB, "GPU 0").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckChunkBytes(8 * kMiB, 2 * kMiB, "GPU 0").ok());
}

// Physical memory is made on a chunk's first mapping and kept: a chunk
// mapped again elsewhere is not made again, and keeps its bytes.
TEST(DriverVirtualMemoryTest, PhysicalMemoryIsMadeOnFirstMappingOnce) {
  DriverLog log;
  auto vm = Make(4096, 4096, 4, &log);
  ASSERT_TRUE(vm.ok());
  VirtualMemory& m = **vm;
  EXPECT_EQ(log.creates, 0);
  ASSERT_TRUE(m.Map(0, 2).ok());
  m.base()[0] = 42;
  ASSERT_TRUE(m.Unmap(0, 4096).ok());
  ASSERT_TRUE(m.Map(5 * 4096, 2).ok());
  EXPECT_EQ(m.base()[5 * 4096], 42);
  EXPECT_EQ(log.creates, 1);
  EXPECT_FALSE(m.Map(5 * 4096, 1).ok()) << "a slot mapped twice";
  vm->reset();
  EXPECT_EQ(log.releases, 1);
}

TEST(DriverVirtualMemoryTest, ARefusedChunkIsOutOfMemoryInTheDevicesWords) {
  DriverLog log;
  auto vm = Make(4096, 4096, 4, &log, /*limit=*/2);
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE((*vm)->Map(0, 0).ok());
  ASSERT_TRUE((*vm)->Map(4096, 1).ok());
  Status refused = (*vm)->Map(2 * 4096, 2);
  EXPECT_EQ(refused.code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(refused.message(), HasSubstr("the fake GPU has no physical memory for another"));
  EXPECT_THAT(refused.message(), HasSubstr("fakeMemCreate: out of memory"));
  EXPECT_THAT(refused.message(), HasSubstr("it gave 2 of the budget's 4 chunks"));
  EXPECT_THAT(refused.message(), HasSubstr("lower memory.device_budget"));
  // Nothing stays mapped at the refused slot: a chunk that exists maps there.
  ASSERT_TRUE((*vm)->Unmap(0, 4096).ok());
  EXPECT_TRUE((*vm)->Map(2 * 4096, 0).ok());
  EXPECT_EQ(log.creates, 2);
}

// The va allocator over a device that gives fewer chunks than the budget:
// the request that needs one more fails with the device's report, not "no
// room"; the allocator is as before (its invariants hold, nothing leaked),
// and a freed range, still mapped, serves the next request of its size.
TEST(DriverVirtualMemoryTest, VaUndoesARequestTheDeviceRefuses) {
  constexpr size_t kChunk = 64 * 1024;
  FakeGpuDevice device(4096, /*limit=*/3);
  VirtualAddressAllocator va(8 * kChunk, kChunk);
  auto base = va.Reserve(device);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  AllocRequest r;
  r.bytes = 2 * kChunk;
  auto a = va.Allocate(r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const auto maps_before = va.mapping_counts().maps;
  auto b = va.Allocate(r);  // two more chunks; the device has one
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(b.status().message(), HasSubstr("no physical memory"));
  EXPECT_THAT(b.status().message(), Not(HasSubstr("no room")));
  EXPECT_EQ(va.CheckInvariants(), "");
  EXPECT_EQ(va.va_stats().held, 2u);
  EXPECT_EQ(va.mapping_counts().maps, maps_before) << "a failed request maps nothing";
  EXPECT_EQ(device.log.maps - device.log.unmaps, 2) << "what the failed request mapped is gone";
  va.Free(a->id);
  auto again = va.Allocate(r);  // the cached range, as it was
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(va.CheckInvariants(), "");
  va.Release(device, *base);
}

// Training on a device short of physical memory: below what the run needs,
// every run stops with an out-of-memory report in the device's words, at
// the step that asked (or while placing parameters, for the fewest chunks);
// with enough chunks it trains.
TEST(DriverVirtualMemoryTest, TrainingReportsARefusedChunkAtItsStep) {
  const NetSpec spec = testing::MustParse(testing::kLeNet);
  bool named_a_step = false;
  for (size_t limit = 1;; ++limit) {
    ASSERT_LT(limit, 64u) << "never trained";
    FakeGpuDevice device(4096, limit);
    testing::SyntheticRun run;
    run.batch = 2;
    run.use_device = &device;
    run.memory.allocator = "va";
    ASSERT_TRUE(run.memory.settings.Set("va_chunk", "64KiB").ok());
    run.memory.device_budget = 16 << 20;
    auto trace = testing::TrainSynthetic(spec, run);
    if (trace.ok()) {
      EXPECT_EQ(device.log.refused, 0) << limit << " chunks";
      break;
    }
    const std::string message = trace.status().message();
    EXPECT_EQ(trace.status().code(), StatusCode::kOutOfMemory) << message;
    EXPECT_THAT(message, HasSubstr("the fake GPU has no physical memory")) << limit;
    EXPECT_THAT(message, HasSubstr("it gave " + std::to_string(limit) + " of the budget's"));
    named_a_step = named_a_step || message.find("at step ") != std::string::npos;
  }
  EXPECT_TRUE(named_a_step);
}

}  // namespace
}  // namespace spill
