#include "memory/allocators/allocator.h"

#include <algorithm>
#include <map>

#include "framework/base/strings.h"
#include "framework/base/units.h"

namespace spill {
namespace {

// The space past the region that an overdraft may place blocks in: more
// than any plan here asks for.
constexpr size_t kOverdraftSpaceBytes = size_t{1} << 50;  // 1 PiB

}  // namespace

DeviceAllocator::DeviceAllocator(size_t capacity)
    : capacity_(capacity / kPoolBlockBytes * kPoolBlockBytes) {
  stats_.capacity = capacity_;
  stats_.free_bytes = capacity_;
}

StatusOr<Allocation> DeviceAllocator::Allocate(const AllocRequest& request) {
  const size_t bytes = RoundToBlocks(std::max<size_t>(request.bytes, 1));
  const double unusable = log_ != nullptr ? UnusableFree(bytes) : 0.0;
  const AllocationId id = next_id_;
  StatusOr<size_t> offset = Place(request, bytes, id);
  if (!offset.ok() && overdraft_ && offset.status().code() == StatusCode::kOutOfMemory) {
    offset = Overdraw(bytes, request.category, id);
  }
  if (!offset.ok()) {
    stats_.failures++;
    UpdateFreeStats();
    if (offset.status().code() != StatusCode::kOutOfMemory) return offset.status();
    // Room enough, but the device refused memory (va's physical chunks): its
    // report says why, and "no room" would not.
    if (Fits(bytes)) return offset.status();
    return OutOfMemory("no room for " + FormatBytes(static_cast<double>(bytes)) + " (" +
                       FormatBytes(static_cast<double>(stats_.free_bytes)) +
                       " free, largest request that fits " +
                       FormatBytes(static_cast<double>(stats_.largest_free)) + ")");
  }
  ++next_id_;
  live_[id] = Live{*offset, bytes, request.category, request.tensor};
  const int c = static_cast<int>(request.category);
  stats_.in_use[c] += bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.in_use[c]);
  stats_.total_in_use += bytes;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_in_use);
  stats_.high_water = std::max(stats_.high_water, *offset + bytes);
  stats_.allocations++;
  overshoot_peak_ = std::max(overshoot_peak_, overshoot());
  UpdateFreeStats();
  if (log_ != nullptr) {
    MemoryEvent e;
    e.type = MemoryEventType::kAlloc;
    e.tensor = request.tensor;
    e.block = id;
    e.bytes = bytes;
    e.offset = *offset;
    e.category = request.category;
    e.unusable_free = unusable;
    e.extent = Extent();
    const MappingCounts work = TakeMappingWork();
    e.maps = static_cast<int>(work.maps);
    e.unmaps = static_cast<int>(work.unmaps);
    e.fence = work.fence;
    log_->Add(e);
  }
  CheckEvent("allocation");
  return Allocation{id, *offset, bytes};
}

void DeviceAllocator::Free(AllocationId id) {
  auto found = live_.find(id);
  SPILL_CHECK(found != live_.end()) << name() << ": free of unknown block " << id;
  const Live block = found->second;
  live_.erase(found);
  auto overdrawn = overdrawn_.find(id);
  if (overdrawn != overdrawn_.end()) {
    overdraft_pool_->Free(overdrawn->second);
    overdrawn_bytes_ -= block.bytes;
    overdrawn_.erase(overdrawn);
  } else {
    Unplace(id, block.offset, block.bytes);
  }
  stats_.in_use[static_cast<int>(block.category)] -= block.bytes;
  stats_.total_in_use -= block.bytes;
  stats_.frees++;
  UpdateFreeStats();
  if (log_ != nullptr) {
    MemoryEvent e;
    e.type = MemoryEventType::kFree;
    e.tensor = block.tensor;
    e.block = id;
    e.bytes = block.bytes;
    e.offset = block.offset;
    e.category = block.category;
    e.extent = Extent();
    log_->Add(e);
  }
  CheckEvent("free");
}

size_t DeviceAllocator::Overdraw(size_t bytes, MemoryCategory category, AllocationId id) {
  if (overdraft_pool_ == nullptr) {
    overdraft_pool_ = std::make_unique<HeapPool>(kOverdraftSpaceBytes, FitPolicy::kFirstFit);
  }
  StatusOr<Allocation> block = overdraft_pool_->Allocate(bytes, category);
  SPILL_CHECK(block.ok()) << name() << ": overdraft of " << bytes
                          << " bytes: " << block.status().ToString();
  overdrawn_[id] = block->id;
  overdrawn_bytes_ += bytes;
  return capacity_ + block->offset;
}

