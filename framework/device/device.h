// The device interface: what the runtime needs from a backend.
//
// A device offers
//   * one device memory region of a fixed size, reserved up front; the memory
//     runtime (memory/) carves every tensor out of it, so the budget is exact;
//   * a host memory region for offloaded tensors: its address space is
//     reserved up front, and it is page-locked (pinned, on CUDA) only as far as
//     the memory runtime uses it, in chunks of kHostPinChunkBytes;
//   * three queues with events: compute, and one copy queue per direction
//     (host to device, device to host), as a GPU has a copy engine each way,
//     so prefetches, offloads and computation all overlap and each queue
//     waits only on the events it needs;
//   * optionally, virtual memory: physical memory in chunks that can be
//     mapped anywhere in a reserved range of addresses, for allocators that
//     place every request in a fresh virtual range (memory.allocator: va).
//
// Queue semantics follow CUDA streams: work enqueued on one queue runs in
// order; Record() returns an event that completes when everything enqueued
// before it has finished; Wait(event) makes later work on the queue wait for
// the event. The CPU device runs compute inline on the calling thread (its
// compute queue is always caught up) and each copy queue on a worker thread
// of its own.
#ifndef SPILL_FRAMEWORK_DEVICE_DEVICE_H_
#define SPILL_FRAMEWORK_DEVICE_DEVICE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "framework/base/status.h"
#include "framework/device/tensor.h"

namespace spill {

enum class DeviceType { kCpu, kCuda };

const char* DeviceTypeName(DeviceType type);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost };

// Host memory is page-locked in chunks of this size as the host pool's high
// water mark grows: locking a whole 32 GiB budget up front takes seconds and
// can fail, while offloading rarely uses more than a fraction of it. Large
// enough that a training run locks a handful of chunks, small enough that a
// test locks little.
constexpr size_t kHostPinChunkBytes = size_t{256} << 20;  // 256 MiB

// How far a host region of `region_bytes` is pinned to cover its first
// `needed` bytes: whole chunks, never past the region.
inline size_t PinnedExtentFor(size_t needed, size_t region_bytes) {
  const size_t chunks = (needed + kHostPinChunkBytes - 1) / kHostPinChunkBytes;
  return std::min(region_bytes, chunks * kHostPinChunkBytes);
}

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

// Physical memory in `chunks()` chunks of `chunk_bytes()`, mappable
// anywhere in `address_bytes()` of reserved addresses starting at base():
// CUDA's virtual memory management (cuMemCreate, cuMemMap) on a GPU, a
// memfd mapped with mmap on the CPU. Offsets are from base(), in whole
// chunks. Nothing is mapped at first; touching an unmapped address faults.
class VirtualMemory {
 public:
  virtual ~VirtualMemory() = default;
  virtual char* base() const = 0;
  virtual size_t chunk_bytes() const = 0;
  virtual size_t chunks() const = 0;
  virtual size_t address_bytes() const = 0;
  // Maps physical chunk `chunk` at base() + offset, readable and writable.
  // Its bytes are those it held when last mapped anywhere.
  virtual Status Map(size_t offset, size_t chunk) = 0;
  // Unmaps [base() + offset, + bytes). The caller makes sure no queued work
  // still touches it.
  virtual Status Unmap(size_t offset, size_t bytes) = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceType type() const = 0;
  virtual std::string Describe() const = 0;

  // The device memory region the memory runtime manages. One region at a time.
  virtual StatusOr<void*> ReserveDeviceRegion(size_t bytes) = 0;
  virtual void ReleaseDeviceRegion(void* base) = 0;
  // Host memory for offloaded tensors: address space only, until pinned.
  virtual StatusOr<void*> ReserveHostRegion(size_t bytes) = 0;
  virtual void ReleaseHostRegion(void* base) = 0;
  // Makes sure the first `bytes` of the host region at `base` are
  // page-locked (so copies to and from them are DMA), growing the locked
  // part to PinnedExtentFor(bytes, region size). Locked memory stays locked
  // until the region is released. kOutOfMemory, saying how far locking got,
  // when the system refuses to lock more. The default is for devices whose
  // host memory needs no locking.
  virtual Status EnsureHostPinned(void* base, size_t bytes) { return Status::Ok(); }

  // Virtual memory of `chunks` physical chunks of `chunk_bytes` and
  // `address_bytes` of addresses, instead of a device region.
  // kUnimplemented where the device has none; kOutOfMemory when the memory
  // or the addresses cannot be had.
  virtual StatusOr<std::unique_ptr<VirtualMemory>> CreateVirtualMemory(size_t chunk_bytes,
                                                                       size_t chunks,
                                                                       size_t address_bytes) {
    return Unimplemented(std::string(DeviceTypeName(type())) +
                         " devices have no virtual memory mapping");
  }

  // Annotations of the device region's suballocations for memory checkers
  // (compute-sanitizer sees an overrun from one tensor into the next only if
  // it knows where each tensor ends). Called for every block carved out of
  // the device region and for every block given back; `bytes` is what the
  // block's user may touch. No-ops unless a device implements them.
  virtual void AnnotateAllocation(void* p, size_t bytes) {}
  virtual void AnnotateFree(void* p) {}

  virtual Queue& compute_queue() = 0;
  // Prefetches and slices in; offloads, slices out and host tasks that
  // follow them (a solver step on an offloaded gradient). Work on one copy
  // queue is ordered only against the other's through events.
  virtual Queue& host_to_device_queue() = 0;
  virtual Queue& device_to_host_queue() = 0;
  // Blocks until both copy queues have finished their work.
  void SynchronizeCopies() {
    host_to_device_queue().Synchronize();
    device_to_host_queue().Synchronize();
  }

  // Enqueues a copy on `queue`. Both buffers must stay valid until an event
  // recorded after the copy has completed. Device-to-device copies may
  // overlap when the destination lies below the source (compaction).
  virtual void CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) = 0;
  // Sets `bytes` bytes of device memory to `value` on `queue`.
  virtual void MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) = 0;
  // Converts `count` elements at `src` (type `from`) into `dst` (type `to`),
  // both in device memory, in `queue`'s order (framework/device/convert.h
  // says how values round). One of `from`, `to` is kF32, or both are equal
  // (a copy); the buffers do not overlap.
  virtual void ConvertAsync(void* dst, DType to, const void* src, DType from, int64_t count,
                            Queue& queue) = 0;
  // Copies on the compute queue and waits for completion.
  void CopySync(void* dst, const void* src, size_t bytes, CopyKind kind);
  // Runs `task` on the host once everything enqueued on `queue` before it has
  // finished, and before anything enqueued after it starts (host arithmetic
  // on memory a copy has just filled, such as a solver step in host memory).
  // The task must not call the device.
  virtual void EnqueueHostTask(Queue& queue, std::function<void()> task) = 0;

  // A host region backed by a file in `directory` instead of anonymous
  // memory, so it can exceed RAM (the page cache holds what fits). The file
  // is unlinked at once: nothing is left behind, even after a crash. Disk
  // space is claimed as the region is used (EnsureHostPinned), so a full disk
  // is a kOutOfMemory naming the directory, never a fault. Released with
  // ReleaseHostRegion.
  virtual StatusOr<void*> ReserveFileHostRegion(size_t bytes, const std::string& directory) {
    return Unimplemented(std::string(DeviceTypeName(type())) +
                         " devices have no file-backed host memory");
  }

  // Bytes copied so far in each direction (for statistics and tests).
  virtual size_t bytes_copied(CopyKind kind) const = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_DEVICE_H_
