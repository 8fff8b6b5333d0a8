// Virtual memory over a driver that creates physical allocations and maps
// them into reserved addresses: how a GPU offers VirtualMemory
// (framework/device/device.h). The driver is the seam - CUDA's cuMem* calls on a
// GPU (framework/cuda/cuda_virtual_memory.cc), a fake in tests - and every
// decision is made here, on plain numbers, where a CPU test can watch it:
//
//   chunk size     a whole multiple of the driver's mapping granularity,
//                  else a clear error naming memory.va_chunk and the sizes
//                  that would do;
//   reservation    address_bytes, aligned to the granularity (a power of
//                  two, as cuMemAddressReserve requires; a chunk of 6 MiB is
//                  a valid chunk but no valid alignment);
//   physical       one allocation per chunk, created the first time the
//                  chunk is mapped and kept until the end, so only what the
//                  allocator uses is ever taken from the device. The device
//                  refusing one is kOutOfMemory, saying how many chunks it
//                  gave and what it has free: the caller reports it at the
//                  step that asked;
//   map, unmap     one chunk per mapping; a failed map leaves nothing mapped
//                  at that slot.
#ifndef SPILL_FRAMEWORK_DEVICE_VIRTUAL_MEMORY_DRIVER_H_
#define SPILL_FRAMEWORK_DEVICE_VIRTUAL_MEMORY_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "framework/base/status.h"
#include "framework/device/device.h"

namespace spill {

// The calls virtual memory management makes, in plain types. Failures are
// Statuses whose messages name the call; Create returns kOutOfMemory when
// the device has no memory left.
class MemoryMappingDriver {
 public:
  virtual ~MemoryMappingDriver() = default;
  // Where the memory is, for messages ("GPU 0").
  virtual std::string Describe() const = 0;
  // Chunks, offsets and reservations are multiples of this many bytes.
  virtual StatusOr<size_t> Granularity() = 0;
  virtual StatusOr<uintptr_t> ReserveAddresses(size_t bytes, size_t alignment) = 0;
  virtual void FreeAddresses(uintptr_t base, size_t bytes) = 0;
  // A physical allocation of `bytes`, as a handle.
  virtual StatusOr<uint64_t> Create(size_t bytes) = 0;
  virtual void Release(uint64_t handle) = 0;
  // Maps `handle` at `address`, readable and writable by the device.
  virtual Status Map(uintptr_t address, size_t bytes, uint64_t handle) = 0;
  virtual Status Unmap(uintptr_t address, size_t bytes) = 0;
  // Free and total device memory, for out-of-memory reports ("" if unknown).
  virtual std::string FreeMemory() = 0;
};

// The alignment to reserve addresses with: the granularity when it is a
// power of two, else 0 (the driver's default).
size_t ReservationAlignment(size_t granularity);

// Ok when `chunk_bytes` is a whole, non-zero multiple of `granularity`; else
// an InvalidArgument naming memory.va_chunk and the nearest chunk sizes that
// would do.
Status CheckChunkBytes(size_t chunk_bytes, size_t granularity, const std::string& device);

// VirtualMemory of `chunks` chunks of `chunk_bytes` in `address_bytes` of
// addresses, over `driver`.
StatusOr<std::unique_ptr<VirtualMemory>> CreateDriverVirtualMemory(
    std::unique_ptr<MemoryMappingDriver> driver, size_t chunk_bytes, size_t chunks,
    size_t address_bytes);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_VIRTUAL_MEMORY_DRIVER_H_