size_t DeviceAllocator::overshoot() const {
  if (!places()) return stats_.total_in_use > capacity_ ? stats_.total_in_use - capacity_ : 0;
  return overdraft_pool_ == nullptr ? 0 : overdraft_pool_->LiveEnd();
}

void DeviceAllocator::CheckEvent(const char* what) const {
  if (!check_every_event_) return;
  const std::string broken = CheckInvariants();
  SPILL_CHECK(broken.empty()) << name() << " allocator, after an " << what << ": " << broken;
}

DeviceAllocator::MappingCounts DeviceAllocator::TakeMappingWork() {
  const MappingCounts now = mapping_counts();
  // Counters that went back were reset: everything since counts.
  const bool reset = now.maps < mapping_taken_.maps || now.unmaps < mapping_taken_.unmaps;
  MappingCounts work =
      reset ? now
            : MappingCounts{now.maps - mapping_taken_.maps, now.unmaps - mapping_taken_.unmaps};
  work.fence = TakeUnmapFence();
  mapping_taken_ = now;
  return work;
}

size_t DeviceAllocator::Extent() const {
  size_t end = 0;
  for (const auto& [id, block] : live_) end = std::max(end, block.offset + block.bytes);
  return end;
}

StatusOr<void*> DeviceAllocator::Reserve(Device& device) {
  return device.ReserveDeviceRegion(capacity_);
}

void DeviceAllocator::Release(Device& device, void* base) { device.ReleaseDeviceRegion(base); }

size_t DeviceAllocator::MoveDown(AllocationId id) {
  SPILL_CHECK(can_compact()) << name() << " cannot move blocks";
  auto found = live_.find(id);
  SPILL_CHECK(found != live_.end()) << name() << ": move of unknown block " << id;
  const size_t offset = Slide(id, found->second.offset, found->second.bytes);
  const bool moved = offset != found->second.offset;
  if (moved) stats_.moves++;
  found->second.offset = offset;
  UpdateFreeStats();
  if (moved && log_ != nullptr) {
    MemoryEvent e;
    e.type = MemoryEventType::kMove;
    e.tensor = found->second.tensor;
    e.block = id;
    e.bytes = found->second.bytes;
    e.offset = offset;
    e.category = found->second.category;
    e.extent = Extent();
    log_->Add(e);
  }
  return offset;
}

void DeviceAllocator::RecordResident() {
  if (log_ == nullptr) return;
  const size_t extent = Extent();
  for (const auto& [offset, id] : AllocationsByOffset()) {
    const Live& block = live_.at(id);
    MemoryEvent e;
    e.type = MemoryEventType::kResident;
    e.tensor = block.tensor;
    e.block = id;
    e.bytes = block.bytes;
    e.offset = offset;
    e.category = block.category;
    e.extent = extent;
    log_->Add(e);
  }
}

size_t DeviceAllocator::Slide(AllocationId id, size_t offset, size_t bytes) {
  SPILL_CHECK(false) << name() << " does not compact";
  return offset;
}

