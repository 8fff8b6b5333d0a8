// The device memory pool: first and best fit, coalescing, typed out-of-memory,
// statistics, and a randomized allocate/free run that checks every invariant
// after every operation.
#include "memory/heap_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "framework/base/random.h"

namespace spill {
namespace {

constexpr size_t kB = kPoolBlockBytes;

TEST(HeapPoolTest, RoundsToBlocksAndAligns) {
  HeapPool pool(64 * kB);
  auto a = pool.Allocate(1, MemoryCategory::kActivations);
  auto b = pool.Allocate(kB + 1, MemoryCategory::kActivations);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->bytes, kB);
  EXPECT_EQ(b->bytes, 2 * kB);
  EXPECT_EQ(a->offset % kB, 0u);
  EXPECT_EQ(b->offset, kB);
}

TEST(HeapPoolTest, OutOfMemoryIsTypedAndChangesNothing) {
  HeapPool pool(8 * kB);
  auto a = pool.Allocate(6 * kB, MemoryCategory::kParameters);
  ASSERT_TRUE(a.ok());
  auto b = pool.Allocate(3 * kB, MemoryCategory::kActivations);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(pool.stats().total_in_use, 6 * kB);
  EXPECT_EQ(pool.stats().failures, 1);
  EXPECT_EQ(pool.CheckInvariants(), "");
}

TEST(HeapPoolTest, FreeCoalescesNeighbours) {
  HeapPool pool(8 * kB);
  auto a = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  auto b = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  auto c = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  pool.Free(a->id);
  pool.Free(c->id);
  EXPECT_EQ(pool.stats().free_segments, 2u);  // [0,2) and [4,8)
  EXPECT_FALSE(pool.CanAllocate(5 * kB));
  pool.Free(b->id);
  EXPECT_EQ(pool.stats().free_segments, 1u);
  EXPECT_TRUE(pool.CanAllocate(8 * kB));
  EXPECT_EQ(pool.CheckInvariants(), "");
}

TEST(HeapPoolTest, FirstFitTakesLowestBestFitTakesSmallest) {
  for (FitPolicy fit : {FitPolicy::kFirstFit, FitPolicy::kBestFit}) {
    HeapPool pool(16 * kB, fit);
    auto a = pool.Allocate(4 * kB, MemoryCategory::kActivations);  // [0,4)
    auto b = pool.Allocate(1 * kB, MemoryCategory::kActivations);  // [4,5)
    auto c = pool.Allocate(2 * kB, MemoryCategory::kActivations);  // [5,7)
    auto d = pool.Allocate(1 * kB, MemoryCategory::kActivations);  // [7,8)
    pool.Free(a->id);                                              // hole of 4 at 0
    pool.Free(c->id);                                              // hole of 2 at 5
    auto e = pool.Allocate(2 * kB, MemoryCategory::kActivations);
    EXPECT_EQ(e->offset, fit == FitPolicy::kFirstFit ? 0u : 5 * kB) << FitPolicyName(fit);
    (void)b;
    (void)d;
  }
}

TEST(HeapPoolTest, HighPlacementUsesTheTopOfTheSegment) {
  HeapPool pool(8 * kB);
  auto high = pool.Allocate(2 * kB, MemoryCategory::kActivations, Placement::kHigh);
  EXPECT_EQ(high->offset, 6 * kB);
  auto low = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  EXPECT_EQ(low->offset, 0u);
}

// The high placement keeps the fit policy's segment (here the hole at the
// bottom); the top-down search takes the highest segment that fits.
TEST(HeapPoolTest, TopDownSearchTakesTheHighestSegmentThatFits) {
  for (FitPolicy fit : {FitPolicy::kFirstFit, FitPolicy::kBestFit}) {
    HeapPool pool(16 * kB, fit);
    auto a = pool.Allocate(3 * kB, MemoryCategory::kActivations);  // [0,3)
    auto b = pool.Allocate(1 * kB, MemoryCategory::kActivations);  // [3,4)
    auto c = pool.Allocate(2 * kB, MemoryCategory::kActivations);  // [4,6)
    auto d = pool.Allocate(8 * kB, MemoryCategory::kActivations);  // [6,14)
    pool.Free(a->id);  // holes [0,3) and [4,6); free top [14,16)
    pool.Free(c->id);
    auto high = pool.Allocate(2 * kB, MemoryCategory::kActivations, Placement::kHigh);
    EXPECT_EQ(high->offset, fit == FitPolicy::kFirstFit ? 1 * kB : 4 * kB) << FitPolicyName(fit);
    pool.Free(high->id);
    auto top = pool.Allocate(2 * kB, MemoryCategory::kActivations, Placement::kTopDown);
    EXPECT_EQ(top->offset, 14 * kB);
    // Too big for the top segment: the next one down that holds it.
    auto next = pool.Allocate(3 * kB, MemoryCategory::kActivations, Placement::kTopDown);
    EXPECT_EQ(next->offset, 0u);
    EXPECT_EQ(pool.CheckInvariants(), "");
    (void)b;
    (void)d;
  }
}

// A range confines the search to the parts of free segments inside it.
TEST(HeapPoolTest, RangesConfineEverySearch) {
  HeapPool pool(16 * kB, FitPolicy::kBestFit);
  auto a = pool.Allocate(2 * kB, MemoryCategory::kActivations);  // [0,2)
  auto b = pool.Allocate(2 * kB, MemoryCategory::kActivations);  // [2,4)
  pool.Free(a->id);                                              // free [0,2) and [4,16)
  // Best fit would take the 2-block hole; confined to [3, 10) it takes the
  // part of the big segment inside the range, at its low end.
  auto low =
      pool.Allocate(2 * kB, MemoryCategory::kActivations, Placement::kLow, {3 * kB, 10 * kB});
  EXPECT_EQ(low->offset, 4 * kB);
  auto top = pool.Allocate(1 * kB, MemoryCategory::kActivations, Placement::kTopDown, {0, 10 * kB});
  EXPECT_EQ(top->offset, 9 * kB);
  EXPECT_EQ(pool.LargestFree({0, 10 * kB}), 3 * kB);  // [6,9)
  EXPECT_EQ(pool.LargestFree({}), 6 * kB);            // [10,16)
  auto none =
      pool.Allocate(4 * kB, MemoryCategory::kActivations, Placement::kTopDown, {0, 10 * kB});
  EXPECT_EQ(none.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(pool.CheckInvariants(), "");
  (void)b;
}

TEST(HeapPoolTest, StatisticsPerCategoryAndFragmentation) {
  HeapPool pool(16 * kB);
  auto p = pool.Allocate(4 * kB, MemoryCategory::kParameters);
  auto x = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  auto y = pool.Allocate(2 * kB, MemoryCategory::kActivations);
  auto w = pool.Allocate(3 * kB, MemoryCategory::kWorkspace);
  const PoolStats& s = pool.stats();
  EXPECT_EQ(s.in_use[static_cast<int>(MemoryCategory::kParameters)], 4 * kB);
  EXPECT_EQ(s.in_use[static_cast<int>(MemoryCategory::kActivations)], 4 * kB);
  EXPECT_EQ(s.total_peak, 11 * kB);
  pool.Free(x->id);
  pool.Free(w->id);
  EXPECT_EQ(s.peak[static_cast<int>(MemoryCategory::kActivations)], 4 * kB);
  EXPECT_EQ(s.in_use[static_cast<int>(MemoryCategory::kActivations)], 2 * kB);
  // Free: [4,6) and [8,16): largest 8 of 10.
  EXPECT_DOUBLE_EQ(s.contiguity(), 0.8);
  EXPECT_DOUBLE_EQ(pool.UnusableFree(3 * kB), 0.2);  // the 2-block hole cannot serve 3
  EXPECT_DOUBLE_EQ(pool.UnusableFree(1 * kB), 0.0);
  pool.ResetPeaks();
  EXPECT_EQ(s.total_peak, s.total_in_use);
  (void)p;
  (void)y;
}

// Random allocations and frees of random sizes and categories; after every
// operation the pool's invariants hold and its accounting matches a model
// kept here.
TEST(HeapPoolTest, RandomizedInvariants) {
  for (FitPolicy fit : {FitPolicy::kFirstFit, FitPolicy::kBestFit}) {
    HeapPool pool(512 * kB, fit);
    std::map<AllocationId, Allocation> live;
    size_t model_in_use = 0, model_peak = 0;
    for (int op = 0; op < 20000; ++op) {
      uint64_t r = Mix64(op * 2 + static_cast<int>(fit));
      if (live.empty() || r % 5 < 3) {
        size_t bytes = 1 + (Mix64(r) % (40 * kB));
        auto category = static_cast<MemoryCategory>(Mix64(r + 1) % kNumCategories);
        const Placement placements[] = {Placement::kLow, Placement::kLow, Placement::kHigh,
                                        Placement::kTopDown};
        const Placement placement = placements[Mix64(r + 2) % 4];
        // Every third request confined to a random range (GTBM's arenas).
        PoolRange range;
        if (Mix64(r + 4) % 3 == 0) {
          range.begin = Mix64(r + 5) % 512 * kB;
          range.end = range.begin + Mix64(r + 6) % 512 * kB;
        }
        auto a = pool.Allocate(bytes, category, placement, range);
        if (a.ok()) {
          ASSERT_EQ(a->bytes, RoundToBlocks(bytes));
          ASSERT_GE(a->offset, range.begin);
          ASSERT_LE(a->offset + a->bytes, range.end);
          for (const auto& [id, other] : live) {
            ASSERT_TRUE(a->offset + a->bytes <= other.offset ||
                        other.offset + other.bytes <= a->offset)
                << "overlap at op " << op;
          }
          live[a->id] = *a;
          model_in_use += a->bytes;
          model_peak = std::max(model_peak, model_in_use);
        } else {
          ASSERT_EQ(a.status().code(), StatusCode::kOutOfMemory);
          ASSERT_LT(pool.LargestFree(range), RoundToBlocks(bytes));
        }
      } else {
        auto it = live.begin();
        std::advance(it, Mix64(r + 3) % live.size());
        model_in_use -= it->second.bytes;
        pool.Free(it->first);
        live.erase(it);
      }
      ASSERT_EQ(pool.CheckInvariants(), "") << "op " << op;
      ASSERT_EQ(pool.stats().total_in_use, model_in_use);
      ASSERT_EQ(pool.stats().total_peak, model_peak);
    }
  }
}

}  // namespace
}  // namespace spill
