#include "memory/allocators/va_allocator.h"

#include <algorithm>
#include <chrono>

#include "framework/units.h"

namespace spill {

VirtualAddressAllocator::VirtualAddressAllocator(size_t capacity, size_t chunk_bytes)
    : DeviceAllocator(capacity),
      chunk_(chunk_bytes),
      chunks_(capacity / chunk_bytes),
      slots_(kAddressSpaceFactor * std::max<size_t>(capacity / chunk_bytes, 1)) {
  stats_.chunk = chunk_;
  stats_.chunks = chunks_;
  GiveSlots(0, slots_);
}

VirtualAddressAllocator::~VirtualAddressAllocator() = default;

StatusOr<void*> VirtualAddressAllocator::Reserve(Device& device) {
  SPILL_CHECK(live_.empty() && cache_.empty()) << "va: requests placed before the reservation";
  SPILL_ASSIGN_OR_RETURN(vm_, device.CreateVirtualMemory(chunk_, chunks_, slots_ * chunk_));
  device_ = &device;
  return static_cast<void*>(vm_->base());
}

void VirtualAddressAllocator::Release(Device& device, void* base) {
  SyncDevice();
  vm_.reset();
  device_ = nullptr;
}

void VirtualAddressAllocator::SyncDevice() {
  if (device_ == nullptr) return;
  device_->compute_queue().Synchronize();
  device_->copy_queue().Synchronize();
}

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
  for (const auto& [key, range] : cache_) runs.push_back({range.slot, key.first});
  std::sort(runs.begin(), runs.end());
  size_t largest = 0, start = 0, end = 0;
  for (const auto& [slot, n] : runs) {
    if (slot != end) start = slot;
    end = slot + n;
    largest = std::max(largest, end - start);
  }
  return largest;
}

// ---- Chunks and ranges ----

Status VirtualAddressAllocator::MapChunks(size_t slot, const std::vector<size_t>& chunks,
                                          size_t from) {
  stats_.maps += static_cast<int64_t>(chunks.size() - from);
  if (vm_ == nullptr) return Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = from; i < chunks.size(); ++i) {
    Status mapped = vm_->Map((slot + i) * chunk_, chunks[i]);
    if (!mapped.ok()) return Internal("va: " + mapped.message());
  }
  stats_.map_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

// Unmaps a cached range (lazily: only now that its chunks are needed) and
// gives its chunks and addresses back.
Status VirtualAddressAllocator::Reclaim(CacheMap::const_iterator it) {
  const size_t n = it->first.first;
  const Range range = it->second;
  cache_.erase(it);
  cached_chunks_ -= n;
  stats_.unmaps += static_cast<int64_t>(n);
  if (vm_ != nullptr) {
    SyncDevice();  // nothing queued may still touch it
    const auto start = std::chrono::steady_clock::now();
    Status unmapped = vm_->Unmap(range.slot * chunk_, n * chunk_);
    if (!unmapped.ok()) return Internal("va: " + unmapped.message());
    stats_.map_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  GiveSlots(range.slot, n);
  free_.insert(range.chunks.begin(), range.chunks.end());
  return Status::Ok();
}

Status VirtualAddressAllocator::FlushCache() {
  stats_.flushes++;
  while (!cache_.empty()) SPILL_RETURN_IF_ERROR(Reclaim(cache_.begin()));
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
    // The smallest cached range that holds the rest, else the largest;
    // among equal sizes the lowest addressed.
    auto it = cache_.lower_bound({n - taken.size(), 0});
    if (it == cache_.end()) it = cache_.lower_bound({std::prev(cache_.end())->first.first, 0});
    SPILL_RETURN_IF_ERROR(Reclaim(it));
  }
}

