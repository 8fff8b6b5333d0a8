// The merge-sort tree behind the DSA heuristic's candidate search; see the
// header for the layout. Ranks are compared instead of blocks: rank 0 is the
// block the heuristic prefers most, and n_ stands for "none".
#include "memory/allocators/dsa_candidate_index.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "framework/base/check.h"

namespace spill {
namespace {

// Runs shorter than this many positions are scanned directly: a scan of a few
// dozen entries costs less than a binary search plus a tree walk, and it keeps
// the tree's memory down.
constexpr int kLeafChunk = 32;

uint64_t Lifetime(const DsaBlock& block) {
  // Unsigned: free_time >= alloc_time, so the difference fits even when it
  // does not fit in int64_t.
  return static_cast<uint64_t>(block.free_time) - static_cast<uint64_t>(block.alloc_time);
}

}  // namespace

DsaCandidateIndex::DsaCandidateIndex(const std::vector<DsaBlock>& blocks) {
  SPILL_CHECK_LT(blocks.size(), static_cast<size_t>(INT_MAX / 4)) << "too many DSA blocks";
  n_ = static_cast<int>(blocks.size());

  by_rank_.resize(n_);
  std::iota(by_rank_.begin(), by_rank_.end(), 0);
  std::sort(by_rank_.begin(), by_rank_.end(), [&](int i, int j) {
    uint64_t li = Lifetime(blocks[i]), lj = Lifetime(blocks[j]);
    if (li != lj) return li > lj;
    if (blocks[i].bytes != blocks[j].bytes) return blocks[i].bytes > blocks[j].bytes;
    return i < j;
  });
  std::vector<int> rank(n_);  // block -> rank
  for (int r = 0; r < n_; ++r) rank[by_rank_[r]] = r;

  at_.resize(n_);
  std::iota(at_.begin(), at_.end(), 0);
  std::sort(at_.begin(), at_.end(), [&](int i, int j) {
    if (blocks[i].alloc_time != blocks[j].alloc_time) {
      return blocks[i].alloc_time < blocks[j].alloc_time;
    }
    return i < j;
  });
  position_.resize(n_);
  starts_.resize(n_);
  ends_.resize(n_);
  for (int p = 0; p < n_; ++p) {
    position_[at_[p]] = p;
    starts_[p] = blocks[at_[p]].alloc_time;
    ends_[p] = blocks[at_[p]].free_time;
  }
  rank_at_.resize(n_);
  for (int p = 0; p < n_; ++p) rank_at_[p] = rank[at_[p]];
  BuildLevels();
}

void DsaCandidateIndex::BuildLevels() {
  // `order` holds positions, sorted by (free_time, position) within each
  // chunk of the level being built; each level merges pairs of the last.
  std::vector<int> order(n_);
  std::iota(order.begin(), order.end(), 0);
  auto by_end = [&](int p, int q) { return ends_[p] != ends_[q] ? ends_[p] < ends_[q] : p < q; };
  for (int base = 0; base < n_; base += kLeafChunk) {
    std::sort(order.begin() + base, order.begin() + std::min(n_, base + kLeafChunk), by_end);
  }
  std::vector<int> merged(n_);
  for (int chunk = kLeafChunk; chunk < 2 * n_ && n_ > kLeafChunk; chunk *= 2) {
    if (chunk > kLeafChunk) {
      const int half = chunk / 2;
      for (int base = 0; base < n_; base += chunk) {
        const int mid = std::min(n_, base + half), end = std::min(n_, base + chunk);
        std::merge(order.begin() + base, order.begin() + mid, order.begin() + mid,
                   order.begin() + end, merged.begin() + base, by_end);
      }
      order.swap(merged);
    }
    Level level;
    level.chunk = chunk;
    level.ends.resize(n_);
    level.slot.resize(n_);
    level.tree.assign(2 * static_cast<size_t>(n_), n_);
    for (int base = 0; base < n_; base += chunk) {
      const int m = std::min(chunk, n_ - base);
      int* tree = &level.tree[2 * static_cast<size_t>(base)];
      for (int j = 0; j < m; ++j) {
        const int p = order[base + j];
        level.ends[base + j] = ends_[p];
        level.slot[p] = j;
        tree[m + j] = rank_at_[p];
      }
      for (int i = m - 1; i >= 1; --i) tree[i] = std::min(tree[2 * i], tree[2 * i + 1]);
    }
    levels_.push_back(std::move(level));
    if (chunk >= n_) break;
  }
}

int DsaCandidateIndex::ScanRange(int begin, int end, int64_t b) const {
  int best = n_;
  for (int p = begin; p < end; ++p) {
    if (ends_[p] <= b) best = std::min(best, rank_at_[p]);  // n_ once placed
  }
  return best;
}

int DsaCandidateIndex::ChunkBest(Level& level, int base, int64_t b) {
  const int m = std::min(level.chunk, n_ - base);
  const int64_t* ends = &level.ends[base];
  const int r = static_cast<int>(std::upper_bound(ends, ends + m, b) - ends);  // [0, r) fits
  int* tree = &level.tree[2 * static_cast<size_t>(base)];
  for (;;) {
    int best = n_;
    for (int l = m, hi = m + r; l < hi; l >>= 1, hi >>= 1) {
      if (l & 1) best = std::min(best, tree[l++]);
      if (hi & 1) best = std::min(best, tree[--hi]);
    }
    if (best == n_) return best;
    const int p = position_[by_rank_[best]];
    if (rank_at_[p] != n_) return best;
    // Placed since this chunk last saw it: drop it here and look again. Ranks
    // are unique, so an ancestor whose minimum is another rank keeps it, and
    // so does everything above that ancestor.
    int i = m + level.slot[p];
    tree[i] = n_;
    for (i >>= 1; i >= 1 && tree[i] == best; i >>= 1) {
      tree[i] = std::min(tree[2 * i], tree[2 * i + 1]);
    }
  }
}

int DsaCandidateIndex::Best(int64_t a, int64_t b) {
  if (a > b || n_ == 0) return -1;
  const int lo =
      static_cast<int>(std::lower_bound(starts_.begin(), starts_.end(), a) - starts_.begin());
  const int hi =
      static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), b) - starts_.begin());
  const int aligned_lo = (lo + kLeafChunk - 1) / kLeafChunk * kLeafChunk;
  const int aligned_hi = hi / kLeafChunk * kLeafChunk;
  int best;
  if (aligned_lo >= aligned_hi || levels_.empty()) {
    best = ScanRange(lo, hi, b);
  } else {
    best = std::min(ScanRange(lo, aligned_lo, b), ScanRange(aligned_hi, hi, b));
    // Cover [aligned_lo, aligned_hi) with the largest whole chunks that fit.
    for (int pos = aligned_lo; pos < aligned_hi;) {
      size_t l = 0;
      while (l + 1 < levels_.size()) {
        const int bigger = levels_[l + 1].chunk;
        if (pos % bigger != 0 || aligned_hi - pos < bigger) break;
        ++l;
      }
      best = std::min(best, ChunkBest(levels_[l], pos, b));
      pos += levels_[l].chunk;
    }
  }
  return best == n_ ? -1 : by_rank_[best];
}

void DsaCandidateIndex::Remove(int block) {
  SPILL_CHECK(block >= 0 && block < n_) << "block " << block << " of " << n_;
  const int p = position_[block];
  SPILL_CHECK_NE(rank_at_[p], n_) << "block " << block << " placed twice";
  rank_at_[p] = n_;  // the chunks drop it when a query meets it (ChunkBest)
}

}  // namespace spill
