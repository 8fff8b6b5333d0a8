// Dynamic Storage Allocation (DSA): static offsets for a profiled trace of
// allocations (Sekiyama et al., "Profile-guided memory optimization for deep
// neural networks", arXiv 1804.10001, §3).
//
// Problem
//   Every block has a size and a closed lifetime [alloc_time, free_time] on an
//   integer event clock. Give each block an offset so that two blocks whose
//   lifetimes intersect never share an address, and make the footprint
//   u = max(offset + bytes) small. It is 2-D strip packing with the x positions
//   fixed (time on x, address on y), and NP-hard; the sum of bytes live at one
//   time (max load) is a lower bound for every placement.
//
// Policy: the paper's best-fit skyline heuristic (§3.2, after Burke et al.)
//   * The skyline is a list of offset lines: maximal time intervals [a, b] at
//     one height h that partition [min alloc_time, max free_time]. At first
//     there is one line at height 0.
//   * Repeatedly take the lowest line (ties: the leftmost). Among the unplaced
//     blocks whose lifetime lies inside [a, b], place the one with the longest
//     lifetime (free_time - alloc_time; ties: more bytes, then the smaller
//     index) at offset h. The line splits into up to three lines and lines of
//     equal height merge.
//   * A line with no such block is lifted to the lower of its neighbours'
//     heights and merged with the neighbour(s) it now equals. The space below
//     it is wasted, which is why u can exceed the max load.
//   * The search is indexed (dsa_candidate_index.h): O(n log² n) in all,
//     instead of the paper's O(n²), so 10^5 blocks solve in well under a
//     second.
//
// Invariants
//   * The result depends only on the blocks and their order (no randomness,
//     no pointer order): the same input always gives the same offsets.
//   * No two blocks with intersecting lifetimes overlap in address, and
//     footprint == max(offset + bytes) >= DsaMaxLoad(blocks).
//   * Sizes are taken as given; callers that want aligned offsets round sizes
//     up first (the pool rounds to 1 KiB blocks), and then every offset is a
//     sum of sizes, so it is aligned too.
//
// Blocks come from a planner, not from users, so a block with zero bytes, a
// lifetime that ends before it starts, or sizes whose sum overflows size_t is
// an internal error (SPILL_CHECK naming the block). CheckDsaSolution reports
// the same defects as text instead.
#ifndef SPILL_MEMORY_ALLOCATORS_DSA_SOLVER_H_
#define SPILL_MEMORY_ALLOCATORS_DSA_SOLVER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/allocators/dsa_block.h"

namespace spill {

// Blocks recorded as a profile records them: one clock tick per allocation
// or free, from tick 0. Blocks never freed live until the last event. For
// building instances (tests, benchmarks) event by event.
class DsaTrace {
 public:
  // A block of `bytes`, allocated now; returns its index.
  int Alloc(size_t bytes) {
    blocks_.push_back({bytes, clock_++, -1});
    return static_cast<int>(blocks_.size()) - 1;
  }
  void Free(int block) { blocks_[block].free_time = clock_++; }
  std::vector<DsaBlock> Finish() const {
    std::vector<DsaBlock> blocks = blocks_;
    for (DsaBlock& block : blocks) {
      if (block.free_time < 0) block.free_time = clock_ - 1;
    }
    return blocks;
  }

 private:
  std::vector<DsaBlock> blocks_;
  int64_t clock_ = 0;
};

struct DsaSolution {
  std::vector<size_t> offsets;  // one per block, same order
  size_t footprint = 0;         // max(offset + bytes), 0 for no blocks
};

// The first allocation time and the last free time of non-empty `blocks`:
// the span of event times the skyline starts as one line over.
struct DsaTimeSpan {
  int64_t first = 0, last = 0;
};
DsaTimeSpan DsaBlockSpan(const std::vector<DsaBlock>& blocks);

// The paper's best-fit skyline heuristic, with the tie-breaks above.
DsaSolution SolveDsaBestFit(const std::vector<DsaBlock>& blocks);

// The highest sum of bytes of blocks live at one event time: a lower bound
// for the footprint of any placement.
size_t DsaMaxLoad(const std::vector<DsaBlock>& blocks);

// "" when every block is well formed, no two lifetime-overlapping blocks
// overlap in address and footprint == max(offset + bytes); otherwise a
// description of the first violation found. O(n log n).
std::string CheckDsaSolution(const std::vector<DsaBlock>& blocks, const DsaSolution& solution);

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_DSA_SOLVER_H_
