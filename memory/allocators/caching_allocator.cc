// caching: the caching best fit of CNMeM and of PyTorch's CUDA allocator -
// the baseline Dymem (HPDC '20) and vDNN were measured on.
//
// Device memory is held in segments, one per growth: a request that no
// cached free block holds makes a new segment of exactly its size (a
// `cudaMalloc` in those libraries), and the pool never gives a segment back.
// Within a segment, blocks split on allocation and free neighbours coalesce;
// across segments they never do, because two `cudaMalloc` results are not
// one range even when they happen to be adjacent. That is the difference
// from `best_fit`, whose one region lets the free space at its top merge with
// any request: here a request larger than every cached hole grows the pool
// by its whole size even when the holes add up to more (Dymem's Fig. 7).
//
// Every iteration starts from the same state: at its start and at its end
// the free segments at the top are given back (what `torch.cuda.empty_cache()`
// does between iterations), so the segments held then are those of the
// blocks that outlive iterations - parameters, their gradients, solver state.
// Within an iteration segments are never given back, and a plan from shapes
// places every block where the run does.
//
// Layout: segments are stacked from offset 0 in the order they were made;
// the footprint is the end of the last one (all of them are held). A request
// takes the smallest cached free block that holds it (ties: lowest address)
// at that block's low end; otherwise a new segment at the top, if the budget
// has room; otherwise kOutOfMemory, and nothing changes.
//
// Invariants (CheckPlacement): blocks tile every segment exactly; no two
// free blocks of one segment are adjacent; the size index mirrors the free
// blocks; segments tile [0, top).
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "memory/allocators/allocator.h"

namespace spill {
namespace {

class CachingAllocator : public DeviceAllocator {
 public:
  explicit CachingAllocator(size_t capacity) : DeviceAllocator(capacity) {}

  const char* name() const override { return "caching"; }
  double UnusableFree(size_t bytes) const override;
  size_t Extent() const override { return top_; }
  Status BeginIteration(Phase) override {
    GiveBackFreeTop();
    return Status::Ok();
  }
  void EndIteration() override { GiveBackFreeTop(); }

 protected:
  StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) override;
  void Unplace(AllocationId id, size_t offset, size_t bytes) override;
  bool Fits(size_t bytes) const override { return Largest() >= bytes; }
  size_t Largest() const override;
  size_t FreeSegments() const override { return free_by_size_.size() + (Unreserved() ? 1 : 0); }
  std::string CheckPlacement() const override;

 private:
  struct Block {
    size_t bytes;
    size_t segment;  // the offset of the segment it belongs to
    bool free;
  };
  size_t Unreserved() const { return capacity() - top_; }
  void MarkFree(size_t offset, size_t bytes, size_t segment);
  void Coalesce(std::map<size_t, Block>::iterator it);
  void GiveBackFreeTop();

