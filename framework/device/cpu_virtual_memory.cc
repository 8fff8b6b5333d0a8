// Virtual memory on the CPU device: real mappings, as a GPU's driver makes
// them.
//
//   physical memory  an anonymous memory file (memfd_create) of chunks x
//                    chunk bytes; its pages exist once touched and keep
//                    their bytes while unmapped;
//   address space    one PROT_NONE, MAP_NORESERVE reservation, which costs
//                    no memory;
//   map              mmap(MAP_SHARED | MAP_FIXED | MAP_POPULATE) of one chunk
//                    of the file over a slot of the reservation: any chunk,
//                    any slot, so chunks in any order form one contiguous
//                    range. Populating makes the page tables then, as a
//                    GPU's map does, rather than at the first touches of the
//                    computation;
//   unmap            the slots mapped PROT_NONE again (anonymous, no
//                    reserve), so a stray access faults.
// Every mapping is a kernel memory area, and the kernel limits how many a
// process has (vm.max_map_count, 65530 by default): a map that fails for it
// says so.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "framework/device/cpu_device.h"

namespace spill {
namespace {

std::string Errno(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

class MemfdVirtualMemory : public VirtualMemory {
 public:
  static StatusOr<std::unique_ptr<VirtualMemory>> Create(size_t chunk_bytes, size_t chunks,
                                                         size_t address_bytes);
  ~MemfdVirtualMemory() override {
    if (base_ != nullptr) munmap(base_, address_bytes_);
    if (fd_ >= 0) close(fd_);
  }

  char* base() const override { return base_; }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  size_t chunks() const override { return chunks_; }
  size_t address_bytes() const override { return address_bytes_; }

  Status Map(size_t offset, size_t chunk) override {
    if (chunk >= chunks_ || offset % chunk_bytes_ != 0 || offset + chunk_bytes_ > address_bytes_) {
      return Internal("virtual memory: chunk " + std::to_string(chunk) + " at offset " +
                      std::to_string(offset) + " is outside the reservation");
    }
    void* at =
        mmap(base_ + offset, chunk_bytes_, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd_, static_cast<off_t>(chunk * chunk_bytes_));
    if (at == MAP_FAILED) {
      const bool areas = errno == ENOMEM;
      return OutOfMemory(Errno("mmap of a device memory chunk") +
                         (areas ? " (the process may have reached vm.max_map_count mappings; "
                                  "use a larger memory.va_chunk)"
                                : ""));
    }
    return Status::Ok();
  }

  Status Unmap(size_t offset, size_t bytes) override {
    if (offset % chunk_bytes_ != 0 || bytes % chunk_bytes_ != 0 ||
        offset + bytes > address_bytes_) {
      return Internal("virtual memory: unmapping outside the reservation");
    }
    void* at = mmap(base_ + offset, bytes, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) return OutOfMemory(Errno("mmap(PROT_NONE) of unmapped chunks"));
    return Status::Ok();
  }

 private:
  MemfdVirtualMemory(size_t chunk_bytes, size_t chunks, size_t address_bytes)
      : chunk_bytes_(chunk_bytes), chunks_(chunks), address_bytes_(address_bytes) {}

  size_t chunk_bytes_;
  size_t chunks_;
  size_t address_bytes_;
  int fd_ = -1;
  char* base_ = nullptr;
};

StatusOr<std::unique_ptr<VirtualMemory>> MemfdVirtualMemory::Create(size_t chunk_bytes,
                                                                    size_t chunks,
                                                                    size_t address_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (chunk_bytes == 0 || chunk_bytes % page != 0) {
    return InvalidArgument("virtual memory: a chunk of " + std::to_string(chunk_bytes) +
                           " bytes is not a multiple of the " + std::to_string(page) +
                           "-byte page");
  }
  if (address_bytes < chunk_bytes || address_bytes % chunk_bytes != 0) {
    return InvalidArgument("virtual memory: the address range must be whole chunks");
  }
  std::unique_ptr<MemfdVirtualMemory> vm(
      new MemfdVirtualMemory(chunk_bytes, chunks, address_bytes));
  vm->fd_ = memfd_create("spill-device-memory", MFD_CLOEXEC);
  if (vm->fd_ < 0) return OutOfMemory(Errno("memfd_create"));
  if (ftruncate(vm->fd_, static_cast<off_t>(chunks * chunk_bytes)) != 0) {
    return OutOfMemory(Errno("ftruncate of the device memory file"));
  }
  void* base =
      mmap(nullptr, address_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return OutOfMemory(Errno("mmap of the device address range"));
  vm->base_ = static_cast<char*>(base);
  return std::unique_ptr<VirtualMemory>(std::move(vm));
}

}  // namespace

StatusOr<std::unique_ptr<VirtualMemory>> CpuDevice::CreateVirtualMemory(size_t chunk_bytes,
                                                                        size_t chunks,
                                                                        size_t address_bytes) {
  return MemfdVirtualMemory::Create(chunk_bytes, chunks, address_bytes);
}

}  // namespace spill
