// The candidate search of the DSA best-fit heuristic, indexed.
//
// Query: among the unplaced blocks with a <= alloc_time and free_time <= b,
// the best by the heuristic's order (longest lifetime, then more bytes, then
// the smaller index). That is a max over a 2-D quadrant with deletions, so the
// index is a merge-sort tree:
//   * blocks are sorted by alloc_time; a query's alloc_time range [a, b] is a
//     contiguous run of that order;
//   * the run splits into O(log n) aligned chunks; each chunk keeps its blocks
//     sorted by free_time, so "free_time <= b" is a prefix found by binary
//     search, and a small min-tree over that order gives the best rank in the
//     prefix;
//   * placing a block only marks it; a chunk drops it from its tree when a
//     query first finds it there, so chunks no query reads again cost nothing;
//   * chunks of fewer than kLeafChunk blocks are not stored: the ends of a
//     run are scanned directly.
// Removal is O(1); a query is O(log² n) plus its share of the deferred drops
// (a block leaves each of its O(log n) chunks at most once); memory is
// O(n log n) integers.
//
// Invariant: Best() returns exactly what a linear scan of the unplaced blocks
// would (tests compare the two on random instances).
#ifndef SPILL_MEMORY_ALLOCATORS_DSA_CANDIDATE_INDEX_H_
#define SPILL_MEMORY_ALLOCATORS_DSA_CANDIDATE_INDEX_H_

#include <cstdint>
#include <vector>

#include "memory/allocators/dsa_block.h"

namespace spill {

class DsaCandidateIndex {
 public:
  explicit DsaCandidateIndex(const std::vector<DsaBlock>& blocks);

  // The best unplaced block whose lifetime lies inside [a, b], or -1. Not
  // const: it drops placed blocks from the chunks it reads.
  int Best(int64_t a, int64_t b);
  // Marks `block` placed; it is never returned again.
  void Remove(int block);

 private:
  // One level of the tree: chunks of `chunk` consecutive positions (in
  // alloc_time order), each sorted by free_time.
  struct Level {
    int chunk = 0;
    std::vector<int64_t> ends;  // free_time, sorted within each chunk
    std::vector<int> slot;      // position -> its index within its chunk's order
    std::vector<int> tree;      // per chunk of m entries: a min-tree of 2m ranks at 2 * base
  };

  void BuildLevels();
  int ScanRange(int begin, int end, int64_t b) const;
  int ChunkBest(Level& level, int base, int64_t b);

  int n_ = 0;
  std::vector<int> by_rank_;     // rank in the heuristic's order (0 = best) -> block
  std::vector<int> position_;    // block -> position in alloc_time order
  std::vector<int> at_;          // position -> block
  std::vector<int64_t> starts_;  // position -> alloc_time (sorted)
  std::vector<int64_t> ends_;    // position -> free_time
  std::vector<int> rank_at_;     // position -> rank, n_ once placed
  std::vector<Level> levels_;    // chunk sizes kLeafChunk, 2 * kLeafChunk, ...
};

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_DSA_CANDIDATE_INDEX_H_
