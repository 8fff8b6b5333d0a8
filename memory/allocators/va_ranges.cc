// The va allocator's ranges: addresses in chunk slots, physical chunks, the
// cache of mapped free ranges, and the restore that starts every iteration
// from the same state (va_allocator.h has the policy).
//
// Invariants: every physical chunk is in exactly one of a live range, an
// arena, a cached range, the free list, or never used; cached ranges are
// never adjacent (they merge when freed next to each other); the addresses
// of live ranges, arenas, cached ranges and free runs tile the reservation.
#include <algorithm>
#include <chrono>

#include "memory/allocators/va_allocator.h"

namespace spill {

// ---- Addresses, in chunk slots, first fit ----

bool VirtualAddressAllocator::TakeSlots(size_t n, size_t* slot) {
  for (auto it = free_slots_.begin(); it != free_slots_.end(); ++it) {
    if (it->second < n) continue;
    *slot = it->first;
    return TakeSlotsAt(it->first, n);
  }
  return false;
}

bool VirtualAddressAllocator::TakeSlotsAt(size_t slot, size_t n) {
  auto it = free_slots_.upper_bound(slot);
  if (it == free_slots_.begin()) return false;
  --it;
  const size_t start = it->first, count = it->second;
  if (slot + n > start + count) return false;
  free_slot_sizes_.erase(free_slot_sizes_.find(count));
  free_slots_.erase(it);
  if (slot > start) {
    free_slots_[start] = slot - start;
    free_slot_sizes_.insert(slot - start);
  }
  if (start + count > slot + n) {
    free_slots_[slot + n] = start + count - slot - n;
    free_slot_sizes_.insert(start + count - slot - n);
  }
  return true;
}

void VirtualAddressAllocator::GiveSlots(size_t slot, size_t n) {
  auto next = free_slots_.lower_bound(slot);
  if (next != free_slots_.end() && next->first == slot + n) {
    n += next->second;
    free_slot_sizes_.erase(free_slot_sizes_.find(next->second));
    next = free_slots_.erase(next);
  }
  if (next != free_slots_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == slot) {
      free_slot_sizes_.erase(free_slot_sizes_.find(prev->second));
      slot = prev->first;
      n += prev->second;
      free_slots_.erase(prev);
    }
  }
  free_slots_[slot] = n;
  free_slot_sizes_.insert(n);
}

size_t VirtualAddressAllocator::LargestSlots() const {
  return free_slot_sizes_.empty() ? 0 : *free_slot_sizes_.rbegin();
}

// The largest run of free addresses once every cached range is unmapped.
size_t VirtualAddressAllocator::LargestSlotsAfterFlush() const {
  std::vector<std::pair<size_t, size_t>> runs(free_slots_.begin(), free_slots_.end());
  runs.insert(runs.end(), cached_at_.begin(), cached_at_.end());
  std::sort(runs.begin(), runs.end());
  size_t largest = 0, start = 0, end = 0;
  for (const auto& [slot, n] : runs) {
    if (slot != end) start = slot;
    end = slot + n;
    largest = std::max(largest, end - start);
  }
  return largest;
}

// ---- Mapping ----

// Maps chunks[from..] at their slots. When the device refuses one (no
// physical memory: kOutOfMemory, as the device reports it), what this call
// mapped is unmapped again, so the caller can undo the request.
Status VirtualAddressAllocator::MapChunks(size_t slot, const std::vector<size_t>& chunks,
                                          size_t from) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = from; i < chunks.size(); ++i) {
    Status mapped = vm_->Map((slot + i) * chunk_, chunks[i]);
    if (mapped.ok()) continue;
    if (i > from) (void)vm_->Unmap((slot + from) * chunk_, (i - from) * chunk_);
    const StatusCode code = mapped.code() == StatusCode::kOutOfMemory ? StatusCode::kOutOfMemory
                                                                      : StatusCode::kInternal;
    return Status(code, "va: " + mapped.message());
  }
  stats_.map_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats_.maps += static_cast<int64_t>(chunks.size() - from);
  return Status::Ok();
}

// Gives back what a range placement took before its mapping failed: the
// addresses from `slot` on and the chunks from `from` on.
void VirtualAddressAllocator::UndoTake(size_t slot, std::vector<size_t>* chunks, size_t from) {
  GiveSlots(slot, chunks->size() - from);
  free_.insert(chunks->begin() + static_cast<std::ptrdiff_t>(from), chunks->end());
  chunks->resize(from);
}

// Unmaps a run of chunks (lazily: only now that they are needed elsewhere)
// and gives their addresses and chunks back.
Status VirtualAddressAllocator::Unmap(const Range& run) {
  const size_t n = run.chunks.size();
  stats_.unmaps += static_cast<int64_t>(n);
  // Nothing queued may still touch it: the compute queued before its free
  // has run (and with it every copy on it).
  if (run.fence.event) run.fence.event->Synchronize();
  unmapped_fence_.Join(run.fence);
  const auto start = std::chrono::steady_clock::now();
  Status unmapped = vm_->Unmap(run.slot * chunk_, n * chunk_);
  if (!unmapped.ok()) return Internal("va: " + unmapped.message());
  stats_.map_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  GiveSlots(run.slot, n);
  free_.insert(run.chunks.begin(), run.chunks.end());
  return Status::Ok();
}

