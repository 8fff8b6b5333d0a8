#include "memory/report/events_json.h"

#include <nlohmann/json.hpp>

namespace spill {

std::string MemoryEventsJson(const std::vector<MemoryEvent>& events, const Schedule& schedule) {
  using Json = nlohmann::ordered_json;
  std::string out;
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    Json line = {{"seq", i}, {"event", MemoryEventName(e.type)}, {"step", e.step}};
    if (e.tensor != kNoTensor) {
      line["tensor"] = schedule.tensors[e.tensor].name;
      line["tensor_id"] = e.tensor;
    }
    if (e.layer >= 0) line["layer"] = e.layer;
    if (e.type == MemoryEventType::kAlloc || e.type == MemoryEventType::kFree ||
        e.type == MemoryEventType::kResident) {
      line["block"] = e.block;
      line["offset"] = e.offset;
      line["kind"] = e.tensor == kNoTensor ? "workspace" : "tensor";
      line["category"] = MemoryCategoryName(e.category);
      line["extent"] = e.extent;
    }
    if (e.type == MemoryEventType::kMove) {
      line["block"] = e.block;
      line["offset"] = e.offset;
    }
    if (e.type == MemoryEventType::kAlloc) line["unusable_free"] = e.unusable_free;
    if (e.slices > 0) {
      line["slices"] = e.slices;
      line["buffers"] = e.buffers;
    }
    if (e.maps > 0 || e.unmaps > 0) {
      line["maps"] = e.maps;
      line["unmaps"] = e.unmaps;
      if (e.unmaps > 0 && e.fence >= 0) line["after_free_of"] = e.fence;
    }
    line["bytes"] = e.bytes;
    out += line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  }
  return out;
}

}  // namespace spill
