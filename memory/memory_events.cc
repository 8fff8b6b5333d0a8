#include "memory/memory_events.h"

#include <algorithm>

namespace spill {

const char* MemoryEventName(MemoryEventType type) {
  switch (type) {
    case MemoryEventType::kAlloc:
      return "alloc";
    case MemoryEventType::kFree:
      return "free";
    case MemoryEventType::kBeginOffload:
      return "begin_offload";
    case MemoryEventType::kFinishOffload:
      return "finish_offload";
    case MemoryEventType::kCancelOffload:
      return "cancel_offload";
    case MemoryEventType::kBeginPrefetch:
      return "begin_prefetch";
    case MemoryEventType::kFinishPrefetch:
      return "finish_prefetch";
    case MemoryEventType::kDrop:
      return "drop";
    case MemoryEventType::kCompute:
      return "compute";
    case MemoryEventType::kRecompute:
      return "recompute";
    case MemoryEventType::kCompact:
      return "compact";
    case MemoryEventType::kRemap:
      return "remap";
    case MemoryEventType::kUpdate:
      return "update";
    case MemoryEventType::kStreamIn:
      return "stream_in";
    case MemoryEventType::kStreamOut:
      return "stream_out";
    case MemoryEventType::kResident:
      return "resident";
    case MemoryEventType::kMove:
      return "move";
    case MemoryEventType::kIdle:
      return "idle";
    case MemoryEventType::kBeginGather:
      return "begin_gather";
    case MemoryEventType::kFinishGather:
      return "finish_gather";
    case MemoryEventType::kReduceScatter:
      return "reduce_scatter";
    case MemoryEventType::kAllGather:
      return "all_gather";
  }
  return "?";
}

size_t CountBlocks(const std::vector<MemoryEvent>& events) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(), [](const MemoryEvent& e) {
    return e.type == MemoryEventType::kAlloc || e.type == MemoryEventType::kResident;
  }));
}

TraceMetrics MeasureTrace(const std::vector<MemoryEvent>& events, size_t base_load) {
  TraceMetrics m;
  size_t load = base_load;
  m.max_load = load;
  double unusable = 0;
  for (const MemoryEvent& e : events) {
    if (e.type == MemoryEventType::kAlloc) {
      load += e.bytes;
      m.max_load = std::max(m.max_load, load);
      m.footprint = std::max(m.footprint, e.offset + e.bytes);
      m.allocations++;
      unusable += e.unusable_free;
      m.max_unusable_free = std::max(m.max_unusable_free, e.unusable_free);
    } else if (e.type == MemoryEventType::kFree) {
      load -= e.bytes;
    }
  }
  if (m.allocations > 0) m.mean_unusable_free = unusable / m.allocations;
  return m;
}

}  // namespace spill
