// The address space of one iteration, from its event log: every device
// block as a rectangle over (event span x offset range), with the event that
// placed it, the event that took it away and the places compaction slid it
// to. The memory page draws it; tests check it against the step records.
//
// Positions are event indices of the log. A step's record (its row of the
// memory log: bytes in use by category, live tensors) is taken once the
// step's tensors are in place, just before it computes: at the index of its
// kCompute event, or, for a step with nothing to compute, where its events
// begin. A block is live at a record when it was placed before it and not
// freed before it (LiveAt).
#ifndef SPILL_MEMORY_REPORT_ADDRESS_MAP_H_
#define SPILL_MEMORY_REPORT_ADDRESS_MAP_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/memory_events.h"

namespace spill {

// Why a block appeared.
enum class PlacedBy : uint8_t {
  kResident,   // already placed when the iteration began
  kWrite,      // the step writes the tensor (an output, a gradient)
  kPrefetch,   // copied back from host memory (scheduled, or on demand)
  kRebuild,    // recomputed: its layer's forward ran again
  kWorkspace,  // the step's convolution workspace
  kStaging,    // a streamed step's slice buffer
};
// Why it went away.
enum class EvictedBy : uint8_t {
  kKept,     // still placed when the iteration ended
  kRelease,  // freed after its last use (or its step, for workspaces and staging)
  kOffload,  // its copy to host memory finished, the device block was freed
  kDrop,     // dropped, to be rebuilt by recomputation
};
const char* PlacedByName(PlacedBy cause);
const char* EvictedByName(EvictedBy cause);

struct MapBlock {
  TensorId tensor = kNoTensor;  // kNoTensor: a workspace
  MemoryCategory category = MemoryCategory::kActivations;
  size_t bytes = 0;
  size_t offset = 0;  // where it was placed
  int begin = 0;      // index of its kAlloc or kResident event
  int end = -1;       // index of its kFree event; -1: kept past the iteration
  PlacedBy placed = PlacedBy::kWrite;
  EvictedBy evicted = EvictedBy::kKept;
  // Compaction: (index of the kMove event, the new offset), in order.
  std::vector<std::pair<int, size_t>> moves;
};

struct AddressMap {
  std::vector<MapBlock> blocks;  // by begin
  // Per step, and one more: index of its first event (the next step's when
  // it has none); the last entry is where the steps' events end.
  std::vector<int> step_first;
  std::vector<int> step_record;  // per step: where its record was taken
  size_t top = 0;                // the highest end offset any block reached
};

// `steps`: the iteration's step count (the memory log's).
AddressMap BuildAddressMap(const std::vector<MemoryEvent>& events, const Schedule& schedule,
                           int steps);

// Whether `block` holds device memory at event index `at`.
inline bool LiveAt(const MapBlock& block, int at) {
  return block.begin < at && (block.end < 0 || block.end >= at);
}
// The offset of `block` at event index `at` (after the moves before it).
size_t OffsetAt(const MapBlock& block, int at);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_ADDRESS_MAP_H_
