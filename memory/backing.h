// Backing: what the memory runtime does to real memory and queues, apart
// from what it decides.
//
// Every decision of the runtime and the residency state machine - which
// tensor goes where, when a copy starts, when its block is freed - is made
// from the schedule and the pools alone. What a decision does to a device
// goes through this one interface, chosen once when the runtime is created:
//   * DeviceBacking: a Device's memory regions, its compute queue and its
//     two copy queues (offloads and slices out to host, prefetches and
//     slices in to device). Copies are enqueued and return the event of their completion;
//     blocks are annotated for memory checkers, poisoned when freed;
//   * PlanningBacking: accounting only (`plan`). No region is reserved, no
//     byte moves, no event is ever made, every address is null; waiting,
//     annotating and synchronizing are no-ops.
// So the decision code calls the backing unconditionally, and a plan runs
// exactly the code a run does.
//
// Offsets are from the start of the device region (the allocator's) or of
// the host region (the host pool's).
#ifndef SPILL_MEMORY_BACKING_H_
#define SPILL_MEMORY_BACKING_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/device/device.h"
#include "framework/schedule/tensor_store.h"
#include "memory/allocators/allocator.h"

namespace spill {

class Backing {
 public:
  virtual ~Backing() = default;

  // Whether kernels run and tensors hold data (false: planning).
  virtual bool computes() const = 0;
  // Reserves the device region through `allocator` (which outlives the
  // backing) and a host region of `host_bytes` on `host_tier` (ram or
  // file:DIR; none when 0). Released when the backing goes.
  virtual Status Reserve(DeviceAllocator& allocator, size_t host_bytes,
                         const std::string& host_tier) = 0;

  // The address of an offset in either region; null when planning.
  virtual char* device_address(size_t offset) const = 0;
  virtual char* host_address(size_t offset) const = 0;

  // A block of the device region handed out or given back (for memory
  // checkers), and a freed block filled with NaN (debugging aid).
  virtual void AnnotateAllocation(size_t offset, size_t bytes) = 0;
  virtual void AnnotateFree(size_t offset) = 0;
  virtual void Poison(size_t offset, size_t bytes) = 0;
  // The first `bytes` of the host region page-locked (or claimed on disk);
  // kOutOfMemory when the system refuses.
  virtual Status PinHost(size_t bytes) = 0;

  // A whole tensor copied out to host memory on the device-to-host queue,
  // or in to device memory on the host-to-device queue, after the compute
  // queued so far. A copy in also waits for `after` (may be null): the last
  // work of the other copy queue on its host bytes, such as a solver step
  // run there. Returns the event of the copy's completion (null when
  // planning).
  virtual std::shared_ptr<Event> CopyOut(size_t host_offset, size_t device_offset,
                                         size_t bytes) = 0;
  virtual std::shared_ptr<Event> CopyIn(size_t device_offset, size_t host_offset, size_t bytes,
                                        const std::shared_ptr<Event>& after) = 0;
  // A streamed step's slice into a staging block, after the compute queued
  // so far (the last compute that used the block) and `after` (the copy out
  // still reading the block, may be null); compute that reads it waits for
  // the returned event (ComputeWaits). Out: after the compute that wrote it.
  // Both return the copy's event (null when planning).
  virtual std::shared_ptr<Event> CopySliceIn(void* staging, size_t host_offset, size_t bytes,
                                             const std::shared_ptr<Event>& after) = 0;
  virtual std::shared_ptr<Event> CopySliceOut(size_t host_offset, const void* staging,
                                              size_t bytes) = 0;
  // Compaction's move of a block down to `target` (the spans may overlap).
  virtual void MoveDown(size_t target, size_t offset, size_t bytes) = 0;
  // Later compute waits for `event` (a copy in flight; may be null).
  virtual void ComputeWaits(const std::shared_ptr<Event>& event) = 0;
  // Blocks until every copy and host task queued on either copy queue is
  // done.
  virtual void SynchronizeCopies() = 0;

  // Tensor data for ReadTensor and WriteTensor: an error when planning.
  virtual Status HoldsData() const = 0;
  virtual void CopySync(void* dst, const void* src, size_t bytes, CopyKind kind) = 0;

  // The solver step. A run needs it handed over before a step that updates
  // parameters living in host memory (an error naming `param` otherwise); a
  // plan does not compute. Update runs it on the compute queue's memory
  // (when given); UpdateInHostMemory enqueues it on the device-to-host
  // queue behind the gradient's copy and returns the event of its end
  // (null when planning), which a later copy in of what it wrote waits for.
  virtual Status RequireUpdate(const SlotUpdate& update, const std::string& param) const = 0;
  virtual void Update(const SlotUpdate& update, const ParameterSlot& slot, float* w, float* g,
                      const std::vector<float*>& state) = 0;
  virtual std::shared_ptr<Event> UpdateInHostMemory(const SlotUpdate& update,
                                                    const ParameterSlot& slot, float* w, float* g,
                                                    const std::vector<float*>& state) = 0;
};

// `device` outlives the backing.
std::unique_ptr<Backing> MakeDeviceBacking(Device& device);
std::unique_ptr<Backing> MakePlanningBacking();

}  // namespace spill

#endif  // SPILL_MEMORY_BACKING_H_
