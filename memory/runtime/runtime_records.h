// RuntimeRecords: what the memory runtime reports about the iterations it
// ran - the per-step records (memory/memory_log.h) of the iteration in
// progress and of the last completed one, its event log, the out-of-memory
// report, the peak and the recomputations since creation.
//
// Only bookkeeping: the runtime hands it the allocator's and the residency
// state machine's counters at fixed points of each step (BeginStep,
// FinishStep), and it keeps the differences.
#ifndef SPILL_MEMORY_RUNTIME_RUNTIME_RECORDS_H_
#define SPILL_MEMORY_RUNTIME_RUNTIME_RECORDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/residency.h"

namespace spill {

// What was live when an allocation failed.
struct OutOfMemoryInfo {
  int step = -1;
  std::string what;  // the request that failed
  size_t requested = 0;
  size_t in_use = 0;
  std::vector<TensorId> live;
};

class RuntimeRecords {
 public:
  // Persistent tensors placed, with the allocator's peak so far.
  void SetPersistent(size_t bytes, size_t peak);
  void BeginIteration(const std::string& mode);
  // `transfers`: the residency counters as the step starts.
  void BeginStep(const TransferCounters& transfers);
  // Whether the step's record lists its live tensors: the peak step of the
  // last iteration (which the next one repeats), or every step when asked.
  bool CapturesLive(int step, bool every_step) const { return every_step || step == capture_step_; }
  void Add(StepRecord record) { current_.steps.push_back(std::move(record)); }
  // The record of the step being run.
  StepRecord& step() { return current_.steps.back(); }
  // After the step's computation: its peak and overshoot so far.
  void PeakOfStep(size_t peak, size_t overshoot);
  // After the step's actions: the bytes moved and layers recomputed in it.
  void FinishStep(const TransferCounters& transfers);
  void CountRecomputation() { ++recomputations_; }
  // The iteration's records (and `events`) become the last completed one's;
  // `every_step`: every step's record listed its live tensors.
  void EndIteration(const std::vector<MemoryEvent>& events, bool every_step);
  OutOfMemoryInfo& oom() { return oom_; }

  const MemoryLog& log() const { return log_; }
  const std::vector<MemoryEvent>& events() const { return events_; }
  const OutOfMemoryInfo& oom() const { return oom_; }
  size_t persistent() const { return log_.persistent; }
  size_t run_peak() const { return run_peak_; }
  int64_t recomputations() const { return recomputations_; }

 private:
  MemoryLog current_;
  MemoryLog log_;
  std::vector<MemoryEvent> events_;
  OutOfMemoryInfo oom_;
  int capture_step_ = -1;  // step whose live tensors are listed
  size_t run_peak_ = 0;
  int64_t recomputations_ = 0;
  // At the start of the step being run.
  TransferCounters step_start_;
  int64_t step_recomputed_ = 0;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_RUNTIME_RECORDS_H_
