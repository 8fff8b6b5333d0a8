#include "memory/report/address_map.h"

#include <algorithm>
#include <unordered_map>

namespace spill {

const char* PlacedByName(PlacedBy cause) {
  switch (cause) {
    case PlacedBy::kResident:
      return "resident";
    case PlacedBy::kWrite:
      return "write";
    case PlacedBy::kPrefetch:
      return "prefetch";
    case PlacedBy::kRebuild:
      return "rebuild";
    case PlacedBy::kWorkspace:
      return "workspace";
    case PlacedBy::kStaging:
      return "staging";
  }
  return "?";
}

const char* EvictedByName(EvictedBy cause) {
  switch (cause) {
    case EvictedBy::kKept:
      return "kept";
    case EvictedBy::kRelease:
      return "release";
    case EvictedBy::kOffload:
      return "offload";
    case EvictedBy::kDrop:
      return "drop";
  }
  return "?";
}

namespace {

// Replays the log: blocks open at their kAlloc or kResident, move, and close
// at their kFree; the events around them say why.
class MapBuilder {
 public:
  MapBuilder(const Schedule& schedule, AddressMap* map)
      : schedule_(schedule), map_(*map), pending_(schedule.tensors.size(), EvictedBy::kRelease) {}

  // The events from `index` on belong to the next step.
  void BeginStep(int index) {
    step_begin_ = index;
    rebuilt_since_ = index;
  }

  void Apply(const MemoryEvent& e, int index) {
    switch (e.type) {
      case MemoryEventType::kAlloc:
      case MemoryEventType::kResident:
        Open(e, index);
        return;
      case MemoryEventType::kFree:
        Close(e, index);
        return;
      case MemoryEventType::kMove: {
        MapBlock& block = map_.blocks[open_.at(e.block)];
        block.moves.push_back({index, e.offset});
        map_.top = std::max(map_.top, e.offset + block.bytes);
        return;
      }
      case MemoryEventType::kBeginPrefetch:
        Attribute(e.tensor, e.step, PlacedBy::kPrefetch);
        return;
      case MemoryEventType::kStreamIn:
      case MemoryEventType::kStreamOut:
        Attribute(e.tensor, e.step, PlacedBy::kStaging);
        return;
      case MemoryEventType::kRecompute:
        for (TensorId out : schedule_.layers[e.layer].outputs) {
          Attribute(out, e.step, PlacedBy::kRebuild);
        }
        rebuilt_since_ = index;
        return;
      case MemoryEventType::kCompute:
        rebuilt_since_ = index;
        return;
      case MemoryEventType::kFinishOffload:
        pending_[e.tensor] = EvictedBy::kOffload;
        return;
      case MemoryEventType::kDrop:
        pending_[e.tensor] = EvictedBy::kDrop;
        return;
      default:
        return;
    }
  }

 private:
  void Open(const MemoryEvent& e, int index) {
    MapBlock block;
    block.tensor = e.tensor;
    block.category = e.category;
    block.bytes = e.bytes;
    block.offset = e.offset;
    block.begin = index;
    block.placed = e.type == MemoryEventType::kResident ? PlacedBy::kResident
                   : e.tensor == kNoTensor              ? PlacedBy::kWorkspace
                                                        : PlacedBy::kWrite;
    open_[e.block] = map_.blocks.size();
    if (e.tensor != kNoTensor) {
      by_tensor_[e.tensor] = map_.blocks.size();
      pending_[e.tensor] = EvictedBy::kRelease;
    }
    map_.top = std::max(map_.top, e.offset + e.bytes);
    map_.blocks.push_back(block);
  }

  void Close(const MemoryEvent& e, int index) {
    auto found = open_.find(e.block);
    if (found == open_.end()) return;  // placed before the log began (no snapshot)
    MapBlock& block = map_.blocks[found->second];
    block.end = index;
    block.evicted = EvictedBy::kRelease;
    if (e.tensor != kNoTensor) {
      block.evicted = pending_[e.tensor];
      pending_[e.tensor] = EvictedBy::kRelease;
      by_tensor_.erase(e.tensor);
    }
    open_.erase(found);
  }

  // The open block of `tensor`, placed during `step` by a plain write, was
  // placed for `cause` instead. A rebuild claims only blocks placed since
  // the step's last computation.
  void Attribute(TensorId tensor, int step, PlacedBy cause) {
    auto found = by_tensor_.find(tensor);
    if (found == by_tensor_.end()) return;
    MapBlock& block = map_.blocks[found->second];
    if (block.placed != PlacedBy::kWrite || block.begin < step_begin_) return;
    if (cause == PlacedBy::kRebuild && block.begin < rebuilt_since_) return;
    block.placed = cause;
  }

  const Schedule& schedule_;
  AddressMap& map_;
  std::unordered_map<AllocationId, size_t> open_;   // allocation -> block
  std::unordered_map<TensorId, size_t> by_tensor_;  // tensor -> its open block
  std::vector<EvictedBy> pending_;                  // by tensor: why its next free happens
  int step_begin_ = 0;                              // first event of the current step
  int rebuilt_since_ = 0;                           // the step's last compute or recompute
};

}  // namespace

size_t OffsetAt(const MapBlock& block, int at) {
  size_t offset = block.offset;
  for (const auto& [index, to] : block.moves) {
    if (index >= at) break;
    offset = to;
  }
  return offset;
}

AddressMap BuildAddressMap(const std::vector<MemoryEvent>& events, const Schedule& schedule,
                           int steps) {
  AddressMap map;
  const int count = static_cast<int>(events.size());
  map.step_first.assign(steps + 1, -1);
  map.step_record.assign(steps, -1);
  MapBuilder builder(schedule, &map);
  int step = -1, end_of_steps = 0;
  for (int i = 0; i < count; ++i) {
    const MemoryEvent& e = events[i];
    if (e.step >= 0 && e.step < steps) {
      if (e.step != step) builder.BeginStep(i);
      step = e.step;
      if (map.step_first[step] < 0) map.step_first[step] = i;
      // A step's record is taken where it computes (or would: kIdle).
      if (e.type == MemoryEventType::kCompute || e.type == MemoryEventType::kIdle) {
        map.step_record[step] = i;
      }
      end_of_steps = i + 1;
    }
    builder.Apply(e, i);
  }
  // Steps without events begin where the next one does.
  map.step_first[steps] = end_of_steps;
  for (int s = steps - 1; s >= 0; --s) {
    if (map.step_first[s] < 0) map.step_first[s] = map.step_first[s + 1];
    if (map.step_record[s] < 0) map.step_record[s] = map.step_first[s];
  }
  return map;
}

}  // namespace spill
