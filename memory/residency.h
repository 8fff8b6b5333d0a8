// The residency state machine: the one place where tensors change where they
// live. Policies (liveness, offload, the LRU cache, recomputation) request
// transitions; only this class allocates, frees and copies.
//
//                 Allocate                BeginOffload            FinishOffload
//   kUnallocated ----------> kDevice ---------------> kOffloading -------------> kHost
//        ^  ^                 |  ^  \  ^  CancelOffload  |                         |
//        |  |  Allocate       |  |   \ +-----------------+          BeginPrefetch |
//        |  +--- kDropped <---+--|----+ Drop                                       v
//        |                       +---------------------------------------- kPrefetching
//        |                                       FinishPrefetch
//        +---- Release (from any state)
//
// Invariants
//   * A tensor has a device block exactly in kDevice, kOffloading and
//     kPrefetching, and a host block in kOffloading, kHost and kPrefetching
//     (and in kDevice after a prefetch, while the host copy stays current).
//   * A copy is ordered after the compute that produced its source (its copy
//     queue waits on a compute event), and compute that reads a prefetched
//     tensor waits on the prefetch's event. Offloads and prefetches go on
//     separate queues (one per direction), so a copy in of host bytes that
//     the device-to-host queue may still write (a slice out, a solver step
//     in host memory) waits for that work's event. No barrier after every
//     layer.
//   * A device block given up by an offload is freed only after its copy has
//     completed; the host waits for that event at the moment it frees, which
//     is a fixed point of the schedule. So every allocation decision depends
//     on the step sequence alone, never on timing, and a plan made without a
//     device reproduces the run's memory exactly.
//
// Device blocks come from the allocator seam (memory/allocators/), host
// blocks from a HeapPool; copies, waits and annotations go through the
// Backing (memory/backing.h). When planning the same transitions run on
// offsets and no bytes move. Every transition is recorded in the
// event log when one is attached.
#ifndef SPILL_MEMORY_RESIDENCY_H_
#define SPILL_MEMORY_RESIDENCY_H_

#include <memory>
#include <string>
#include <vector>

#include "framework/device/device.h"
#include "framework/schedule/schedule.h"
#include "memory/allocators/allocator.h"
#include "memory/backing.h"
#include "memory/heap_pool.h"
#include "memory/memory_events.h"

namespace spill {

enum class Residency { kUnallocated, kDevice, kOffloading, kHost, kPrefetching, kDropped };
const char* ResidencyName(Residency state);

MemoryCategory CategoryOf(TensorKind kind);

struct TransferCounters {
  size_t to_host_bytes = 0;
  size_t to_device_bytes = 0;
  size_t compacted_bytes = 0;  // moved within the device to close holes
  // Of to_device_bytes: read in by the step that reads them, its compute
  // waiting for the copy (a parameter a plan brings late, a prefetch that
  // found no room), not prefetched ahead.
  size_t on_demand_bytes = 0;
  int64_t offloads = 0;
  int64_t prefetches = 0;
  int64_t drops = 0;
};

class ResidencyManager {
 public:
  // `backing` moves the bytes, or only accounts for them when planning;
  // `log` may be null.
  ResidencyManager(const Schedule& schedule, DeviceAllocator* allocator, HeapPool* host_pool,
                   Backing* backing, MemoryEventLog* log);

