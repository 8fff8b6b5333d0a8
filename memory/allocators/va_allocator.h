// va: virtual addressing (the window paper, §4; refinements as nnabla's
// VirtualCachingAllocator makes them). Physical memory is a fixed number of
// chunks of `memory.va_chunk` bytes; every request gets a fresh contiguous
// virtual range with ceil(bytes / chunk) chunks mapped into it, taken from
// anywhere. Chunks combine in any order, so memory never fragments
// externally: a request fits whenever enough chunks are free.
//
// Policy
//   * Large requests (a quarter chunk or more) get a range of their own.
//     A freed range stays mapped, in a cache of free ranges, merged with
//     cached neighbours. A request takes, in this order: a cached range of
//     exactly its size (nothing to map); the head of the smallest larger
//     one, whose rest stays cached (nothing to map); the largest smaller
//     one grown in place when the addresses after it are free (maps the
//     missing chunks); or a fresh range (maps all of them). Among equal
//     sizes the lowest addressed range is taken.
//   * Chunks for mapping come from the free list (lowest first), then from
//     chunks never used, then from cached ranges: the tail of the smallest
//     one that holds what is missing, else all of the largest ones. Only
//     then are they unmapped (lazily), once the compute queued before the
//     free that cached them has run, so nothing queued still touches them:
//     the runtime frees a block only after the copies on it have ended or
//     the compute queue waits for them, so one event of the compute queue,
//     recorded at each free that caches a range, fences it. The copy queues
//     are not drained: an unmap does not wait for copies on other blocks.
//   * Small requests share arenas of one chunk, each a best-fit pool; an
//     arena whose last block is freed goes to the range cache. So a 4 KiB
//     bias never costs a 40 MiB chunk. Small means below a quarter chunk
//     for persistent tensors (they never leave, so their arenas never
//     fragment) and below min(a quarter chunk, 1 MiB) for the others, whose
//     comings and goings would fragment arenas as they would any pool.
//   * Addresses are plentiful (kAddressSpaceFactor times the budget), taken
//     first fit in whole chunks. If no range is free, every cached range is
//     unmapped and the search repeats.
//   * Every iteration starts from the same state: the cached ranges the
//     first iteration ended with. At the end of each later iteration,
//     cached chunks at those addresses stay, others are unmapped, and
//     addresses left uncovered are mapped again. So an iteration's offsets
//     repeat in every iteration, and a plan of two iterations equals a run
//     of many.
//
// Accounting, exactly as mapped (planning counts chunks, a run maps them):
//   footprint   chunks held by live requests (ranges and arenas) x chunk;
//               what a budget must cover. Cached ranges are mapped but
//               free: they are given up on demand.
//   Eq. 1       per request, internal fragmentation m_a - m_r < one chunk;
//   Eq. 2       at every moment, footprint <= live bytes + live requests x
//               chunk (checked after every request; counted when broken).
//
// Physical memory: a chunk's memory is made when it is first mapped. A
// device that refuses it (another process holds the memory) fails the
// request with kOutOfMemory in the device's words, and the request is
// undone: its addresses and chunks go back, nothing it mapped stays mapped.
// The runtime reports it at the step that asked.
//
// Decisions depend only on the sequence of requests: with no device
// (planning) the same ranges, offsets and chunks are chosen and nothing is
// mapped. Offsets are from the reserved address range's base.
#ifndef SPILL_MEMORY_ALLOCATORS_VA_ALLOCATOR_H_
#define SPILL_MEMORY_ALLOCATORS_VA_ALLOCATOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "framework/base/units.h"
#include "framework/device/device.h"
#include "memory/allocators/allocator.h"

namespace spill {

// Addresses reserved per byte of budget: ranges are never short of them.
constexpr size_t kAddressSpaceFactor = 8;
// The default physical chunk: the CUDA driver's usual mapping granularity.
constexpr size_t kDefaultChunkBytes = 2 * kMiB;
// Chunks are mapped with mmap on the CPU: whole pages.
constexpr size_t kChunkAlignmentBytes = 4 * kKiB;

// Transient requests below this (and below a quarter chunk) share arenas.
constexpr size_t kSmallTransientBytes = size_t{1} << 20;  // 1 MiB

// Chunks a scheduler that plans in bytes leaves to arenas' unused room.
constexpr size_t kArenaSlackChunks = 2;

// Whether a request of `bytes` shares an arena under chunks of `chunk`.
inline bool SharesArena(size_t bytes, size_t chunk, bool persistent) {
  const size_t limit = persistent ? chunk / 4 : std::min(chunk / 4, kSmallTransientBytes);
  return bytes < limit;
}

struct VaStats {
  size_t chunk = 0;
  size_t chunks = 0;  // physical chunks (the budget)
  size_t held = 0;    // chunks backing live requests
  size_t peak_held = 0;
  size_t mapped = 0;  // held + cached
  size_t peak_mapped = 0;
  size_t live_bytes = 0;  // sum of the live requests' sizes as asked (m_r)
  int64_t live_requests = 0;
  size_t max_internal = 0;   // largest m_a - m_r of any request (Eq. 1)
  size_t internal_now = 0;   // sum of m_a - m_r over live requests
  int64_t bound_breaks = 0;  // moments where Eq. 2 did not hold
  int64_t exact_reuses = 0;  // requests served by a cached range as it was
  int64_t splits = 0;        // requests served by the head of a larger cached range
  int64_t grows = 0;         // cached ranges grown in place
  int64_t fresh = 0;         // fresh ranges
  int64_t maps = 0;          // chunks mapped
  int64_t unmaps = 0;        // chunks unmapped
  int64_t flushes = 0;       // every cached range unmapped for addresses
  double map_seconds = 0;    // time in the device's map and unmap calls
};

class VirtualAddressAllocator : public DeviceAllocator {
 public:
  VirtualAddressAllocator(size_t capacity, size_t chunk_bytes);
  ~VirtualAddressAllocator() override;

