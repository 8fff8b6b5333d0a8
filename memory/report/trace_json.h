// A timeline in the Chrome trace-event format (JSON), which ui.perfetto.dev
// and chrome://tracing open: one process, a track per lane (compute queue,
// copy queue, host), one complete ("X") event per slice with its step and
// bytes, and two counter tracks: device bytes in use by category and host
// bytes holding offloaded tensors. Times are microseconds from the start of
// the iteration. Simulated and real timelines use the same layout, so they
// can be opened side by side.
#ifndef SPILL_MEMORY_REPORT_TRACE_JSON_H_
#define SPILL_MEMORY_REPORT_TRACE_JSON_H_

#include <string>

#include "memory/sim/timeline.h"

namespace spill {

// The counter tracks' names.
inline constexpr char kDeviceMemoryCounter[] = "device memory";
inline constexpr char kHostMemoryCounter[] = "host memory";

std::string TimelineTraceJson(const Timeline& timeline);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_TRACE_JSON_H_
