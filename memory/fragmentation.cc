#include "memory/fragmentation.h"

#include <algorithm>
#include <cstdio>

namespace spill {

FragmentationProfile MeasureFragmentation(const std::vector<MemoryEvent>& events, int steps,
                                          const std::string& label) {
  FragmentationProfile p;
  p.label = label;
  p.footprint.assign(steps, 0);
  p.step_unusable.assign(steps, 0);
  std::vector<int> allocations(steps, 0);
  for (const MemoryEvent& e : events) {
    if (e.type == MemoryEventType::kAlloc && e.step >= 0 && e.step < steps) ++allocations[e.step];
  }
  size_t extent = 0;
  int step = -1, seen = 0, total = 0;
  for (const MemoryEvent& e : events) {
    if (e.type != MemoryEventType::kAlloc && e.type != MemoryEventType::kFree) continue;
    if (e.step >= 0 && e.step < steps) {
      // Steps without allocations or frees span what the last event left.
      while (step < e.step) {
        ++step;
        p.footprint[step] = extent;
        seen = 0;
      }
    }
    extent = e.extent;
    if (e.step < 0 || e.step >= steps) continue;
    p.footprint[e.step] = std::max(p.footprint[e.step], extent);
    if (e.type != MemoryEventType::kAlloc) continue;
    ++seen;
    ++total;
    p.unusable.push_back(
        {e.step + static_cast<double>(seen) / (allocations[e.step] + 1), e.unusable_free});
    p.step_unusable[e.step] += e.unusable_free / allocations[e.step];
    p.mean_unusable += e.unusable_free;
  }
  while (++step < steps) p.footprint[step] = extent;
  if (total > 0) p.mean_unusable /= total;
  for (int s = 0; s < steps; ++s) {
    if (p.footprint[s] > p.peak) {
      p.peak = p.footprint[s];
      p.peak_step = s;
    }
  }
  if (p.peak_step >= 0) p.peak_unusable = p.step_unusable[p.peak_step];
  return p;
}

}  // namespace spill
