// The memory event log: what the memory runtime did in one iteration, in
// order - every device allocation and free (the allocation trace), every
// transfer it began or waited for, every tensor it dropped, every step and
// recomputation it ran. The planner produces it without a device; a run
// produces the same sequence.
//
// Consumers read it as data: profile-guided allocators take the alloc/free
// events as their profile (ProfileFromEvents), fragmentation metrics read
// U_f per allocation, `plan --trace FILE` writes it as JSON lines, the
// timeline simulator replays it under a cost model, and the memory page
// (memory/report/memory_page.h) draws every block of the address space from
// it: the iteration opens with a kResident event per block already placed
// and every compaction lists its moves, so the log alone says where every
// byte is at every moment.
#ifndef SPILL_MEMORY_MEMORY_EVENTS_H_
#define SPILL_MEMORY_MEMORY_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/heap_pool.h"

namespace spill {

enum class MemoryEventType {
  kAlloc,           // a device block was placed (tensor, or workspace when tensor < 0)
  kFree,            // a device block was given back
  kBeginOffload,    // device-to-host copy enqueued after the compute that wrote the tensor
  kFinishOffload,   // the host waited for that copy, then freed the device block
  kCancelOffload,   // an offload in flight was kept on the device after all
  kBeginPrefetch,   // host-to-device copy enqueued
  kFinishPrefetch,  // compute will wait for the copy before the tensor's next use
  kDrop,            // a tensor left the device to be rebuilt by recomputation
  kCompute,         // a step's forward or backward ran
  kRecompute,       // a layer's forward reran to rebuild a dropped tensor
  kCompact,         // live blocks slid down to close holes (bytes moved)
  kUpdate,          // the solver step of one parameter (tensor: the parameter; bytes: its
                    // size; offset 1: in host memory, after its gradient's copy)
  kRemap,           // at the end of an iteration, chunks remapped so the next one starts
                    // from the same ranges (allocators that map memory: va)
  kStreamIn,        // a streamed step copies slices of a tensor in from host memory (bytes:
                    // all its slices over every sweep); before the step's compute
  kStreamOut,       // a streamed step copies slices of a tensor it writes out to host memory
                    // (bytes: the whole tensor); before the step's compute, after its
                    // kStreamIn: the copies interleave with the compute's slices
  kResident,        // a device block already placed when the iteration began (persistent
                    // tensors, tensors kept without liveness): block, bytes, offset, category
  kMove,            // compaction slid a block down (offset: its new place); the moves of
                    // one compaction precede its kCompact
  kIdle,            // a step with nothing to compute (an input layer's backward) reached
                    // the moment its computation would run, where its record is taken
  kBeginGather,     // a sharded parameter's gather from the ranks began (bytes: whole)
  kFinishGather,    // the step that reads it waited for it; its block was just placed
  kReduceScatter,   // a gradient went to its reduction (bytes: what this rank sends of it)
  kAllGather,       // after the iteration, the ranks' averages or updated parameters
                    // (zero 0 to 2) come back (bytes: what this rank receives)
};
const char* MemoryEventName(MemoryEventType type);

struct MemoryEvent {
  MemoryEventType type = MemoryEventType::kAlloc;
  int step = -1;                // the step being prepared, run or finished
  TensorId tensor = kNoTensor;  // kNoTensor: a workspace, a compute or a compaction
  int layer = -1;               // kCompute, kRecompute
  AllocationId block = -1;      // kAlloc, kFree, kResident, kMove
  size_t bytes = 0;             // block, copy or moved bytes
  size_t offset = 0;            // kAlloc, kFree, kResident, kMove
  MemoryCategory category = MemoryCategory::kActivations;
  double unusable_free = 0;  // kAlloc: the U_f this request met (Dymem's Eq. 1)
  size_t extent = 0;         // kAlloc, kFree: the memory the placements span after it
  // kAlloc, kRemap: physical chunks mapped and unmapped for it (allocators
  // that map memory). An unmap first waits for the compute queued before
  // the free that gave its chunks back, the block `fence` names (-1: none
  // this iteration), so that nothing queued still touches them; copies on
  // a freed block have ended by then, or the compute queue waits for them.
  int maps = 0, unmaps = 0;
  AllocationId fence = -1;
  // kCompute, kRecompute of a streamed step: its slice calls (over every
  // sweep) and slices per staging block (2: double-buffered); 0 otherwise.
  int slices = 0, buffers = 0;
  double time = 0;  // seconds on the log's clock when recorded (0 without one)
};

class MemoryEventLog {
 public:
  void Clear() { events_.clear(); }
  // Stamps the event with the current step (and the time, with a clock).
  void Add(MemoryEvent event) {
    event.step = step_;
    if (clock_) event.time = clock_();
    events_.push_back(event);
  }
  void set_step(int step) { step_ = step; }
  // A clock for timestamps (real runs traced on a timeline); none by default.
  void set_clock(std::function<double()> clock) { clock_ = std::move(clock); }
  const std::vector<MemoryEvent>& events() const { return events_; }

 private:
  std::vector<MemoryEvent> events_;
  int step_ = -1;
  std::function<double()> clock_;
};

// The device blocks an iteration's address space shows: those placed before
// it began (kResident) and those it allocated (kAlloc).
size_t CountBlocks(const std::vector<MemoryEvent>& events);

// Allocation-trace metrics of one iteration.
struct TraceMetrics {
  size_t max_load = 0;     // the highest live bytes at any moment (bound for any placement)
  size_t footprint = 0;    // the highest end offset of any block
  size_t allocations = 0;  // kAlloc events
  double mean_unusable_free = 0;
  double max_unusable_free = 0;
};
// `base_load` are the bytes live before the first event (persistent tensors).
TraceMetrics MeasureTrace(const std::vector<MemoryEvent>& events, size_t base_load);

}  // namespace spill

#endif  // SPILL_MEMORY_MEMORY_EVENTS_H_
