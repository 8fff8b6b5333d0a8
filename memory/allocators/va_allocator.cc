#include "memory/allocators/va_allocator.h"

#include <algorithm>
#include <chrono>

#include "framework/base/units.h"

namespace spill {
namespace {

// Planning's mappings: addresses only, every map and unmap succeeds.
class PlannedMappings : public VirtualMemory {
 public:
  PlannedMappings(size_t chunk_bytes, size_t chunks, size_t address_bytes)
      : chunk_bytes_(chunk_bytes), chunks_(chunks), address_bytes_(address_bytes) {}
  char* base() const override { return nullptr; }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  size_t chunks() const override { return chunks_; }
  size_t address_bytes() const override { return address_bytes_; }
  Status Map(size_t, size_t) override { return Status::Ok(); }
  Status Unmap(size_t, size_t) override { return Status::Ok(); }

 private:
  size_t chunk_bytes_, chunks_, address_bytes_;
};

}  // namespace

VirtualAddressAllocator::VirtualAddressAllocator(size_t capacity, size_t chunk_bytes)
    : DeviceAllocator(capacity),
      chunk_(chunk_bytes),
      chunks_(capacity / chunk_bytes),
      slots_(kAddressSpaceFactor * std::max<size_t>(capacity / chunk_bytes, 1)) {
  stats_.chunk = chunk_;
  stats_.chunks = chunks_;
  GiveSlots(0, slots_);
  Unreserve();
}

void VirtualAddressAllocator::Unreserve() {
  vm_ = std::make_unique<PlannedMappings>(chunk_, chunks_, slots_ * chunk_);
  record_ = [] { return std::shared_ptr<Event>(); };
}

VirtualAddressAllocator::~VirtualAddressAllocator() = default;

StatusOr<void*> VirtualAddressAllocator::Reserve(Device& device) {
  SPILL_CHECK(live_.empty() && cache_.empty()) << "va: requests placed before the reservation";
  SPILL_ASSIGN_OR_RETURN(vm_, device.CreateVirtualMemory(chunk_, chunks_, slots_ * chunk_));
  record_ = [&device] { return device.compute_queue().Record(); };
  return static_cast<void*>(vm_->base());
}

void VirtualAddressAllocator::Release(Device& device, void* base) {
  // Nothing queued may touch the mappings once they go.
  device.compute_queue().Synchronize();
  device.SynchronizeCopies();
  Unreserve();
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
  const MemoryCategory c = request.category;
  const bool persistent = c == MemoryCategory::kParameters ||
                          c == MemoryCategory::kParamGradients ||
                          c == MemoryCategory::kOptimizerState;
  if (SharesArena(bytes, chunk_, persistent)) {
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
      Cache(std::move(arena->second.range), id);
      arenas_.erase(arena);
    }
  } else {
    stats_.held -= live.range.chunks.size();
    Cache(std::move(live.range), id);
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
  for (auto it = cached_at_.begin(); it != cached_at_.end(); ++it) {
    auto next = std::next(it);
    if (next != cached_at_.end() && it->first + it->second == next->first) {
      return "va: two cached ranges lie side by side unmerged";
    }
  }
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

// The physical chunk: the CUDA driver's usual mapping granularity by
// default; whole pages, since chunks are mapped with mmap on the CPU.
const SettingSpec kChunkSetting = {
    "va_chunk",
    SettingKind::kBytes,
    "2MiB",
    "the va allocator's physical chunk, a multiple of 4KiB",
    static_cast<int64_t>(kChunkAlignmentBytes),
    0,
    {},
    [](const std::string& text) {
      const size_t bytes = *ParseBytes(text);
      if (bytes % kChunkAlignmentBytes == 0) return Status::Ok();
      return InvalidArgument("memory: va_chunk must be a positive multiple of 4 KiB (got " +
                             std::to_string(bytes) + " bytes)");
    }};

const bool kVa = RegisterAllocator(
    {"va",
     "virtual addressing: a fresh virtual range of memory.va_chunk-sized physical chunks per "
     "request, so memory never fragments externally; small requests share chunk arenas",
     false,
     [](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
       return std::unique_ptr<DeviceAllocator>(
           new VirtualAddressAllocator(c.capacity, c.settings.Bytes(kChunkSetting)));
     },
     {kChunkSetting},
     // Small requests share arenas (counted at their blocks); the others
     // take whole chunks.
     [](size_t bytes, const PolicySettings& settings, bool persistent) -> size_t {
       const size_t chunk = settings.Bytes(kChunkSetting);
       const size_t blocks = RoundToBlocks(std::max<size_t>(bytes, 1));
       if (SharesArena(blocks, chunk, persistent)) return blocks;
       return (blocks + chunk - 1) / chunk * chunk;
     },
     // Whole chunks, less what arenas may leave unused: small requests are
     // charged their blocks, but arenas take whole chunks.
     [](size_t budget, const PolicySettings& settings) -> size_t {
       const size_t chunk = settings.Bytes(kChunkSetting);
       const size_t chunks = budget / chunk;
       return chunks > kArenaSlackChunks ? (chunks - kArenaSlackChunks) * chunk : 0;
     }});

}  // namespace
}  // namespace spill
