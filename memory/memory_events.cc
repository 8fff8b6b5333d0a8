#include "memory/memory_events.h"

#include <algorithm>
#include <sstream>

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
  }
  return "?";
}

namespace {

std::string Escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string MemoryEventsJson(const std::vector<MemoryEvent>& events, const Schedule& schedule) {
  std::ostringstream out;
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    out << "{\"seq\":" << i << ",\"event\":\"" << MemoryEventName(e.type)
        << "\",\"step\":" << e.step;
    if (e.tensor != kNoTensor) {
      out << ",\"tensor\":\"" << Escaped(schedule.tensors[e.tensor].name)
          << "\",\"tensor_id\":" << e.tensor;
    }
    if (e.layer >= 0) out << ",\"layer\":" << e.layer;
    if (e.type == MemoryEventType::kAlloc || e.type == MemoryEventType::kFree ||
        e.type == MemoryEventType::kResident) {
      out << ",\"block\":" << e.block << ",\"offset\":" << e.offset << ",\"kind\":\""
          << (e.tensor == kNoTensor ? "workspace" : "tensor") << "\",\"category\":\""
          << MemoryCategoryName(e.category) << "\",\"extent\":" << e.extent;
    }
    if (e.type == MemoryEventType::kMove)
      out << ",\"block\":" << e.block << ",\"offset\":" << e.offset;
    if (e.type == MemoryEventType::kAlloc) out << ",\"unusable_free\":" << e.unusable_free;
    if (e.maps > 0 || e.unmaps > 0) out << ",\"maps\":" << e.maps << ",\"unmaps\":" << e.unmaps;
    out << ",\"bytes\":" << e.bytes << "}\n";
  }
  return out.str();
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