// ---- The cache of mapped free ranges ----

void VirtualAddressAllocator::Insert(Range range) {
  const size_t n = range.chunks.size();
  cached_chunks_ += n;
  cached_at_[range.slot] = n;
  cache_.emplace(std::pair{n, range.slot}, std::move(range));
}

VirtualAddressAllocator::Range VirtualAddressAllocator::TakeCached(CacheMap::const_iterator it) {
  Range range = it->second;
  cached_chunks_ -= it->first.first;
  cached_at_.erase(it->first.second);
  cache_.erase(it);
  return range;
}

AllocationId VirtualAddressAllocator::TakeUnmapFence() {
  const AllocationId block = unmapped_fence_.block;
  unmapped_fence_ = {};
  return block;
}

// A freed range stays mapped, merged with cached ranges next to it.
void VirtualAddressAllocator::Cache(Range range, AllocationId freed) {
  range.fence = {++frees_, freed, record_()};
  auto prev = cached_at_.lower_bound(range.slot);
  if (prev != cached_at_.begin() &&
      std::prev(prev)->first + std::prev(prev)->second == range.slot) {
    --prev;
    Range before = TakeCached(cache_.find({prev->second, prev->first}));
    before.chunks.insert(before.chunks.end(), range.chunks.begin(), range.chunks.end());
    before.fence.Join(range.fence);
    range = std::move(before);
  }
  auto next = cached_at_.find(range.slot + range.chunks.size());
  if (next != cached_at_.end()) {
    Range after = TakeCached(cache_.find({next->second, next->first}));
    range.chunks.insert(range.chunks.end(), after.chunks.begin(), after.chunks.end());
    range.fence.Join(after.fence);
  }
  Insert(std::move(range));
}

// Unmaps the last `count` chunks of a cached range (all of it when it has
// no more); the rest stays cached.
Status VirtualAddressAllocator::Reclaim(CacheMap::const_iterator it, size_t count) {
  Range range = TakeCached(it);
  const size_t keep = range.chunks.size() - std::min(count, range.chunks.size());
  Range tail;
  tail.slot = range.slot + keep;
  tail.fence = range.fence;
  tail.chunks.assign(range.chunks.begin() + static_cast<std::ptrdiff_t>(keep), range.chunks.end());
  range.chunks.resize(keep);
  if (keep > 0) Insert(std::move(range));
  return Unmap(tail);
}

Status VirtualAddressAllocator::FlushCache() {
  stats_.flushes++;
  while (!cache_.empty()) SPILL_RETURN_IF_ERROR(Reclaim(cache_.begin(), SIZE_MAX));
  return Status::Ok();
}

StatusOr<std::vector<size_t>> VirtualAddressAllocator::TakeChunks(size_t n) {
  std::vector<size_t> taken;
  taken.reserve(n);
  for (;;) {
    while (taken.size() < n && !free_.empty()) {
      taken.push_back(*free_.begin());
      free_.erase(free_.begin());
    }
    while (taken.size() < n && next_unused_ < chunks_) taken.push_back(next_unused_++);
    if (taken.size() == n) return taken;
    if (cache_.empty()) return Internal("va: fewer chunks than counted");
    // The tail of the smallest cached range that holds the rest, else all
    // of the largest; among equal sizes the lowest addressed.
    const size_t rest = n - taken.size();
    auto it = cache_.lower_bound({rest, 0});
    if (it == cache_.end()) it = cache_.lower_bound({std::prev(cache_.end())->first.first, 0});
    SPILL_RETURN_IF_ERROR(Reclaim(it, rest));
  }
}

// ---- Placing a range ----

// How a range of `k` chunks would be placed now; Fits and Place agree by
// both asking this.
VirtualAddressAllocator::Choice VirtualAddressAllocator::Choose(size_t k) const {
  Choice choice;
  if (Available() < k) return choice;
  auto it = cache_.lower_bound({k, 0});
  if (it != cache_.end() && it->first.first == k) return {How::kExact, it};
  if (it != cache_.end()) return {How::kSplit, it};  // the smallest larger, lowest addressed
  if (it != cache_.begin()) {
    // The largest smaller cached range, lowest addressed, if the addresses
    // after it are free.
    auto smaller = cache_.lower_bound({std::prev(it)->first.first, 0});
    const size_t n = smaller->first.first;
    auto after = free_slots_.find(smaller->second.slot + n);
    if (after != free_slots_.end() && after->second >= k - n) return {How::kGrow, smaller};
  }
  if (LargestSlots() >= k) return {How::kFresh, cache_.end()};
  if (LargestSlotsAfterFlush() >= k) return {How::kFreshAfterFlush, cache_.end()};
  return choice;
}