// How a range of `k` chunks would be placed now; Fits and Place agree by
// both asking this.
VirtualAddressAllocator::Choice VirtualAddressAllocator::Choose(size_t k) const {
  Choice choice;
  if (Available() < k) return choice;
  auto it = cache_.lower_bound({k, 0});
  if (it != cache_.end() && it->first.first == k) return {How::kExact, it};
  if (it != cache_.begin()) {
    // The largest smaller size, lowest addressed.
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
      range = choice.cached->second;
      cache_.erase(choice.cached);
      cached_chunks_ -= k;
      stats_.exact_reuses++;
      return range;
    case How::kGrow: {
      range = choice.cached->second;
      const size_t n = choice.cached->first.first;
      cache_.erase(choice.cached);
      cached_chunks_ -= n;
      SPILL_CHECK(TakeSlotsAt(range.slot + n, k - n)) << "va: addresses to grow into vanished";
      SPILL_ASSIGN_OR_RETURN(std::vector<size_t> more, TakeChunks(k - n));
      range.chunks.insert(range.chunks.end(), more.begin(), more.end());
      SPILL_RETURN_IF_ERROR(MapChunks(range.slot, range.chunks, n));
      stats_.grows++;
      return range;
    }
    case How::kFreshAfterFlush:
      SPILL_RETURN_IF_ERROR(FlushCache());
      [[fallthrough]];
    case How::kFresh:
      SPILL_CHECK(TakeSlots(k, &range.slot)) << "va: no addresses for " << k << " chunks";
      SPILL_ASSIGN_OR_RETURN(range.chunks, TakeChunks(k));
      SPILL_RETURN_IF_ERROR(MapChunks(range.slot, range.chunks, 0));
      stats_.fresh++;
      return range;
  }
  return Internal("va: unreachable");
}

void VirtualAddressAllocator::Cache(Range range) {
  const size_t n = range.chunks.size();
  cached_chunks_ += n;
  cache_.emplace(std::pair{n, range.slot}, std::move(range));
}

void VirtualAddressAllocator::EndIteration() {
  if (!warmed_) {
    for (const auto& [key, range] : cache_) warm_.push_back({range.slot, key.first});
    warmed_ = true;
    return;
  }
  Status restored = Restore();
  if (!restored.ok() && pending_.ok()) pending_ = restored;
}

// Back to the cached ranges the first iteration ended with: those made since
// are unmapped, those used up are mapped again.
Status VirtualAddressAllocator::Restore() {
  std::set<std::pair<size_t, size_t>> warm(warm_.begin(), warm_.end());  // (slot, chunks)
  for (auto it = cache_.begin(); it != cache_.end();) {
    const auto next = std::next(it);
    if (warm.count({it->second.slot, it->first.first}) == 0) SPILL_RETURN_IF_ERROR(Reclaim(it));
    it = next;
  }
  for (const auto& [slot, n] : warm_) {
    if (cache_.count({n, slot})) continue;
    Range range;
    range.slot = slot;
    SPILL_CHECK(TakeSlotsAt(slot, n)) << "va: the warm addresses are taken";
    SPILL_ASSIGN_OR_RETURN(range.chunks, TakeChunks(n));
    SPILL_RETURN_IF_ERROR(MapChunks(slot, range.chunks, 0));
    Cache(std::move(range));
  }
  stats_.mapped = stats_.held + cached_chunks_;
  stats_.peak_mapped = std::max(stats_.peak_mapped, stats_.mapped);
  return Status::Ok();
}

// ---- The allocator seam ----

StatusOr<size_t> VirtualAddressAllocator::PlaceSmall(size_t bytes, AllocationId id) {
  Live& live = live_[id];
  live.small = true;
  for (auto& [arena_id, arena] : arenas_) {
    if (!arena.pool->CanAllocate(bytes)) continue;
    SPILL_ASSIGN_OR_RETURN(Allocation a, arena.pool->Allocate(bytes, MemoryCategory::kActivations));
    arena.live++;
    live.arena = arena_id;
    live.block = a.id;
    return arena.range.slot * chunk_ + a.offset;
  }
  auto range = PlaceRange(1);
  if (!range.ok()) {
    live_.erase(id);
    return range.status();
  }
  stats_.held += 1;
  Arena& arena = arenas_[next_arena_];
  arena.range = std::move(*range);
  arena.pool = std::make_unique<HeapPool>(chunk_, FitPolicy::kBestFit);
  Allocation a = *arena.pool->Allocate(bytes, MemoryCategory::kActivations);
  arena.live = 1;
  live.arena = next_arena_++;
  live.block = a.id;
  return arena.range.slot * chunk_ + a.offset;
}

