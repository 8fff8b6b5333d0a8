#include "memory/heap_pool.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace spill {

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kParamGradients:
      return "parameter gradients";
    case MemoryCategory::kOptimizerState:
      return "optimizer state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kActivationGradients:
      return "activation gradients";
    case MemoryCategory::kWorkspace:
      return "workspace";
    case MemoryCategory::kCount:
      break;
  }
  return "?";
}

const char* FitPolicyName(FitPolicy fit) {
  return fit == FitPolicy::kFirstFit ? "first_fit" : "best_fit";
}

StatusOr<FitPolicy> ParseFitPolicy(const std::string& text) {
  if (text == "first_fit") return FitPolicy::kFirstFit;
  if (text == "best_fit") return FitPolicy::kBestFit;
  return InvalidArgument("unknown pool fit '" + text + "'; expected first_fit or best_fit");
}

double PoolStats::contiguity() const {
  return free_bytes == 0 ? 1.0 : static_cast<double>(largest_free) / free_bytes;
}

HeapPool::HeapPool(size_t capacity, FitPolicy fit)
    : capacity_(capacity / kPoolBlockBytes * kPoolBlockBytes), fit_(fit) {
  stats_.capacity = capacity_;
  if (capacity_ > 0) InsertFree(0, capacity_);
  UpdateFreeStats();
}

void HeapPool::InsertFree(size_t offset, size_t bytes) {
  free_by_offset_[offset] = bytes;
  free_by_size_.insert({bytes, offset});
}

