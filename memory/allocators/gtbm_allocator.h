// gtbm: Group Tensors By Mobility (Dymem §3.3) - the device region as a
// unified pool of a main space and an incremental space, each tensor placed
// in the arena of its mobility (memory/mobility.h), so that long-lived
// tensors do not split the holes short-lived ones leave.
//
// Layout of the region of `capacity` bytes
//   [0, main_size)         the main space, used from both ends:
//       low end   movable tensors, workspaces, and persistent tensors (placed
//                 first, never freed): the best-fitting hole among the
//                 movables, else the low end of the gap between the
//                 frontiers (`cnmemMalloc`, never above the lowest
//                 high-end block);
//       high end  temporary tensors: a top-down search of the free space
//                 above the highest movable, placed at the top of the
//                 highest segment that holds them (`cnmemHighMalloc`). The
//                 temporaries a step writes are placed longest-lived first,
//                 so that they leave in the reverse order of their arrival.
//                 The high end is a stack, and a movable allocated in
//                 backward that leaves no later than the block at its top
//                 (its lowest) may join it, directly below that block: it
//                 leaves first, so the stack stays last-in first-out and
//                 leaves no hole (the stacking rule, below);
//   [main_size, capacity)  the incremental space: reclaimed tensors, each
//                 in the best-fitting hole (lowest first). While they leave
//                 last-in first-out this is the paper's stack, growing from
//                 main_size; a tensor that leaves out of order leaves a hole
//                 the next request of its size reuses, instead of stranding
//                 its space until every block above it has gone (a chain of
//                 small layers would otherwise grow the stack by a block per
//                 layer).
// The incremental space is sized from a profiled iteration: the allocator
// plans one under the accounting-only allocator first (as the static
// allocator does) and replays its reclaimed requests with the same best fit.
// A reclaimed request that finds no room there goes to the high end (an
// overflow).
//
// Stacking rule (GtbmStacking): which movables may join the high end's
// stack. `none` is the paper's strict grouping. `prefetched`: forward
// tensors brought back in backward (Algorithm 2's prefetches, which arrive
// in order of use and leave first in, first out, so best fit among the
// short-lived gradients strands holes around them), also onto an empty high
// end. `movables`: every movable allocated in backward, onto a non-empty
// high end (a residual block's gradients nest inside the lifetime of the
// block input's gradient, a temporary). Which one packs tighter depends on
// the network, so the factory replays an iteration profiled in an
// oversized pool under each and keeps the smallest squeezed pool (ties: the
// earlier rule); `none` without a profile. Plans and runs make the same
// choice. When a tensor leaves is its last use in the schedule
// (memory/liveness.h).
//
// Invariants (CheckInvariants, after every event in the tests)
//   * the arenas never interleave: no low-end block ends above the lowest
//     high-end one - the low frontier stays at or below the high frontier;
//   * main blocks lie in [0, main_size), incremental ones in
//     [main_size, capacity);
//   * both pools' own invariants hold (memory/heap_pool.h).
//
// Sizing (Dymem §3.3.3): the squeeze gap is the smallest free gap between
// the frontiers at any event. A main space of main_size - squeeze_gap would
// have held every placement made (a block's place relative to its end of
// the pool does not depend on the pool's size), so the footprint - what a
// budget must cover - is that plus the incremental space's peak (the
// highest end its blocks reached).
//
// gtbm_soft: the paper calls the grouping a "soft guarantee". A request that
// finds no room in its own arena takes free space anywhere in the main space
// (movables by best fit, temporaries top-down): the arenas may then
// interleave, and the frontiers stop bounding anything (footprint: the main
// space's span plus the stack's peak).
#ifndef SPILL_MEMORY_ALLOCATORS_GTBM_ALLOCATOR_H_
#define SPILL_MEMORY_ALLOCATORS_GTBM_ALLOCATOR_H_

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memory/allocators/allocator.h"
#include "memory/liveness.h"
#include "memory/mobility.h"

namespace spill {

enum class GtbmStacking { kNone, kPrefetched, kMovables };
const char* GtbmStackingName(GtbmStacking stacking);

class GtbmAllocator : public DeviceAllocator {
 public:
  // `incremental_bytes` of `capacity` (rounded down to blocks) go to the
  // incremental space; `classes` are the view's (ClassifyMobility). `view`
  // must outlive the allocator. `soft`: gtbm_soft.
  GtbmAllocator(size_t capacity, size_t incremental_bytes, const NetworkView& view,
                MobilityClasses classes, bool soft = false,
                GtbmStacking stacking = GtbmStacking::kNone);

