// The device interface: what the runtime needs from a backend.
//
// A device offers
//   * one device memory region of a fixed size, reserved up front; the memory
//     runtime (memory/) carves every tensor out of it, so the budget is exact;
//   * a host memory region for offloaded tensors (pinned on CUDA);
//   * two queues, compute and copy, with events, so host<->device copies
//     overlap computation and each queue waits only on the events it needs.
//
// Queue semantics follow CUDA streams: work enqueued on one queue runs in
// order; Record() returns an event that completes when everything enqueued
// before it has finished; Wait(event) makes later work on the queue wait for
// the event. The CPU device runs compute inline on the calling thread (its
// compute queue is always caught up) and copies on a worker thread.
#ifndef SPILL_FRAMEWORK_DEVICE_H_
#define SPILL_FRAMEWORK_DEVICE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "framework/status.h"

namespace spill {

enum class DeviceType { kCpu, kCuda };

const char* DeviceTypeName(DeviceType type);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };

class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the event has completed.
  virtual void Synchronize() = 0;
  virtual bool IsComplete() = 0;
};

class Queue {
 public:
  virtual ~Queue() = default;
  // An event that completes once all work enqueued so far has finished.
  virtual std::shared_ptr<Event> Record() = 0;
  // Work enqueued after this call starts only once `event` has completed.
  virtual void Wait(const std::shared_ptr<Event>& event) = 0;
  // Blocks the calling thread until all enqueued work has finished.
  virtual void Synchronize() = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceType type() const = 0;
  virtual std::string Describe() const = 0;

  // The device memory region the memory runtime manages. One region at a time.
  virtual StatusOr<void*> ReserveDeviceRegion(size_t bytes) = 0;
  virtual void ReleaseDeviceRegion(void* base) = 0;
  // Host memory for offloaded tensors (page-locked on CUDA).
  virtual StatusOr<void*> ReserveHostRegion(size_t bytes) = 0;
  virtual void ReleaseHostRegion(void* base) = 0;

  virtual Queue& compute_queue() = 0;
  virtual Queue& copy_queue() = 0;

  // Enqueues a copy on `queue`. Both buffers must stay valid until an event
  // recorded after the copy has completed. Device-to-device copies may
  // overlap when the destination lies below the source (compaction).
  virtual void CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) = 0;
  // Sets `bytes` bytes of device memory to `value` on `queue`.
  virtual void MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) = 0;
  // Copies on the compute queue and waits for completion.
  void CopySync(void* dst, const void* src, size_t bytes, CopyKind kind);

  // Bytes copied so far in each direction (for statistics and tests).
  virtual size_t bytes_copied(CopyKind kind) const = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_H_