StatusOr<size_t> VirtualAddressAllocator::Place(const AllocRequest& request, size_t bytes,
                                                AllocationId id) {
  SPILL_RETURN_IF_ERROR(pending_);
  size_t offset = 0;
  size_t given = bytes;
  if (bytes < small_limit()) {
    SPILL_ASSIGN_OR_RETURN(offset, PlaceSmall(bytes, id));
  } else {
    const size_t k = (bytes + chunk_ - 1) / chunk_;
    SPILL_ASSIGN_OR_RETURN(Range range, PlaceRange(k));
    offset = range.slot * chunk_;
    given = k * chunk_;
    stats_.held += k;
    Live& live = live_[id];
    live.range = std::move(range);
  }
  Live& live = live_.at(id);
  live.asked = std::max<size_t>(request.bytes, 1);
  live.given = given;
  Note(live, true);
  return offset;
}

void VirtualAddressAllocator::Unplace(AllocationId id, size_t, size_t) {
  auto it = live_.find(id);
  SPILL_CHECK(it != live_.end()) << "va: free of an unknown block";
  Live live = std::move(it->second);
  live_.erase(it);
  if (live.small) {
    auto arena = arenas_.find(live.arena);
    arena->second.pool->Free(live.block);
    if (--arena->second.live == 0) {
      stats_.held -= 1;
      Cache(std::move(arena->second.range));
      arenas_.erase(arena);
    }
  } else {
    stats_.held -= live.range.chunks.size();
    Cache(std::move(live.range));
  }
  Note(live, false);
}

// Updates the request and chunk counts, their peaks, and checks Eq. 2.
void VirtualAddressAllocator::Note(const Live& live, bool added) {
  const size_t internal = live.given - std::min(live.given, live.asked);
  if (added) {
    stats_.live_bytes += live.asked;
    stats_.live_requests++;
    stats_.internal_now += internal;
    stats_.max_internal = std::max(stats_.max_internal, internal);
  } else {
    stats_.live_bytes -= live.asked;
    stats_.live_requests--;
    stats_.internal_now -= internal;
  }
  stats_.mapped = stats_.held + cached_chunks_;
  stats_.peak_held = std::max(stats_.peak_held, stats_.held);
  stats_.peak_mapped = std::max(stats_.peak_mapped, stats_.mapped);
  const size_t bound = stats_.live_bytes + static_cast<size_t>(stats_.live_requests) * chunk_;
  if (stats_.held * chunk_ > bound) stats_.bound_breaks++;
}

bool VirtualAddressAllocator::Fits(size_t bytes) const {
  if (bytes < small_limit()) {
    for (const auto& [id, arena] : arenas_) {
      if (arena.pool->CanAllocate(bytes)) return true;
    }
    return Choose(1).how != How::kNone;
  }
  return Choose((bytes + chunk_ - 1) / chunk_).how != How::kNone;
}

size_t VirtualAddressAllocator::Largest() const {
  size_t chunks = Available();
  if (LargestSlots() < chunks) chunks = std::min(chunks, LargestSlotsAfterFlush());
  size_t largest = chunks * chunk_;
  for (const auto& [id, arena] : arenas_) {
    largest = std::max(largest, std::min(arena.pool->stats().largest_free, small_limit() - 1));
  }
  return largest / kPoolBlockBytes * kPoolBlockBytes;
}

