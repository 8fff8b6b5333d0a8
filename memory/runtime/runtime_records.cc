#include "memory/runtime/runtime_records.h"

#include <algorithm>

namespace spill {

void RuntimeRecords::SetPersistent(size_t bytes, size_t peak) {
  log_.persistent = current_.persistent = bytes;
  run_peak_ = peak;
}

void RuntimeRecords::BeginIteration(const std::string& mode) {
  current_.Clear();
  current_.mode = mode;
  current_.persistent = log_.persistent;
}

void RuntimeRecords::BeginStep(const TransferCounters& transfers) {
  step_start_ = transfers;
  step_recomputed_ = recomputations_;
}

void RuntimeRecords::PeakOfStep(size_t peak, size_t overshoot) {
  StepRecord& record = step();
  record.peak = std::max(record.peak, peak);
  record.overshoot = std::max(record.overshoot, overshoot);
  run_peak_ = std::max(run_peak_, record.peak);
}

void RuntimeRecords::FinishStep(const TransferCounters& transfers) {
  StepRecord& record = step();
  record.to_host = transfers.to_host_bytes - step_start_.to_host_bytes;
  record.to_device = transfers.to_device_bytes - step_start_.to_device_bytes;
  record.on_demand = transfers.on_demand_bytes - step_start_.on_demand_bytes;
  record.recomputed = static_cast<int>(recomputations_ - step_recomputed_);
  record.compacted = transfers.compacted_bytes - step_start_.compacted_bytes;
}

void RuntimeRecords::EndIteration(const std::vector<MemoryEvent>& events, bool every_step) {
  current_.Finish();
  // The next iteration repeats this one; it lists what is live at the peak.
  // (Where an iteration decides differently from the last - a profile-guided
  // allocator re-profiling - only a record of every step has its peak's.)
  if (current_.peak_step >= 0 && (every_step || capture_step_ == current_.peak_step)) {
    current_.peak_live = current_.steps[current_.peak_step].live;
  }
  capture_step_ = current_.peak_step;
  log_ = current_;
  events_ = events;
}

}  // namespace spill
