// The event log of an iteration as JSON lines (`plan --trace`): one object
// per allocation, free, transfer, drop and computation, with tensor names.
#ifndef SPILL_MEMORY_REPORT_EVENTS_JSON_H_
#define SPILL_MEMORY_REPORT_EVENTS_JSON_H_

#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/memory_events.h"

namespace spill {

// One JSON object per line; tensor names from `schedule`.
std::string MemoryEventsJson(const std::vector<MemoryEvent>& events, const Schedule& schedule);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_EVENTS_JSON_H_