std::vector<std::pair<size_t, AllocationId>> DeviceAllocator::AllocationsByOffset() const {
  std::vector<std::pair<size_t, AllocationId>> out;
  out.reserve(live_.size());
  for (const auto& [id, block] : live_) {
    if (overdrawn_.count(id) == 0) out.push_back({block.offset, id});
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<DeviceAllocator::LiveBlock> DeviceAllocator::LiveBlocks() const {
  std::vector<LiveBlock> blocks;
  blocks.reserve(live_.size());
  for (const auto& [id, block] : live_) {
    if (overdrawn_.count(id) > 0) continue;
    blocks.push_back({id, block.offset, block.bytes, block.category});
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const LiveBlock& a, const LiveBlock& b) { return a.offset < b.offset; });
  return blocks;
}

void DeviceAllocator::ResetPeaks() {
  stats_.peak = stats_.in_use;
  stats_.total_peak = stats_.total_in_use;
  overshoot_peak_ = overshoot();
}

void DeviceAllocator::UpdateFreeStats() {
  // Blocks placed past the region take nothing inside it.
  const size_t inside = stats_.total_in_use - overdrawn_bytes_;
  stats_.free_bytes = capacity_ > inside ? capacity_ - inside : 0;
  stats_.largest_free = Largest();
  stats_.free_segments = FreeSegments();
}

std::string DeviceAllocator::CheckInvariants() const {
  size_t used = 0, end = 0;
  std::array<size_t, kNumCategories> per{};
  for (const auto& [id, block] : live_) {
    used += block.bytes;
    per[static_cast<int>(block.category)] += block.bytes;
    if (overdrawn_.count(id) == 0) end = std::max(end, block.offset + block.bytes);
  }
  if (used != stats_.total_in_use) return "in-use total disagrees with the live blocks";
  if (per != stats_.in_use) return "per-category in-use disagrees with the live blocks";
  if (stats_.total_peak < stats_.total_in_use) return "peak is below current use";
  if (places()) {
    if (end > address_space()) return "a block ends beyond the address space";
    if (end > stats_.high_water) return "a block ends above the high-water mark";
    // (Blocks placed past the region are not the policy's: they are left out.)
    const auto blocks = AllocationsByOffset();
    for (size_t i = 1; i < blocks.size(); ++i) {
      const Live& prev = live_.at(blocks[i - 1].second);
      if (prev.offset + prev.bytes > blocks[i].first) {
        return "blocks overlap at offset " + std::to_string(blocks[i].first);
      }
    }
  }
  return CheckPlacement();
}

AllocationProfile ProfileFromEvents(const std::vector<MemoryEvent>& events, Phase phase,
                                    size_t budget) {
  AllocationProfile profile;
  profile.phase = phase;
  profile.budget = budget;
  std::unordered_map<AllocationId, size_t> open;  // block -> request index
  std::map<std::pair<TensorId, int>, int> seen;   // (tensor, step for workspaces) -> count
  int64_t clock = 0;
  for (const MemoryEvent& e : events) {
    if (e.type == MemoryEventType::kAlloc) {
      if (e.step < 0) continue;  // outside the iteration's steps: kept for good
      ProfiledRequest r;
      r.tensor = e.tensor;
      r.step = e.step;
      r.bytes = e.bytes;
      r.occurrence = seen[{e.tensor, e.tensor == kNoTensor ? e.step : -1}]++;
      r.alloc_time = clock++;
      r.free_time = -1;
      open[e.block] = profile.requests.size();
      profile.requests.push_back(r);
    } else if (e.type == MemoryEventType::kFree) {
      auto it = open.find(e.block);
      const int64_t now = clock++;
      if (it == open.end()) continue;  // allocated before this iteration
      profile.requests[it->second].free_time = now;
      open.erase(it);
    }
  }
  for (ProfiledRequest& r : profile.requests) {
    if (r.free_time < 0) r.free_time = clock;
  }
  return profile;
}

// ---- Registry ----

Registry<AllocatorInfo>& Allocators() {
  static auto* registry = new Registry<AllocatorInfo>("allocator", "allocators");
  return *registry;
}

bool RegisterAllocator(AllocatorInfo info) {
  AddSettings("allocator", info.name, info.settings);
  return Allocators().Add(std::move(info));
}

const AllocatorInfo* FindAllocator(const std::string& name) { return Allocators().Find(name); }

size_t ChargedBytes(const std::string& name, size_t bytes, const PolicySettings& settings,
                    bool persistent) {
  const AllocatorInfo* info = FindAllocator(name);
  if (info == nullptr || !info->charge) return RoundToBlocks(std::max<size_t>(bytes, 1));
  return info->charge(bytes, settings, persistent);
}

size_t UsableBytes(const std::string& name, size_t budget, const PolicySettings& settings) {
  const AllocatorInfo* info = FindAllocator(name);
  if (info == nullptr || !info->usable) return budget;
  return info->usable(budget, settings);
}

std::vector<std::string> AllocatorNames() { return Allocators().Names(); }

StatusOr<std::unique_ptr<DeviceAllocator>> CreateAllocator(const std::string& name,
                                                           const AllocatorContext& context) {
  SPILL_ASSIGN_OR_RETURN(const AllocatorInfo* info, Allocators().Get(name));
  return info->create(context);
}

}  // namespace spill