void HeapPool::EraseFree(std::map<size_t, size_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

std::map<size_t, size_t>::iterator HeapPool::FindSegment(size_t bytes) {
  if (fit_ == FitPolicy::kBestFit) {
    auto best = free_by_size_.lower_bound({bytes, 0});
    if (best == free_by_size_.end()) return free_by_offset_.end();
    return free_by_offset_.find(best->second);
  }
  for (auto it = free_by_offset_.begin(); it != free_by_offset_.end(); ++it) {
    if (it->second >= bytes) return it;
  }
  return free_by_offset_.end();
}

bool HeapPool::CanAllocate(size_t bytes) const {
  size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  return !free_by_size_.empty() && free_by_size_.rbegin()->first >= need;
}

namespace {

// The part of [offset, offset + bytes) inside `range`: [lo, hi), empty when hi <= lo.
struct Clipped {
  size_t lo, hi;
  size_t size() const { return hi > lo ? hi - lo : 0; }
};

Clipped Clip(size_t offset, size_t bytes, PoolRange range) {
  return {std::max(offset, range.begin), std::min(offset + bytes, range.end)};
}

}  // namespace

size_t HeapPool::Choose(size_t need, Placement placement, PoolRange range) {
  range.begin = RoundToBlocks(range.begin);  // whole blocks only
  range.end = range.end / kPoolBlockBytes * kPoolBlockBytes;
  if (placement == Placement::kTopDown) {
    // From the segment below range.end downwards: the first that holds the
    // request, at its top.
    for (auto it = free_by_offset_.lower_bound(range.end); it != free_by_offset_.begin();) {
      --it;
      const Clipped c = Clip(it->first, it->second, range);
      if (c.size() >= need) return c.hi - need;
      if (it->first <= range.begin) break;  // every segment further down lies below the range
    }
    return SIZE_MAX;
  }
  if (range.begin == 0 && range.end >= capacity_) {
    auto it = FindSegment(need);
    if (it == free_by_offset_.end()) return SIZE_MAX;
    return placement == Placement::kLow ? it->first : it->first + it->second - need;
  }
  // Confined: the fit policy over the parts of segments inside the range.
  auto it = free_by_offset_.upper_bound(range.begin);
  if (it != free_by_offset_.begin()) --it;  // the segment holding range.begin, if any
  Clipped best{0, 0};
  size_t best_size = SIZE_MAX;
  for (; it != free_by_offset_.end() && it->first < range.end; ++it) {
    const Clipped c = Clip(it->first, it->second, range);
    if (c.size() < need || c.size() >= best_size) continue;
    best = c;
    best_size = c.size();
    if (fit_ == FitPolicy::kFirstFit) break;
  }
  if (best_size == SIZE_MAX) return SIZE_MAX;
  return placement == Placement::kLow ? best.lo : best.hi - need;
}

StatusOr<Allocation> HeapPool::Allocate(size_t bytes, MemoryCategory category, Placement placement,
                                        PoolRange range) {
  size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  const size_t offset = Choose(need, placement, range);
  if (offset == SIZE_MAX) {
    stats_.failures++;
    return OutOfMemory("no free segment of " + std::to_string(need) + " bytes (" +
                       std::to_string(stats_.free_bytes) + " bytes free, largest segment " +
                       std::to_string(stats_.largest_free) + ")");
  }
  return Carve(std::prev(free_by_offset_.upper_bound(offset)), offset, need, category);
}

Allocation HeapPool::Carve(std::map<size_t, size_t>::iterator seg, size_t offset, size_t need,
                           MemoryCategory category) {
  const size_t seg_offset = seg->first, seg_bytes = seg->second;
  EraseFree(seg);
  if (offset > seg_offset) InsertFree(seg_offset, offset - seg_offset);
  if (seg_offset + seg_bytes > offset + need) {
    InsertFree(offset + need, seg_offset + seg_bytes - offset - need);
  }
  return Record(offset, need, category);
}

size_t HeapPool::LargestFree(PoolRange range) const {
  if (range.begin == 0 && range.end >= capacity_) return stats_.largest_free;
  size_t largest = 0;
  auto it = free_by_offset_.upper_bound(range.begin);
  if (it != free_by_offset_.begin()) --it;
  for (; it != free_by_offset_.end() && it->first < range.end; ++it) {
    largest = std::max(largest, Clip(it->first, it->second, range).size());
  }
  return largest;
}

StatusOr<Allocation> HeapPool::AllocateAt(size_t offset, size_t bytes, MemoryCategory category) {
  const size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  auto it = free_by_offset_.upper_bound(offset);
  if (offset % kPoolBlockBytes != 0 || it == free_by_offset_.begin()) {
    stats_.failures++;
    return OutOfMemory("offset " + std::to_string(offset) + " is not free");
  }
  --it;  // the free segment starting at or below `offset`
  if (offset + need > it->first + it->second) {
    stats_.failures++;
    return OutOfMemory("[" + std::to_string(offset) + ", " + std::to_string(offset + need) +
                       ") is not free");
  }
  return Carve(it, offset, need, category);
}

Allocation HeapPool::Record(size_t offset, size_t need, MemoryCategory category) {
  AllocationId id = next_id_++;
  allocated_[id] = Node{offset, need, category};
  int c = static_cast<int>(category);
  stats_.in_use[c] += need;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.in_use[c]);
  stats_.total_in_use += need;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_in_use);
  stats_.high_water = std::max(stats_.high_water, offset + need);
  stats_.allocations++;
  UpdateFreeStats();
  return Allocation{id, offset, need};
}

void HeapPool::Free(AllocationId id) {
  auto found = allocated_.find(id);
  SPILL_CHECK(found != allocated_.end()) << "free of unknown allocation " << id;
  Node node = found->second;
  allocated_.erase(found);
  stats_.in_use[static_cast<int>(node.category)] -= node.bytes;
  stats_.total_in_use -= node.bytes;
  stats_.frees++;
  GiveBack(node.offset, node.bytes);
  UpdateFreeStats();
}

void HeapPool::GiveBack(size_t offset, size_t bytes) {
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == offset + bytes) {
    bytes += next->second;
    EraseFree(next);
  }
  auto after = free_by_offset_.lower_bound(offset);
  if (after != free_by_offset_.begin()) {
    auto prev = std::prev(after);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      bytes += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, bytes);
}