  std::map<size_t, Block> blocks_;                    // by offset: every block, live or free
  std::set<std::pair<size_t, size_t>> free_by_size_;  // (bytes, offset) of free blocks
  std::map<size_t, size_t> segments_;                 // offset -> bytes
  size_t top_ = 0;                                    // end of the last segment
};

StatusOr<size_t> CachingAllocator::Place(const AllocRequest&, size_t bytes, AllocationId) {
  auto best = free_by_size_.lower_bound({bytes, 0});
  if (best != free_by_size_.end()) {
    const size_t offset = best->second;
    const size_t have = best->first;
    free_by_size_.erase(best);
    Block& block = blocks_.at(offset);
    block.free = false;
    block.bytes = bytes;
    if (have > bytes) MarkFree(offset + bytes, have - bytes, block.segment);
    return offset;
  }
  if (Unreserved() < bytes) {
    return OutOfMemory("caching allocator: no cached block holds " + std::to_string(bytes) +
                       " bytes and only " + std::to_string(Unreserved()) +
                       " bytes are left to grow by");
  }
  const size_t offset = top_;
  segments_[offset] = bytes;
  blocks_[offset] = Block{bytes, offset, false};
  top_ += bytes;
  return offset;
}

void CachingAllocator::Unplace(AllocationId, size_t offset, size_t) {
  auto it = blocks_.find(offset);
  it->second.free = true;
  free_by_size_.insert({it->second.bytes, offset});
  Coalesce(it);
}

void CachingAllocator::MarkFree(size_t offset, size_t bytes, size_t segment) {
  auto it = blocks_.emplace(offset, Block{bytes, segment, true}).first;
  free_by_size_.insert({bytes, offset});
  Coalesce(it);
}

// Merges the free block at `it` with free neighbours of its own segment.
void CachingAllocator::Coalesce(std::map<size_t, Block>::iterator it) {
  auto merge = [this](std::map<size_t, Block>::iterator low,
                      std::map<size_t, Block>::iterator high) {
    free_by_size_.erase({low->second.bytes, low->first});
    free_by_size_.erase({high->second.bytes, high->first});
    low->second.bytes += high->second.bytes;
    free_by_size_.insert({low->second.bytes, low->first});
    blocks_.erase(high);
    return low;
  };
  auto mergeable = [](const Block& a, const Block& b) {
    return a.free && b.free && a.segment == b.segment;
  };
  auto next = std::next(it);
  if (next != blocks_.end() && mergeable(it->second, next->second)) it = merge(it, next);
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (mergeable(prev->second, it->second)) merge(prev, it);
  }
}

// Drops the segments at the top that are one free block each.
void CachingAllocator::GiveBackFreeTop() {
  while (!segments_.empty()) {
    const auto last = std::prev(segments_.end());
    const auto block = blocks_.find(last->first);
    if (!block->second.free || block->second.bytes != last->second) return;
    free_by_size_.erase({block->second.bytes, block->first});
    blocks_.erase(block);
    top_ = last->first;
    segments_.erase(last);
  }
}

size_t CachingAllocator::Largest() const {
  size_t cached = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  return std::max(cached, Unreserved());
}

// U_f as Dymem defines it: the free memory that cannot serve the request -
// cached blocks too small for it, and the unreserved rest when that is too
// small as well.
double CachingAllocator::UnusableFree(size_t bytes) const {
  const size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  size_t free = Unreserved();
  size_t unusable = Unreserved() < need ? Unreserved() : 0;
  for (const auto& [size, offset] : free_by_size_) {
    free += size;
    if (size < need) unusable += size;
  }
  return free == 0 ? 0.0 : static_cast<double>(unusable) / free;
}

std::string CachingAllocator::CheckPlacement() const {
  size_t expect_segment = 0;
  for (const auto& [offset, bytes] : segments_) {
    if (offset != expect_segment) return "caching: segments do not tile [0, top)";
    expect_segment = offset + bytes;
  }
  if (expect_segment != top_) return "caching: top is not the end of the last segment";
  size_t expect = 0, free_blocks = 0;
  const Block* prev = nullptr;
  for (const auto& [offset, block] : blocks_) {
    if (offset != expect) return "caching: blocks do not tile the segments";
    auto segment = segments_.find(block.segment);
    if (segment == segments_.end() || offset < segment->first ||
        offset + block.bytes > segment->first + segment->second) {
      return "caching: a block crosses its segment's end";
    }
    if (prev && prev->free && block.free && prev->segment == block.segment) {
      return "caching: two adjacent free blocks of one segment were not coalesced";
    }
    if (block.free) {
      ++free_blocks;
      if (!free_by_size_.count({block.bytes, offset}))
        return "caching: a free block is not indexed";
    }
    expect = offset + block.bytes;
    prev = &block;
  }
  if (expect != top_) return "caching: blocks do not reach the top";
  if (free_blocks != free_by_size_.size()) return "caching: the size index has stale entries";
  return "";
}

const bool kCaching = RegisterAllocator(
    {"caching",
     "CNMeM/PyTorch caching best fit: a new segment per growth, split and coalesced within "
     "a segment, never across, never given back",
     false, [](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
       return std::unique_ptr<DeviceAllocator>(new CachingAllocator(c.capacity));
     }});

}  // namespace
}  // namespace spill
