// Virtual memory on a GPU: CUDA's virtual memory management, as the window
// paper's allocator uses it.
//
//   physical memory  one cuMemCreate allocation per chunk, made the first
//                    time the chunk is mapped and kept until the end;
//   address space    one cuMemAddressReserve of the requested size;
//   map              cuMemMap of a chunk's allocation at a slot, then
//                    cuMemSetAccess (read and write from this GPU);
//   unmap            cuMemUnmap, chunk by chunk (each chunk is its own
//                    mapping). The caller has synchronised the queues.
// The driver calls are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so the build links no libcuda. The
// chunk must be a multiple of the GPU's mapping granularity (usually 2 MiB).
//
// Compiled with --config=cuda; it has not yet run on a GPU.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <set>
#include <string>
#include <vector>

#include "framework/cuda/cuda_device.h"

namespace spill {
namespace {

// The driver ABI the calls are asked for (the cuMem* calls exist since
// CUDA 10.2 and kept their signatures).
constexpr unsigned kDriverAbi = 12000;

struct DriverCalls {
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
};

Status Find(const char* symbol, void** fn) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(symbol, fn, kDriverAbi, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || *fn == nullptr) {
    cudaGetLastError();
    return Unimplemented(std::string("the CUDA driver has no ") + symbol +
                         " (virtual memory management needs a driver for CUDA 10.2 or later)");
  }
  return Status::Ok();
}

StatusOr<DriverCalls> LoadDriverCalls() {
  DriverCalls d;
  struct Entry {
    const char* symbol;
    void** fn;
  };
  const Entry entries[] = {
      {"cuMemCreate", reinterpret_cast<void**>(&d.create)},
      {"cuMemRelease", reinterpret_cast<void**>(&d.release)},
      {"cuMemAddressReserve", reinterpret_cast<void**>(&d.reserve)},
      {"cuMemAddressFree", reinterpret_cast<void**>(&d.address_free)},
      {"cuMemMap", reinterpret_cast<void**>(&d.map)},
      {"cuMemUnmap", reinterpret_cast<void**>(&d.unmap)},
      {"cuMemSetAccess", reinterpret_cast<void**>(&d.set_access)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void**>(&d.granularity)},
      {"cuGetErrorString", reinterpret_cast<void**>(&d.error_string)},
  };
  for (const Entry& e : entries) SPILL_RETURN_IF_ERROR(Find(e.symbol, e.fn));
  return d;
}

class CudaVirtualMemory : public VirtualMemory {
 public:
  static StatusOr<std::unique_ptr<VirtualMemory>> Create(int ordinal, size_t chunk_bytes,
                                                         size_t chunks, size_t address_bytes);
  ~CudaVirtualMemory() override;

  char* base() const override { return reinterpret_cast<char*>(base_); }
  size_t chunk_bytes() const override { return chunk_bytes_; }
  size_t chunks() const override { return handles_.size(); }
  size_t address_bytes() const override { return address_bytes_; }
  Status Map(size_t offset, size_t chunk) override;
  Status Unmap(size_t offset, size_t bytes) override;

 private:
  CudaVirtualMemory(const DriverCalls& calls, int ordinal, size_t chunk_bytes, size_t chunks,
                    size_t address_bytes)
      : d_(calls),
        ordinal_(ordinal),
        chunk_bytes_(chunk_bytes),
        address_bytes_(address_bytes),
        handles_(chunks, 0) {}
  Status Check(CUresult result, const char* call) const;
  CUmemAllocationProp Properties() const;

  DriverCalls d_;
  int ordinal_;
  size_t chunk_bytes_;
  size_t address_bytes_;
  CUdeviceptr base_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;  // 0: not created yet
  std::set<size_t> mapped_;                            // offsets of mapped chunks
};

Status CudaVirtualMemory::Check(CUresult result, const char* call) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  const char* text = nullptr;
  d_.error_string(result, &text);
  const std::string message =
      std::string(call) + " failed: " + (text != nullptr ? text : "unknown error");
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return OutOfMemory(message);
  return Internal(message);
}

CUmemAllocationProp CudaVirtualMemory::Properties() const {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal_;
  return prop;
}

StatusOr<std::unique_ptr<VirtualMemory>> CudaVirtualMemory::Create(int ordinal, size_t chunk_bytes,
                                                                   size_t chunks,
                                                                   size_t address_bytes) {
  SPILL_ASSIGN_OR_RETURN(DriverCalls calls, LoadDriverCalls());
  std::unique_ptr<CudaVirtualMemory> vm(
      new CudaVirtualMemory(calls, ordinal, chunk_bytes, chunks, address_bytes));
  const CUmemAllocationProp prop = vm->Properties();
  size_t granularity = 0;
  SPILL_RETURN_IF_ERROR(
      vm->Check(calls.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                "cuMemGetAllocationGranularity"));
  if (granularity == 0 || chunk_bytes % granularity != 0) {
    return InvalidArgument("memory.va_chunk: " + std::to_string(chunk_bytes) +
                           " bytes is not a multiple of this GPU's mapping granularity (" +
                           std::to_string(granularity) + " bytes)");
  }
  SPILL_RETURN_IF_ERROR(vm->Check(calls.reserve(&vm->base_, address_bytes, chunk_bytes, 0, 0),
                                  "cuMemAddressReserve"));
  return std::unique_ptr<VirtualMemory>(std::move(vm));
}

CudaVirtualMemory::~CudaVirtualMemory() {
  for (size_t offset : mapped_) d_.unmap(base_ + offset, chunk_bytes_);
  for (CUmemGenericAllocationHandle h : handles_) {
    if (h != 0) d_.release(h);
  }
  if (base_ != 0) d_.address_free(base_, address_bytes_);
}

Status CudaVirtualMemory::Map(size_t offset, size_t chunk) {
  if (chunk >= handles_.size() || offset % chunk_bytes_ != 0 ||
      offset + chunk_bytes_ > address_bytes_ || mapped_.count(offset)) {
    return Internal("virtual memory: chunk " + std::to_string(chunk) + " cannot be mapped at " +
                    std::to_string(offset));
  }
  if (handles_[chunk] == 0) {
    const CUmemAllocationProp prop = Properties();
    SPILL_RETURN_IF_ERROR(
        Check(d_.create(&handles_[chunk], chunk_bytes_, &prop, 0), "cuMemCreate"));
  }
  SPILL_RETURN_IF_ERROR(
      Check(d_.map(base_ + offset, chunk_bytes_, 0, handles_[chunk], 0), "cuMemMap"));
  mapped_.insert(offset);
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return Check(d_.set_access(base_ + offset, chunk_bytes_, &access, 1), "cuMemSetAccess");
}

Status CudaVirtualMemory::Unmap(size_t offset, size_t bytes) {
  for (size_t at = offset; at < offset + bytes; at += chunk_bytes_) {
    if (mapped_.erase(at) == 0) continue;
    SPILL_RETURN_IF_ERROR(Check(d_.unmap(base_ + at, chunk_bytes_), "cuMemUnmap"));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<VirtualMemory>> CudaDevice::CreateVirtualMemory(size_t chunk_bytes,
                                                                         size_t chunks,
                                                                         size_t address_bytes) {
  return CudaVirtualMemory::Create(ordinal_, chunk_bytes, chunks, address_bytes);
}

}  // namespace spill