size_t HeapPool::MoveDown(AllocationId id) {
  auto found = allocated_.find(id);
  SPILL_CHECK(found != allocated_.end()) << "move of unknown allocation " << id;
  Node node = found->second;
  // Give the block back (coalescing with its neighbours), then take the
  // lowest segment that fits; at worst that is the block's own place.
  allocated_.erase(found);
  GiveBack(node.offset, node.bytes);
  auto it = free_by_offset_.begin();
  while (it->second < node.bytes) ++it;
  const size_t seg_offset = it->first, seg_bytes = it->second;
  EraseFree(it);
  if (seg_bytes > node.bytes) InsertFree(seg_offset + node.bytes, seg_bytes - node.bytes);
  if (seg_offset != node.offset) stats_.moves++;
  node.offset = seg_offset;
  allocated_[id] = node;
  UpdateFreeStats();
  return seg_offset;
}

size_t HeapPool::LiveEnd() const {
  if (free_by_offset_.empty()) return capacity_;
  const auto& [offset, bytes] = *free_by_offset_.rbegin();
  return offset + bytes == capacity_ ? offset : capacity_;
}

std::vector<std::pair<size_t, AllocationId>> HeapPool::AllocationsByOffset() const {
  std::vector<std::pair<size_t, AllocationId>> out;
  for (const auto& [id, node] : allocated_) out.push_back({node.offset, id});
  std::sort(out.begin(), out.end());
  return out;
}

void HeapPool::UpdateFreeStats() {
  stats_.free_bytes = capacity_ - stats_.total_in_use;
  stats_.largest_free = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  stats_.free_segments = free_by_offset_.size();
}

double HeapPool::UnusableFree(size_t bytes) const {
  if (stats_.free_bytes == 0) return 0.0;
  return static_cast<double>(UnusableBytes(bytes)) / stats_.free_bytes;
}

size_t HeapPool::UnusableBytes(size_t bytes) const {
  size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  size_t unusable = 0;
  for (const auto& [size, offset] : free_by_size_) {
    if (size >= need) break;
    unusable += size;
  }
  return unusable;
}

void HeapPool::ResetPeaks() {
  stats_.peak = stats_.in_use;
  stats_.total_peak = stats_.total_in_use;
}

std::string HeapPool::CheckInvariants() const {
  // Every byte is either free or allocated, exactly once; free segments are
  // maximal (no two adjacent); the size index mirrors the offset index.
  std::vector<std::pair<size_t, size_t>> segments;
  for (const auto& [offset, bytes] : free_by_offset_) segments.push_back({offset, bytes});
  for (const auto& [id, node] : allocated_) segments.push_back({node.offset, node.bytes});
  std::sort(segments.begin(), segments.end());
  size_t cursor = 0;
  for (const auto& [offset, bytes] : segments) {
    if (offset != cursor) return "gap or overlap at offset " + std::to_string(offset);
    if (bytes == 0 || bytes % kPoolBlockBytes)
      return "segment not whole blocks at " + std::to_string(offset);
    cursor = offset + bytes;
  }
  if (cursor != capacity_)
    return "segments cover " + std::to_string(cursor) + " of " + std::to_string(capacity_);
  size_t prev_end = SIZE_MAX, free_total = 0;
  for (const auto& [offset, bytes] : free_by_offset_) {
    if (offset == prev_end) return "adjacent free segments at " + std::to_string(offset);
    if (!free_by_size_.count({bytes, offset}))
      return "size index misses segment " + std::to_string(offset);
    prev_end = offset + bytes;
    free_total += bytes;
  }
  if (free_by_size_.size() != free_by_offset_.size()) return "size index has extra entries";
  size_t used = 0;
  std::array<size_t, kNumCategories> per{};
  for (const auto& [id, node] : allocated_) {
    used += node.bytes;
    per[static_cast<int>(node.category)] += node.bytes;
  }
  if (used != stats_.total_in_use) return "in-use total disagrees with allocations";
  if (per != stats_.in_use) return "per-category in-use disagrees with allocations";
  if (free_total != stats_.free_bytes) return "free total disagrees with segments";
  for (int c = 0; c < kNumCategories; ++c) {
    if (stats_.peak[c] < stats_.in_use[c]) return "a category's peak is below its current use";
  }
  if (stats_.total_peak < stats_.total_in_use) return "peak is below current use";
  return "";
}

}  // namespace spill
