// HeapPool: the device memory pool (SuperNeurons §3.2.1), as arithmetic on
// offsets.
//
// Policy summary
//   * One region of `capacity` bytes, preallocated once. It is divided into
//     1 KiB blocks; every request is rounded up to whole blocks, so every
//     allocation is 1 KiB aligned.
//   * Free segments are kept by offset (so neighbours coalesce on free) and by
//     size (so best fit is a lookup). Allocated segments are found through an
//     id -> node hash table.
//   * First fit takes the lowest-addressed segment that fits; best fit the
//     smallest one (ties: lowest address). The high-end variant places a
//     request at the top of the chosen segment (Dymem's high-end allocation).
//   * A request that does not fit returns a typed kOutOfMemory status and
//     changes nothing. The pool never aborts on a full region.
//
// The pool touches no device API: the runtime adds the offset to the region's
// base address, and the planner runs the very same pool without a region. That
// is what makes a planned peak equal the measured one.
#ifndef SPILL_MEMORY_HEAP_POOL_H_
#define SPILL_MEMORY_HEAP_POOL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/base/status.h"

namespace spill {

constexpr size_t kPoolBlockBytes = 1024;

// Rounds up to whole pool blocks.
inline size_t RoundToBlocks(size_t bytes) {
  return (bytes + kPoolBlockBytes - 1) / kPoolBlockBytes * kPoolBlockBytes;
}

enum class MemoryCategory {
  kParameters = 0,
  kParamGradients,
  kOptimizerState,
  kActivations,
  kActivationGradients,
  kWorkspace,
  kCount
};
constexpr int kNumCategories = static_cast<int>(MemoryCategory::kCount);
const char* MemoryCategoryName(MemoryCategory category);

enum class FitPolicy { kFirstFit, kBestFit };
const char* FitPolicyName(FitPolicy fit);
StatusOr<FitPolicy> ParseFitPolicy(const std::string& text);

// Where in the pool a request goes:
//   kLow      the fit policy's segment, at its low end;
//   kHigh     the same segment, at its top. The segment is still chosen
//             bottom-up (first fit) or by size (best fit), so it can be a
//             hole among low-end blocks;
//   kTopDown  the highest-addressed segment that fits, at its top: a true
//             top-down search (a reverse scan of the free list).
enum class Placement { kLow, kHigh, kTopDown };

// The part of the pool a request must lie in: offsets [begin, end).
struct PoolRange {
  size_t begin = 0;
  size_t end = SIZE_MAX;
};

using AllocationId = int64_t;

struct Allocation {
  AllocationId id = -1;
  size_t offset = 0;
  size_t bytes = 0;  // rounded to blocks
};

struct PoolStats {
  size_t capacity = 0;
  std::array<size_t, kNumCategories> in_use{};
  std::array<size_t, kNumCategories> peak{};
  size_t total_in_use = 0;
  size_t total_peak = 0;
  size_t free_bytes = 0;
  size_t largest_free = 0;
  size_t free_segments = 0;
  size_t high_water = 0;  // highest end offset ever allocated
  int64_t allocations = 0;
  int64_t frees = 0;
  int64_t failures = 0;
  int64_t moves = 0;

  // Largest free segment / total free (1 = one contiguous free region).
  double contiguity() const;
};

class HeapPool {
 public:
  HeapPool(size_t capacity, FitPolicy fit = FitPolicy::kFirstFit);

  // Rounds `bytes` up to blocks and finds room inside `range`. kOutOfMemory
  // if none.
  StatusOr<Allocation> Allocate(size_t bytes, MemoryCategory category,
                                Placement placement = Placement::kLow, PoolRange range = {});
  // Places `bytes` (rounded) exactly at `offset`, which must lie in one free
  // segment with its end; kOutOfMemory (nothing changes) when it does not.
  StatusOr<Allocation> AllocateAt(size_t offset, size_t bytes, MemoryCategory category);
  void Free(AllocationId id);
  // Moves allocation `id` into the lowest free segment that holds it (its
  // own space counts as free) and returns its new offset. Used to compact the
  // pool; the caller moves the bytes.
  size_t MoveDown(AllocationId id);
  // The end of the highest live allocation (0 when none).
  size_t LiveEnd() const;
  // Live allocations by increasing offset.
  std::vector<std::pair<size_t, AllocationId>> AllocationsByOffset() const;

  size_t capacity() const { return capacity_; }
  FitPolicy fit() const { return fit_; }
  const PoolStats& stats() const { return stats_; }
  // Whether a request of `bytes` would succeed now.
  bool CanAllocate(size_t bytes) const;
  // The largest request that fits inside `range` now.
  size_t LargestFree(PoolRange range) const;
  // Dymem's unusable free space U_f for a request of `bytes`: the fraction
  // of free memory in segments too small to hold it (0 = none unusable).
  double UnusableFree(size_t bytes) const;
  // The free bytes in segments too small to hold a request of `bytes`.
  size_t UnusableBytes(size_t bytes) const;
  // Forgets the peaks (not the live allocations): a new measurement window.
  void ResetPeaks();

  // Verifies every internal invariant; returns a description of the first
  // violation, or an empty string.
  std::string CheckInvariants() const;

 private:
  struct Node {
    size_t offset;
    size_t bytes;
    MemoryCategory category;
  };

  void InsertFree(size_t offset, size_t bytes);
  // Returns [offset, offset + bytes) to the free lists, merged with its free
  // neighbours.
  void GiveBack(size_t offset, size_t bytes);
  void EraseFree(std::map<size_t, size_t>::iterator it);
  std::map<size_t, size_t>::iterator FindSegment(size_t bytes);
  // The offset at which `need` bytes go inside `range`, or SIZE_MAX.
  size_t Choose(size_t need, Placement placement, PoolRange range);
  // Takes [offset, offset + need) out of the free segment `seg` holding it.
  Allocation Carve(std::map<size_t, size_t>::iterator seg, size_t offset, size_t need,
                   MemoryCategory category);
  void UpdateFreeStats();
  Allocation Record(size_t offset, size_t need, MemoryCategory category);

  size_t capacity_;
  FitPolicy fit_;
  std::map<size_t, size_t> free_by_offset_;           // offset -> bytes
  std::set<std::pair<size_t, size_t>> free_by_size_;  // (bytes, offset)
  std::unordered_map<AllocationId, Node> allocated_;
  AllocationId next_id_ = 0;
  PoolStats stats_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_HEAP_POOL_H_
