// Virtual addressing: real mappings on the CPU device (chunks of one memory
// file mapped in any order into reserved addresses), the va allocator's
// rules (exact reuse, growth, lazy unmapping, small-object arenas), its
// promises (no external fragmentation, Eq. 1 and Eq. 2 at every moment,
// Fits and LargestFree agreeing with Allocate), and the same placements
// with and without a device.
#include "memory/allocators/va_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "framework/device/cpu_device.h"

namespace spill {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kChunk = 64 * kKiB;

AllocRequest Request(size_t bytes) {
  AllocRequest r;
  r.bytes = bytes;
  return r;
}

// Chunks written through one mapping keep their bytes when unmapped and
// mapped again elsewhere, in another order; an unmapped chunk faults.
TEST(VirtualMemoryTest, ChunksKeepTheirBytesAcrossMappings) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // the device has a copy thread
  CpuDevice device;
  auto vm = device.CreateVirtualMemory(kChunk, 8, 32 * kChunk);
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  VirtualMemory& m = **vm;
  const size_t order[] = {5, 2, 7};
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(m.Map(i * kChunk, order[i]).ok());
  // One contiguous range over three scattered chunks.
  for (size_t i = 0; i < 3 * kChunk; ++i) m.base()[i] = static_cast<char>(i * 7 + i / kChunk);
  ASSERT_TRUE(m.Unmap(0, 3 * kChunk).ok());
  // Chunk 7, then 5, then 2, at other addresses.
  const size_t again[] = {7, 5, 2};
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(m.Map((20 + i) * kChunk, again[i]).ok());
  const char* range = m.base() + 20 * kChunk;
  for (size_t i = 0; i < 3; ++i) {
    const size_t was = (i == 0 ? 2 : i == 1 ? 0 : 1);  // chunk 7 was third, 5 first, 2 second
    for (size_t b = 0; b < kChunk; b += 4093) {
      const size_t old = was * kChunk + b;
      ASSERT_EQ(range[i * kChunk + b], static_cast<char>(old * 7 + old / kChunk)) << i << " " << b;
    }
  }
  EXPECT_DEATH({ m.base()[0] = 1; }, "");  // unmapped again
}

TEST(VirtualMemoryTest, BadChunksAndOffsetsAreRefused) {
  CpuDevice device;
  EXPECT_EQ(device.CreateVirtualMemory(1000, 4, 8000).status().code(),
            StatusCode::kInvalidArgument);
  auto vm = device.CreateVirtualMemory(kChunk, 2, 4 * kChunk);
  ASSERT_TRUE(vm.ok());
  EXPECT_FALSE((*vm)->Map(0, 2).ok());           // no chunk 2
  EXPECT_FALSE((*vm)->Map(4 * kChunk, 0).ok());  // beyond the addresses
  EXPECT_FALSE((*vm)->Map(kChunk / 2, 0).ok());  // not chunk-aligned
}

// Freed chunks serve any later request, wherever they lie: a request as
// large as the free memory fits although no two free chunks are adjacent -
// where best fit without compaction has no hole for it.
TEST(VaAllocatorTest, NoExternalFragmentation) {
  VirtualAddressAllocator va(8 * kChunk, kChunk);
  auto best_fit = CreateAllocator("best_fit", {8 * kChunk});
  ASSERT_TRUE(best_fit.ok());
  for (DeviceAllocator* a : {static_cast<DeviceAllocator*>(&va), best_fit->get()}) {
    std::vector<AllocationId> keep, drop;
    for (int i = 0; i < 4; ++i) {
      keep.push_back(a->Allocate(Request(kChunk)).value().id);
      drop.push_back(a->Allocate(Request(kChunk)).value().id);
    }
    for (AllocationId id : drop) a->Free(id);
  }
  EXPECT_TRUE(va.CanAllocate(4 * kChunk));
  EXPECT_EQ(va.LargestFree(), 4 * kChunk);
  EXPECT_TRUE(va.Allocate(Request(4 * kChunk)).ok());
  EXPECT_FALSE((*best_fit)->CanAllocate(4 * kChunk));
  EXPECT_EQ(va.CheckInvariants(), "");
}