double VirtualAddressAllocator::UnusableFree(size_t bytes) const {
  size_t free = Available() * chunk_;
  for (const auto& [id, arena] : arenas_) free += arena.pool->stats().free_bytes;
  if (free == 0) return 0.0;
  if (!Fits(bytes)) return 1.0;
  if (bytes < small_limit()) return 0.0;
  // Free room inside arenas cannot hold a large request.
  return 1.0 - static_cast<double>(Available() * chunk_) / static_cast<double>(free);
}

void VirtualAddressAllocator::ResetCounters() {
  const VaStats now = stats_;
  stats_ = VaStats();
  stats_.chunk = now.chunk;
  stats_.chunks = now.chunks;
  stats_.held = stats_.peak_held = now.held;
  stats_.mapped = stats_.peak_mapped = now.mapped;
  stats_.live_bytes = now.live_bytes;
  stats_.live_requests = now.live_requests;
  stats_.internal_now = now.internal_now;
}

// Every chunk belongs to exactly one of: a live range, an arena, a cached
// range, the free list, or the never used; the addresses of live ranges,
// arenas and cached ranges never overlap the free ones or each other and
// together with them cover the reservation; Eq. 2 holds.
std::string VirtualAddressAllocator::CheckPlacement() const {
  std::vector<char> owner(next_unused_, 0);
  std::vector<std::pair<size_t, size_t>> extents(free_slots_.begin(), free_slots_.end());
  size_t held = 0, cached = 0;
  std::string error;
  auto claim = [&](const Range& range) {
    extents.push_back({range.slot, range.chunks.size()});
    for (size_t c : range.chunks) {
      if (c >= next_unused_ || owner[c]++) error = "chunk " + std::to_string(c) + " used twice";
    }
  };
  for (const auto& [id, live] : live_) {
    if (live.small) continue;
    claim(live.range);
    held += live.range.chunks.size();
  }
  for (const auto& [id, arena] : arenas_) {
    claim(arena.range);
    held += arena.range.chunks.size();
  }
  for (const auto& [key, range] : cache_) {
    claim(range);
    cached += key.first;
  }
  for (size_t c : free_) {
    if (c >= next_unused_ || owner[c]++) error = "free chunk " + std::to_string(c) + " in use";
  }
  if (!error.empty()) return "va: " + error;
  if (held != stats_.held || cached != cached_chunks_) return "va: chunk counts disagree";
  std::sort(extents.begin(), extents.end());
  size_t end = 0;
  for (const auto& [slot, n] : extents) {
    if (slot != end) return "va: addresses overlap or leak at slot " + std::to_string(slot);
    end = slot + n;
  }
  if (end != slots_) return "va: the addresses do not add up to the reservation";
  if (stats_.held * chunk_ >
      stats_.live_bytes + static_cast<size_t>(stats_.live_requests) * chunk_) {
    return "va: the footprint exceeds live bytes + live requests x chunk (Eq. 2)";
  }
  return "";
}

namespace {

const bool kVa = RegisterAllocator(
    {"va",
     "virtual addressing: a fresh virtual range of memory.chunk-sized physical chunks per "
     "request, so memory never fragments externally; small requests share chunk arenas",
     false,
     [](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
       if (c.chunk < kPoolBlockBytes || c.chunk % kPoolBlockBytes != 0) {
         return InvalidArgument("memory.chunk: the va allocator needs whole KiB chunks (got " +
                                std::to_string(c.chunk) + " bytes)");
       }
       return std::unique_ptr<DeviceAllocator>(new VirtualAddressAllocator(c.capacity, c.chunk));
     },
     // Small requests share arenas (counted at their blocks); the others
     // take whole chunks.
     [](size_t bytes, size_t chunk) -> size_t {
       const size_t blocks = RoundToBlocks(std::max<size_t>(bytes, 1));
       if (chunk == 0 || blocks < chunk / 4) return blocks;
       return (blocks + chunk - 1) / chunk * chunk;
     }});

}  // namespace
}  // namespace spill
