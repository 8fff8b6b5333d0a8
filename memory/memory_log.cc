#include "memory/memory_log.h"

#include <algorithm>

namespace spill {

void MemoryLog::Clear() {
  steps.clear();
  peak = 0;
  peak_step = -1;
  peak_live.clear();
  to_host = to_device = compacted = host_peak = 0;
  recomputed = streamed = 0;
}

void MemoryLog::Finish() {
  peak = 0;
  host_peak = 0;
  overshoot = 0;
  peak_step = -1;
  to_host = to_device = on_demand = compacted = 0;
  recomputed = streamed = 0;
  for (const StepRecord& r : steps) {
    compacted += r.compacted;
    if (peak_step < 0 || r.peak > peak) {
      peak = r.peak;
      peak_step = r.step;
    }
    to_host += r.to_host;
    host_peak = std::max(host_peak, r.host);
    overshoot = std::max(overshoot, r.overshoot);
    to_device += r.to_device;
    on_demand += r.on_demand;
    recomputed += r.recomputed;
    streamed += r.slice_images > 0;
  }
}

}  // namespace spill