// A freed range stays mapped: the next request of its exact size takes it
// without mapping; a larger request grows it in place when the addresses
// after it are free; a smaller one takes its head and leaves the rest
// cached. Cached chunks are unmapped only when another range needs them.
TEST(VaAllocatorTest, CachesRangesAndMapsLazily) {
  VirtualAddressAllocator va(8 * kChunk, kChunk);
  auto a = va.Allocate(Request(2 * kChunk));
  ASSERT_TRUE(a.ok());
  va.Free(a->id);
  EXPECT_EQ(va.va_stats().maps, 2);
  auto b = va.Allocate(Request(2 * kChunk - 5000));  // same chunk count
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->offset, a->offset);
  EXPECT_EQ(va.va_stats().exact_reuses, 1);
  EXPECT_EQ(va.va_stats().maps, 2);
  va.Free(b->id);
  auto c = va.Allocate(Request(3 * kChunk));  // grows the cached two-chunk range
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->offset, a->offset);
  EXPECT_EQ(va.va_stats().grows, 1);
  EXPECT_EQ(va.va_stats().maps, 3);
  auto pin = va.Allocate(Request(kChunk));  // right after c
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(pin->offset, c->offset + 3 * kChunk);
  va.Free(c->id);
  auto head = va.Allocate(Request(kChunk));  // the head of c's range
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->offset, c->offset);
  EXPECT_EQ(va.va_stats().splits, 1);
  EXPECT_EQ(va.va_stats().maps, 4);
  EXPECT_EQ(va.va_stats().unmaps, 0);
  // Six chunks: the four never used, and the two cached behind `head`,
  // which cannot grow (pin is in the way) and are unmapped now.
  auto d = va.Allocate(Request(6 * kChunk));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(va.va_stats().unmaps, 2);
  EXPECT_EQ(va.va_stats().maps, 10);
  EXPECT_EQ(va.va_stats().held, 8u);
  EXPECT_FALSE(va.CanAllocate(1));
  EXPECT_EQ(va.CheckInvariants(), "");
}

// A GPU-like device: the CPU device with a compute queue that runs on a
// thread of its own, so compute can still be queued when the host frees.
class AsyncComputeDevice : public CpuDevice {
 public:
  Queue& compute_queue() override { return compute; }
  CpuWorkerQueue compute;
};

// An unmap waits for the compute queued before the free that cached the
// chunks (that compute may still read them), and for nothing else: a copy
// queue busy with other blocks is not drained. The event log names that
// free's block.
TEST(VaAllocatorTest, AnUnmapWaitsForTheComputeBeforeItsFreeNotForTheCopies) {
  AsyncComputeDevice device;
  VirtualAddressAllocator va(4 * kChunk, kChunk);
  MemoryEventLog log;
  va.set_event_log(&log);
  auto base = va.Reserve(device);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto a = va.Allocate(Request(kChunk));
  auto pin = va.Allocate(Request(kChunk));
  auto c = va.Allocate(Request(2 * kChunk));
  ASSERT_TRUE(a.ok() && pin.ok() && c.ok());
  std::atomic<bool> computed{false};
  device.compute.Enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    computed = true;
  });
  va.Free(a->id);  // fenced by the compute above
  // The copy queue holds work until the test lets it go (or 30 s pass).
  std::mutex mutex;
  std::condition_variable cv;
  bool release = false;
  std::atomic<bool> copied{false};
  device.EnqueueHostTask(device.device_to_host_queue(), [&] {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
    copied = true;
  });
  va.Free(c->id);
  // Three chunks: c's cached range grows by one, a's chunk, unmapped.
  auto d = va.Allocate(Request(3 * kChunk));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(va.va_stats().unmaps, 1);
  EXPECT_TRUE(computed) << "unmapped while compute queued before the free could still read it";
  EXPECT_FALSE(copied) << "the unmap waited for a copy queue it has nothing to do with";
  ASSERT_FALSE(log.events().empty());
  const MemoryEvent& placed = log.events().back();
  EXPECT_EQ(placed.type, MemoryEventType::kAlloc);
  EXPECT_EQ(placed.unmaps, 1);
  EXPECT_EQ(placed.fence, a->id);
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  cv.notify_all();
  va.Release(device, *base);
  EXPECT_TRUE(copied);  // releasing drains every queue
}