  const char* name() const override { return "va"; }
  StatusOr<void*> Reserve(Device& device) override;
  void Release(Device& device, void* base) override;
  size_t PeakFootprint() const override { return stats_.peak_held * chunk_; }
  size_t address_space() const override { return slots_ * chunk_; }
  MappingCounts mapping_counts() const override { return {stats_.maps, stats_.unmaps}; }
  // What the live requests span: their chunks (addresses are not memory).
  size_t Extent() const override { return stats_.held * chunk_; }
  double UnusableFree(size_t bytes) const override;
  const VaStats& va_stats() const { return stats_; }
  size_t chunk_bytes() const { return chunk_; }
  // Transient requests below this share arenas.
  size_t small_limit() const { return std::min(chunk_ / 4, kSmallTransientBytes); }
  // Forgets the peaks and counters, not the state: a new measurement.
  void ResetCounters();
  // After the first iteration, restores the cached ranges it ended with.
  void EndIteration() override;

 protected:
  StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) override;
  void Unplace(AllocationId id, size_t offset, size_t bytes) override;
  bool Fits(size_t bytes) const override;
  size_t Largest() const override;
  size_t FreeSegments() const override { return Available() > 0 ? 1 : 0; }
  std::string CheckPlacement() const override;
  AllocationId TakeUnmapFence() override;

 private:
  // The free after which a cached range's chunks may be unmapped: the
  // compute queued before it must have run. Frees are numbered in order, so
  // a range merged from others waits for the latest of theirs.
  struct Fence {
    uint64_t seq = 0;              // 0: nothing to wait for
    AllocationId block = -1;       // the block freed (for the event log)
    std::shared_ptr<Event> event;  // null while planning
    void Join(const Fence& other) {
      if (other.seq > seq) *this = other;
    }
  };
  struct Range {
    size_t slot = 0;             // first chunk slot of its addresses
    std::vector<size_t> chunks;  // physical chunks, in address order
    Fence fence;
  };
  struct Arena {
    Range range;
    std::unique_ptr<HeapPool> pool;
    int live = 0;
  };
  struct Live {
    bool small = false;
    Range range;     // large
    int arena = -1;  // small: arena id and block in its pool
    AllocationId block = -1;
    size_t asked = 0;  // m_r
    size_t given = 0;  // m_a
  };
  enum class How { kNone, kExact, kSplit, kGrow, kFresh, kFreshAfterFlush };
  // Cached ranges by (chunks, slot): the lowest addressed of a size first.
  using CacheMap = std::map<std::pair<size_t, size_t>, Range>;
  struct Choice {
    How how = How::kNone;
    CacheMap::const_iterator cached;  // kExact, kGrow
  };

  size_t Available() const { return free_.size() + (chunks_ - next_unused_) + cached_chunks_; }
  Choice Choose(size_t k) const;
  StatusOr<Range> PlaceRange(size_t k);
  StatusOr<size_t> PlaceSmall(size_t bytes, AllocationId id);
  // Takes `n` chunks for a range: free list, never used, then cached ranges.
  StatusOr<std::vector<size_t>> TakeChunks(size_t n);
  void Insert(Range range);
  Range TakeCached(CacheMap::const_iterator it);
  Status Reclaim(CacheMap::const_iterator it, size_t count);
  Status Restore();
  Status FlushCache();
  Status MapChunks(size_t slot, const std::vector<size_t>& chunks, size_t from);
  void UndoTake(size_t slot, std::vector<size_t>* chunks, size_t from);
  Status Unmap(const Range& run);
  // Back to planning's mappings (no reservation).
  void Unreserve();
  // First-fit addresses in chunk slots.
  bool TakeSlots(size_t n, size_t* slot);
  bool TakeSlotsAt(size_t slot, size_t n);
  void GiveSlots(size_t slot, size_t n);
  size_t LargestSlots() const;
  size_t LargestSlotsAfterFlush() const;
  // Caches the range of a block just freed, fenced by that free.
  void Cache(Range range, AllocationId freed);
  void Note(const Live& live, bool added);

  size_t chunk_;
  size_t chunks_;  // physical chunks
  size_t slots_;   // address slots
  size_t next_unused_ = 0;
  std::set<size_t> free_;                // free chunks, lowest taken first
  std::map<size_t, size_t> free_slots_;  // slot -> count
  std::multiset<size_t> free_slot_sizes_;
  CacheMap cache_;                      // mapped, unused ranges
  std::map<size_t, size_t> cached_at_;  // the same, slot -> chunks
  size_t cached_chunks_ = 0;
  // The cached ranges (slot, chunks) the first iteration ended with, by slot.
  std::vector<std::pair<size_t, size_t>> warm_;
  bool warmed_ = false;
  Status pending_;               // a mapping failure while restoring, reported by the next request
  std::map<int, Arena> arenas_;  // by id, oldest first
  int next_arena_ = 0;
  std::unordered_map<AllocationId, Live> live_;
  VaStats stats_;
  // The mappings: the device's virtual memory once reserved, and while
  // planning a stand-in that maps nothing (the same decisions either way).
  std::unique_ptr<VirtualMemory> vm_;
  // An event of the compute queue, recorded now (null while planning).
  std::function<std::shared_ptr<Event>()> record_;
  uint64_t frees_ = 0;    // frees that cached a range, numbering fences
  Fence unmapped_fence_;  // the latest fence of the unmaps not yet taken
};

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_VA_ALLOCATOR_H_
