// Per-step memory accounting: the product's core output. The runtime fills a
// record for every step of an iteration - bytes in use by category, the
// step's peak, live tensors, bytes moved each way, recomputations - and the
// same records come out of `plan` (no compute) and `train --memory-log` (a
// real run). memory/report writes them as CSV, JSON and an SVG plot like
// figure 10 of the SuperNeurons paper.
#ifndef SPILL_MEMORY_MEMORY_LOG_H_
#define SPILL_MEMORY_MEMORY_LOG_H_

#include <array>
#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/heap_pool.h"

namespace spill {

struct StepRecord {
  int step = 0;  // 0-based; printed 1-based
  Pass pass = Pass::kForward;
  int layer = -1;
  // Bytes in use by category once the step's tensors are in place.
  std::array<size_t, kNumCategories> in_use{};
  size_t total = 0;  // sum of in_use
  size_t peak = 0;   // highest total at any moment of the step
  // How far past the budget the step's placements reached (only when a
  // plan that does not fit is played to the end: GivenPlans::overdraft).
  size_t overshoot = 0;
  int live_tensors = 0;        // transient tensors with device memory
  std::vector<TensorId> live;  // only when live sets are recorded
  size_t to_host = 0;          // bytes offloaded during the step
  size_t to_device = 0;        // bytes prefetched during the step
  size_t on_demand = 0;        // of those, read in by the step itself: its compute waits
  int recomputed = 0;          // forward computations rerun during the step
  size_t compacted = 0;        // bytes moved within the device to close holes
  size_t workspace = 0;        // workspace bytes granted to the step
  size_t host = 0;             // bytes in host memory (offloaded tensors, parameters kept there)
  std::string algorithm;       // convolution algorithm chosen, if any
  int64_t slice_images = 0;    // streamed: images per slice (0: the batch on the device at once)
  int stream_buffers = 0;      // streamed: slices per staging block (2: double-buffered)
};

struct MemoryLog {
  std::string mode;
  std::vector<StepRecord> steps;
  size_t peak = 0;  // max over steps of StepRecord::peak
  int peak_step = -1;
  std::vector<TensorId> peak_live;  // live tensors at the peak step (from the
                                    // second iteration on: steps repeat)
  size_t persistent = 0;            // parameters, gradients, solver state
  size_t to_host = 0;
  size_t to_device = 0;
  size_t on_demand = 0;  // of to_device: read in by the step that reads them
  int recomputed = 0;
  int streamed = 0;  // steps computed in slices through host memory
  size_t compacted = 0;
  size_t host_peak = 0;  // max over steps of StepRecord::host
  size_t overshoot = 0;  // max over steps of StepRecord::overshoot

  void Clear();
  // Computes the peak and the totals from the step records.
  void Finish();
};

}  // namespace spill

#endif  // SPILL_MEMORY_MEMORY_LOG_H_