  // The step whose requests follow (for the allocator's records).
  void set_step(int step) { step_ = step; }
  // kUnallocated | kDropped -> kDevice. kOutOfMemory leaves the state as is.
  // `hint`: the allocator's placement hint.
  Status Allocate(TensorId id, int hint = 0);
  // kUnallocated -> kHost: a tensor that lives in host memory between uses
  // (parameters, their state); the caller fills the host copy.
  Status AllocateOnHost(TensorId id);
  // kHost -> kDevice without a copy, for a step that overwrites the tensor
  // (a parameter gradient): the host block stays, no longer current.
  Status AllocateForWrite(TensorId id, int hint = 0);
  // Any state -> kUnallocated; waits for a copy in flight first.
  void Release(TensorId id);
  // kDevice -> kOffloading. Skips the copy when the host copy is current.
  // kOutOfMemory when the host pool is full or the device cannot page-lock
  // the host memory (the host block is page-locked as it is taken).
  Status BeginOffload(TensorId id);
  // kOffloading -> kHost: waits for the copy, frees the device block.
  void FinishOffload(TensorId id);
  // kOffloading -> kDevice: the device copy stays (and the host copy, until
  // the tensor is written); later compute waits for the copy in flight.
  void CancelOffload(TensorId id);
  // kHost -> kPrefetching. kOutOfMemory when the device pool is full.
  Status BeginPrefetch(TensorId id);
  // kPrefetching -> kDevice: later compute waits for the copy.
  void FinishPrefetch(TensorId id);
  // Counts a prefetch begun by the step that reads the tensor
  // (TransferCounters::on_demand_bytes).
  void CountOnDemand(TensorId id) { counters_.on_demand_bytes += schedule_.tensors[id].bytes; }
  // kDevice -> kDropped: frees the device block (and any host copy).
  void Drop(TensorId id);
  // kHost or kUnallocated -> kDropped, for a dropped tensor a rebuild
  // released and placed in host memory (or failed to) and then could not
  // run: it holds nothing, as before the attempt (no event, no drop
  // counted: it was dropped already).
  void Unplace(TensorId id);
  // The tensor was written on the device: a host copy no longer matches. (A
  // tensor in kHost was written in host memory, by a streamed step, and its
  // host copy stays current.)
  void MarkWritten(TensorId id);
  // Streamed steps (the tensor stays kHost; slices of it pass through a
  // staging block the caller owns). CopySliceIn copies `bytes` at `offset` of
  // its host copy into `staging` after the compute queued so far and the
  // tensor's last slice out (which may still read that staging half);
  // compute that reads the slice waits for the returned event (ComputeWaits).
  // CopySliceOut copies back after the compute that wrote the slice; compute
  // that writes `staging` again waits for its event.
  // CountStreamIn (before the step's compute) and CountStreamOut (after it)
  // count a streamed step's copies of one tensor and record them, in plans
  // and runs alike (the copies themselves happen only in runs).
  std::shared_ptr<Event> CopySliceIn(TensorId id, void* staging, size_t offset, size_t bytes);
  std::shared_ptr<Event> CopySliceOut(TensorId id, const void* staging, size_t offset,
                                      size_t bytes);
  void ComputeWaits(const std::shared_ptr<Event>& event) { backing_->ComputeWaits(event); }
  void CountStreamIn(TensorId id, size_t bytes);
  void CountStreamOut(TensorId id, size_t bytes);
  // Slides device blocks down into the holes below them, moving the bytes,
  // from the lowest up until a hole holds `bytes`: first those without a
  // copy in flight (offloading, prefetching), then, if that is not enough,
  // those too, each move waiting on the compute queue for its block's copy.
  // Every block moves where a hole holds `bytes` already. Returns the bytes
  // moved. Only where the allocator can compact.
  size_t Compact(size_t bytes);

  Residency state(TensorId id) const { return slots_[id].state; }
  bool on_device(TensorId id) const;
  bool host_copy_current(TensorId id) const { return slots_[id].host_valid; }
  float* data(TensorId id) const;
  // The tensor's host copy (null without one; current or not: see
  // host_copy_current).
  float* host_data(TensorId id) const;
  bool has_host(TensorId id) const { return slots_[id].has_host; }
  // Waits for the copy of this tensor in flight, if any.
  void WaitForCopy(TensorId id) { WaitForCopy(slots_[id]); }
  // The host copy now holds the tensor's value (host arithmetic wrote it).
  void MarkHostCurrent(TensorId id) { slots_[id].host_valid = true; }
  // Host work on the device-to-host queue writes the tensor's host copy
  // until `event`: a copy in of it waits for the event, a free or a write
  // waits for it on the host. Call with no copy of the tensor in flight.
  void HostWrites(TensorId id, std::shared_ptr<Event> event) {
    slots_[id].event = std::move(event);
  }
  size_t device_bytes(TensorId id) const { return slots_[id].device.bytes; }
  const TransferCounters& counters() const { return counters_; }
  // Transient tensors (activations, aux, activation gradients) on the device.
  int resident_transient() const { return resident_transient_; }
  // A failed device allocation, annotated when offloads were refused
  // because host memory could not be page-locked (the report says so).
  StatusOr<Allocation> NoteRefusedOffloads(StatusOr<Allocation> block) const;

 private:
  struct Slot {
    Residency state = Residency::kUnallocated;
    Allocation device;
    Allocation host;
    bool has_device = false;
    bool has_host = false;
    bool host_valid = false;
    bool transient = false;
    // The copy in flight, or the last work of the device-to-host queue on
    // its host copy (a slice out, a solver step there), if any.
    std::shared_ptr<Event> event;
  };

  Status AllocateDevice(TensorId id, int hint);
  Status AllocateHost(TensorId id);
  void FreeDevice(Slot& slot);
  void SetOwner(AllocationId allocation, TensorId id);
  void Record(MemoryEventType type, TensorId id, size_t bytes);
  void FreeHost(Slot& slot);
  void WaitForCopy(Slot& slot);
  void Poison(const Slot& slot);

  const Schedule& schedule_;
  DeviceAllocator* allocator_;
  HeapPool* host_pool_;
  Backing* backing_;
  std::vector<Slot> slots_;
  std::vector<TensorId> owner_;  // device allocation id -> tensor, for compaction
  TransferCounters counters_;
  int resident_transient_ = 0;
  bool poison_ = false;
  int step_ = -1;
  MemoryEventLog* log_;
  std::string pin_failure_;
  std::string host_tier_ = "host memory";  // named in reports: RAM or a directory

 public:
  // How out-of-memory reports name the host tier.
  void set_host_tier_name(std::string name) { host_tier_ = std::move(name); }

 private:  // why host memory could not be page-locked, once it could not
 public:
  // Fill device blocks with NaN as they are freed (debugging aid).
  void set_poison(bool poison) { poison_ = poison; }
};

}  // namespace spill

#endif  // SPILL_MEMORY_RESIDENCY_H_
