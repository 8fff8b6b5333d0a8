// Fragmentation over one iteration, from its allocation trace: the memory
// the placements span at each step (Dymem's Fig. 15: live blocks, free but
// unusable holes between them and, for GTBM, its arenas' extents) and the
// unusable free fraction U_f every allocation met (Dymem's Eq. 1, in bytes:
// free memory in pieces too small for the request, over all free memory).
//
// Pure functions of the event log (memory_events.h); memory/report's
// fragmentation_svg shows both per step, one curve per allocator, so that a
// user sees where an allocator needs more memory than the bytes it holds and why.
#ifndef SPILL_MEMORY_FRAGMENTATION_H_
#define SPILL_MEMORY_FRAGMENTATION_H_

#include <string>
#include <vector>

#include "memory/memory_events.h"

namespace spill {

struct FragmentationProfile {
  std::string label;
  // Per step: the most memory the placements spanned during it (the
  // allocator's extent after each of the step's allocations and frees).
  std::vector<size_t> footprint;
  struct Point {
    double x;  // the step, plus the allocation's place among the step's
    double unusable_free;
  };
  std::vector<Point> unusable;        // one per allocation
  std::vector<double> step_unusable;  // per step: mean over its allocations (0: none)
  double mean_unusable = 0;           // over every allocation
  size_t peak = 0;                    // the largest per-step footprint
  int peak_step = -1;
  double peak_unusable = 0;  // mean U_f of the allocations at the peak step
};

// `steps`: the iteration's step count; events outside the steps only move
// the extent.
FragmentationProfile MeasureFragmentation(const std::vector<MemoryEvent>& events, int steps,
                                          const std::string& label);

}  // namespace spill

#endif  // SPILL_MEMORY_FRAGMENTATION_H_