StatusOr<VirtualAddressAllocator::Range> VirtualAddressAllocator::PlaceRange(size_t k) {
  const Choice choice = Choose(k);
  Range range;
  switch (choice.how) {
    case How::kNone:
      return OutOfMemory("va: " + std::to_string(k) + " chunks wanted, " +
                         std::to_string(Available()) + " free");
    case How::kExact:
      stats_.exact_reuses++;
      return TakeCached(choice.cached);
    case How::kSplit: {
      range = TakeCached(choice.cached);
      Range rest;
      rest.slot = range.slot + k;
      rest.fence = range.fence;
      rest.chunks.assign(range.chunks.begin() + static_cast<std::ptrdiff_t>(k), range.chunks.end());
      range.chunks.resize(k);
      Insert(std::move(rest));
      stats_.splits++;
      return range;
    }
    case How::kGrow: {
      range = TakeCached(choice.cached);
      const size_t n = range.chunks.size();
      SPILL_CHECK(TakeSlotsAt(range.slot + n, k - n)) << "va: addresses to grow into vanished";
      SPILL_ASSIGN_OR_RETURN(std::vector<size_t> more, TakeChunks(k - n));
      range.chunks.insert(range.chunks.end(), more.begin(), more.end());
      Status mapped = MapChunks(range.slot, range.chunks, n);
      if (!mapped.ok()) {
        UndoTake(range.slot + n, &range.chunks, n);
        Insert(std::move(range));
        return mapped;
      }
      stats_.grows++;
      return range;
    }
    case How::kFreshAfterFlush:
      SPILL_RETURN_IF_ERROR(FlushCache());
      [[fallthrough]];
    case How::kFresh:
      SPILL_CHECK(TakeSlots(k, &range.slot)) << "va: no addresses for " << k << " chunks";
      SPILL_ASSIGN_OR_RETURN(range.chunks, TakeChunks(k));
      if (Status mapped = MapChunks(range.slot, range.chunks, 0); !mapped.ok()) {
        UndoTake(range.slot, &range.chunks, 0);
        return mapped;
      }
      stats_.fresh++;
      return range;
  }
  return Internal("va: unreachable");
}

// ---- Every iteration from the same state ----

void VirtualAddressAllocator::EndIteration() {
  if (!warmed_) {
    warm_.assign(cached_at_.begin(), cached_at_.end());
    warmed_ = true;
    return;
  }
  Status restored = Restore();
  if (!restored.ok() && pending_.ok()) {
    pending_ = restored.WithContext("restoring the cached ranges at the end of an iteration");
  }
}

// Back to the cached ranges the first iteration ended with. Cached chunks
// already at a warm address stay mapped there; cached chunks elsewhere are
// unmapped; warm addresses left uncovered are mapped again.
Status VirtualAddressAllocator::Restore() {
  std::vector<Range> current;
  while (!cached_at_.empty()) {
    const auto first = cached_at_.begin();
    current.push_back(TakeCached(cache_.find({first->second, first->first})));
  }
  std::vector<Range> kept;  // pieces inside warm ranges, by address
  size_t w = 0;
  for (const Range& c : current) {
    for (size_t pos = c.slot, end = c.slot + c.chunks.size(); pos < end;) {
      while (w < warm_.size() && warm_[w].first + warm_[w].second <= pos) ++w;
      const bool inside = w < warm_.size() && warm_[w].first <= pos;
      const size_t stop = inside             ? std::min(end, warm_[w].first + warm_[w].second)
                          : w < warm_.size() ? std::min(end, warm_[w].first)
                                             : end;
      Range piece;
      piece.slot = pos;
      piece.fence = c.fence;
      piece.chunks.assign(c.chunks.begin() + static_cast<std::ptrdiff_t>(pos - c.slot),
                          c.chunks.begin() + static_cast<std::ptrdiff_t>(stop - c.slot));
      if (inside) {
        kept.push_back(std::move(piece));
      } else {
        SPILL_RETURN_IF_ERROR(Unmap(piece));
      }
      pos = stop;
    }
  }
  size_t k = 0;
  for (const auto& [slot, n] : warm_) {
    Range range;
    range.slot = slot;
    for (size_t pos = slot; pos < slot + n;) {
      if (k < kept.size() && kept[k].slot == pos) {
        range.chunks.insert(range.chunks.end(), kept[k].chunks.begin(), kept[k].chunks.end());
        range.fence.Join(kept[k].fence);
        pos += kept[k++].chunks.size();
        continue;
      }
      const size_t stop = k < kept.size() && kept[k].slot < slot + n ? kept[k].slot : slot + n;
      SPILL_CHECK(TakeSlotsAt(pos, stop - pos)) << "va: the warm addresses are taken";
      SPILL_ASSIGN_OR_RETURN(std::vector<size_t> more, TakeChunks(stop - pos));
      const size_t from = range.chunks.size();
      range.chunks.insert(range.chunks.end(), more.begin(), more.end());
      SPILL_RETURN_IF_ERROR(MapChunks(slot, range.chunks, from));
      pos = stop;
    }
    Insert(std::move(range));
  }
  SPILL_CHECK(k == kept.size()) << "va: cached chunks left over by the restore";
  stats_.mapped = stats_.held + cached_chunks_;
  stats_.peak_mapped = std::max(stats_.peak_mapped, stats_.mapped);
  return Status::Ok();
}

}  // namespace spill
