#include "framework/device/virtual_memory_driver.h"

#include <set>
#include <vector>

#include "framework/base/units.h"

namespace spill {
namespace {

std::string Bytes(size_t bytes) {
  return FormatBytes(static_cast<double>(bytes)) + " (" + std::to_string(bytes) + " bytes)";
}

class DriverVirtualMemory : public VirtualMemory {
 public:
  DriverVirtualMemory(std::unique_ptr<MemoryMappingDriver> driver, size_t chunk_bytes,
                      size_t chunks, size_t address_bytes)
      : driver_(std::move(driver)),
        chunk_bytes_(chunk_bytes),
        address_bytes_(address_bytes),
        handles_(chunks) {}

  ~DriverVirtualMemory() override {
    for (size_t offset : mapped_) (void)driver_->Unmap(base_ + offset, chunk_bytes_);
    for (const Handle& h : handles_) {
      if (h.created) driver_->Release(h.handle);
    }
    if (base_ != 0) driver_->FreeAddresses(base_, address_bytes_);
  }

  Status Reserve(size_t alignment) {
    SPILL_ASSIGN_OR_RETURN(base_, driver_->ReserveAddresses(address_bytes_, alignment));
    return Status::Ok();
  }

  char* base() const override { return reinterpret_cast<char*>(base_); }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  size_t chunks() const override { return handles_.size(); }
  size_t address_bytes() const override { return address_bytes_; }

  Status Map(size_t offset, size_t chunk) override {
    if (chunk >= handles_.size() || offset % chunk_bytes_ != 0 ||
        offset + chunk_bytes_ > address_bytes_ || mapped_.count(offset) != 0) {
      return Internal("virtual memory: chunk " + std::to_string(chunk) + " cannot be mapped at " +
                      std::to_string(offset));
    }
    SPILL_RETURN_IF_ERROR(EnsureCreated(chunk));
    SPILL_RETURN_IF_ERROR(driver_->Map(base_ + offset, chunk_bytes_, handles_[chunk].handle));
    mapped_.insert(offset);
    return Status::Ok();
  }

  Status Unmap(size_t offset, size_t bytes) override {
    for (size_t at = offset; at < offset + bytes; at += chunk_bytes_) {
      if (mapped_.erase(at) == 0) continue;
      SPILL_RETURN_IF_ERROR(driver_->Unmap(base_ + at, chunk_bytes_));
    }
    return Status::Ok();
  }

 private:
  struct Handle {
    bool created = false;
    uint64_t handle = 0;
  };

  // The chunk's physical memory, made on its first mapping.
  Status EnsureCreated(size_t chunk) {
    Handle& h = handles_[chunk];
    if (h.created) return Status::Ok();
    StatusOr<uint64_t> made = driver_->Create(chunk_bytes_);
    if (!made.ok()) {
      if (made.status().code() != StatusCode::kOutOfMemory) return made.status();
      const std::string free = driver_->FreeMemory();
      return OutOfMemory(driver_->Describe() + " has no physical memory for another " +
                         FormatBytes(static_cast<double>(chunk_bytes_)) + " chunk (" +
                         made.status().message() + "): it gave " + std::to_string(created_) +
                         " of the budget's " + std::to_string(handles_.size()) + " chunks" +
                         (free.empty() ? "" : "; " + free) +
                         "; another process may hold the rest - lower memory.device_budget");
    }
    h.handle = *made;
    h.created = true;
    ++created_;
    return Status::Ok();
  }

  std::unique_ptr<MemoryMappingDriver> driver_;
  size_t chunk_bytes_;
  size_t address_bytes_;
  uintptr_t base_ = 0;
  std::vector<Handle> handles_;
  size_t created_ = 0;
  std::set<size_t> mapped_;  // offsets of mapped chunks
};

}  // namespace

size_t ReservationAlignment(size_t granularity) {
  const bool power_of_two = granularity != 0 && (granularity & (granularity - 1)) == 0;
  return power_of_two ? granularity : 0;
}

Status CheckChunkBytes(size_t chunk_bytes, size_t granularity, const std::string& device) {
  if (granularity == 0) {
    return Internal(device + " reports a mapping granularity of 0 bytes");
  }
  if (chunk_bytes != 0 && chunk_bytes % granularity == 0) return Status::Ok();
  const size_t below = chunk_bytes / granularity * granularity;
  const size_t above = below + granularity;
  std::string nearest = Bytes(above);
  if (below > 0) nearest = Bytes(below) + " or " + nearest;
  return InvalidArgument("memory.va_chunk: " + Bytes(chunk_bytes) +
                         " is not a whole multiple of the mapping granularity of " + device + ", " +
                         Bytes(granularity) + "; use a multiple of it, such as " + nearest);
}

StatusOr<std::unique_ptr<VirtualMemory>> CreateDriverVirtualMemory(
    std::unique_ptr<MemoryMappingDriver> driver, size_t chunk_bytes, size_t chunks,
    size_t address_bytes) {
  SPILL_ASSIGN_OR_RETURN(const size_t granularity, driver->Granularity());
  SPILL_RETURN_IF_ERROR(CheckChunkBytes(chunk_bytes, granularity, driver->Describe()));
  if (address_bytes < chunk_bytes || address_bytes % chunk_bytes != 0) {
    return Internal("virtual memory: " + std::to_string(address_bytes) +
                    " bytes of addresses are not whole chunks of " + std::to_string(chunk_bytes));
  }
  auto vm =
      std::make_unique<DriverVirtualMemory>(std::move(driver), chunk_bytes, chunks, address_bytes);
  SPILL_RETURN_IF_ERROR(vm->Reserve(ReservationAlignment(granularity)));
  return std::unique_ptr<VirtualMemory>(std::move(vm));
}

}  // namespace spill