  const char* name() const override { return soft_ ? "gtbm_soft" : "gtbm"; }
  double UnusableFree(size_t bytes) const override;
  size_t PeakFootprint() const override { return MainPeak() + incremental_peak(); }
  size_t Extent() const override;
  std::vector<TensorId> PlacementOrder(const Step& step) const override;
  Status BeginIteration(Phase phase) override;

  // The arena a request goes to (reclaimed: the incremental space).
  Mobility Classify(const AllocRequest& request) const;
  GtbmStacking stacking() const { return stacking_; }
  // Movables placed on the high end's stack.
  int64_t stacked() const { return stacked_; }
  size_t main_size() const { return main_size_; }
  size_t incremental_size() const { return incremental_size_; }
  // The least free gap between the low and the high frontier at any event.
  size_t squeeze_gap() const { return squeeze_gap_; }
  // The most the two ends of the main space held at once.
  size_t MainPeak() const { return main_size_ - squeeze_gap_; }
  // The highest end the incremental space's blocks reached.
  size_t incremental_peak() const { return incremental_.stats().high_water; }
  // Reclaimed requests placed at the high end for want of incremental room.
  int64_t overflows() const { return overflows_; }
  // gtbm_soft: requests placed in the other arena for want of room in theirs.
  int64_t crossings() const { return crossings_; }
  // The end of the highest movable block and the start of the lowest
  // temporary one (main_size when none).
  size_t LowFrontier() const;
  size_t HighFrontier() const;

 protected:
  StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) override;
  void Unplace(AllocationId id, size_t offset, size_t bytes) override;
  bool Fits(size_t bytes) const override { return Largest() >= bytes; }
  // For a movable request (workspaces, prefetches).
  size_t Largest() const override {
    return pool_.LargestFree(soft_ ? PoolRange{} : PoolRange{0, HighFrontier()});
  }
  size_t FreeSegments() const override;
  std::string CheckPlacement() const override;

 private:
  enum class Arena { kLow, kHigh, kIncremental };
  struct Block {
    Arena arena;
    AllocationId pool_id = -1;  // in its space's pool
    size_t offset = 0;          // main: in the region; incremental: from main_size
    size_t bytes = 0;
  };

  // `leave`: the step after which the block goes (LeaveStep).
  StatusOr<size_t> PlaceInMain(Arena arena, MemoryCategory category, size_t bytes, AllocationId id,
                               int leave);
  // The step after which the request's tensor leaves (its last use).
  int LeaveStep(const AllocRequest& request) const;
  // Whether a movable may join the high end's stack under the rule.
  bool JoinsStack(const AllocRequest& request, int leave) const;
  // Places a movable directly below the high end's lowest block.
  StatusOr<size_t> PlaceOnStack(const AllocRequest& request, size_t bytes, AllocationId id,
                                int leave);
  void NoteFrontiers();

  const NetworkView& view_;
  const bool soft_;
  const GtbmStacking stacking_;
  const size_t main_size_;
  const size_t incremental_size_;
  HeapPool pool_;         // the main space, best fit
  HeapPool incremental_;  // the incremental space, best fit
  MobilityClasses classes_;
  Liveness train_, eval_;  // for the order of same-step temporaries
  Phase phase_ = Phase::kTrain;
  std::unordered_map<AllocationId, Block> blocks_;
  std::set<std::pair<size_t, size_t>> low_, high_;  // (offset, bytes) of each end's blocks
  std::unordered_map<size_t, int> high_leave_;      // offset -> leave step, of high blocks
  size_t squeeze_gap_;
  int64_t overflows_ = 0;
  int64_t crossings_ = 0;
  int64_t stacked_ = 0;
};

// The highest end the reclaimed requests of `profile` reach in the
// incremental space's best fit: the space they need.
size_t IncrementalSpacePeak(const AllocationProfile& profile, const NetworkView& view,
                            const MobilityClasses& classes);

// The footprint (squeezed main space plus the incremental peak) of `profile`'s
// requests replayed in a roomy pool under `stacking`.
size_t GtbmReplayFootprint(const AllocationProfile& profile, const NetworkView& view,
                           const MobilityClasses& classes, size_t incremental_bytes,
                           GtbmStacking stacking);

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_GTBM_ALLOCATOR_H_