// Requests below a quarter chunk share one-chunk arenas; an arena goes back
// to the cache when its last block is freed.
TEST(VaAllocatorTest, SmallRequestsShareArenas) {
  VirtualAddressAllocator va(4 * kChunk, kChunk);
  std::vector<Allocation> small;
  for (int i = 0; i < 6; ++i) small.push_back(*va.Allocate(Request(10 * kKiB)));
  EXPECT_EQ(va.va_stats().held, 1u);  // six 10 KiB blocks in one 64 KiB arena
  for (int i = 1; i < 6; ++i) {
    EXPECT_EQ(small[i].offset / kChunk, small[0].offset / kChunk);
  }
  small.push_back(*va.Allocate(Request(10 * kKiB)));  // the seventh needs a second arena
  EXPECT_EQ(va.va_stats().held, 2u);
  for (const Allocation& a : small) va.Free(a.id);
  EXPECT_EQ(va.va_stats().held, 0u);
  EXPECT_EQ(va.va_stats().mapped, 2u);  // both arenas cached, still mapped
  EXPECT_EQ(va.CheckInvariants(), "");
}

// Random requests of every size: whether a request fits is what Fits says,
// the largest free is always allocatable, Eq. 1 and Eq. 2 hold throughout,
// and the placements are the same with real mappings and without a device.
TEST(VaAllocatorTest, RandomRequestsKeepEveryPromise) {
  CpuDevice device;
  VirtualAddressAllocator planned(32 * kChunk, kChunk), mapped(32 * kChunk, kChunk);
  auto base = mapped.Reserve(device);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  std::mt19937 rng(7);
  std::vector<std::pair<AllocationId, size_t>> live;  // id, bytes
  for (int op = 0; op < 3000; ++op) {
    if (!live.empty() && rng() % 3 == 0) {
      const size_t i = rng() % live.size();
      planned.Free(live[i].first);
      mapped.Free(live[i].first);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      const size_t bytes = rng() % 4 == 0 ? 1 + rng() % (6 * kChunk) : 1 + rng() % (kChunk / 3);
      const bool fits = planned.CanAllocate(bytes);
      auto p = planned.Allocate(Request(bytes));
      auto m = mapped.Allocate(Request(bytes));
      ASSERT_EQ(p.ok(), fits) << op;
      ASSERT_EQ(m.ok(), fits) << op;
      if (fits) {
        ASSERT_EQ(p->offset, m->offset) << op;
        // The range is mapped: write its ends.
        char* at = static_cast<char*>(*base) + m->offset;
        at[0] = 1;
        at[bytes - 1] = 2;
        live.push_back({p->id, bytes});
      }
    }
    const size_t largest = planned.LargestFree();
    if (largest > 0) {
      ASSERT_TRUE(planned.CanAllocate(largest)) << op;
    }
    ASSERT_EQ(planned.CheckInvariants(), "") << op;
    ASSERT_EQ(mapped.CheckInvariants(), "") << op;
  }
  EXPECT_LT(planned.va_stats().max_internal, kChunk);  // Eq. 1
  EXPECT_EQ(planned.va_stats().bound_breaks, 0);       // Eq. 2
  EXPECT_EQ(planned.va_stats().maps, mapped.va_stats().maps);
  EXPECT_GT(planned.va_stats().exact_reuses, 0);
  EXPECT_GT(planned.va_stats().unmaps, 0);
  mapped.Release(device, *base);
}

}  // namespace
}  // namespace spill
