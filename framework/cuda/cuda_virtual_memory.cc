// Virtual memory on a GPU: CUDA's virtual memory management, as the window
// paper's allocator uses it, as a MemoryMappingDriver
// (framework/device/virtual_memory_driver.h decides chunk sizes, alignment, when
// physical memory is made and how its absence is reported):
//
//   granularity      cuMemGetAllocationGranularity (minimum, usually 2 MiB);
//   reserve          cuMemAddressReserve, aligned to the granularity;
//   create           cuMemCreate of pinned device memory on this GPU;
//   map              cuMemMap, then cuMemSetAccess (read and write from
//                    this GPU); unmapped again if access cannot be set;
//   unmap            cuMemUnmap. The caller has synchronised the queues.
// The driver calls are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so the build links no libcuda.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "framework/base/units.h"
#include "framework/cuda/cuda_device.h"
#include "framework/device/virtual_memory_driver.h"

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

class CudaMappingDriver : public MemoryMappingDriver {
 public:
  CudaMappingDriver(const DriverCalls& calls, int ordinal) : d_(calls), ordinal_(ordinal) {}

  std::string Describe() const override { return "GPU " + std::to_string(ordinal_); }

  StatusOr<size_t> Granularity() override {
    const CUmemAllocationProp prop = Properties();
    size_t granularity = 0;
    SPILL_RETURN_IF_ERROR(
        Check(d_.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              "cuMemGetAllocationGranularity"));
    return granularity;
  }

  StatusOr<uintptr_t> ReserveAddresses(size_t bytes, size_t alignment) override {
    CUdeviceptr base = 0;
    SPILL_RETURN_IF_ERROR(Check(d_.reserve(&base, bytes, alignment, 0, 0), "cuMemAddressReserve"));
    return static_cast<uintptr_t>(base);
  }

  void FreeAddresses(uintptr_t base, size_t bytes) override {
    d_.address_free(static_cast<CUdeviceptr>(base), bytes);
  }

  StatusOr<uint64_t> Create(size_t bytes) override {
    const CUmemAllocationProp prop = Properties();
    CUmemGenericAllocationHandle handle = 0;
    SPILL_RETURN_IF_ERROR(Check(d_.create(&handle, bytes, &prop, 0), "cuMemCreate"));
    return static_cast<uint64_t>(handle);
  }

  void Release(uint64_t handle) override {
    d_.release(static_cast<CUmemGenericAllocationHandle>(handle));
  }

  Status Map(uintptr_t address, size_t bytes, uint64_t handle) override {
    const CUdeviceptr at = static_cast<CUdeviceptr>(address);
    SPILL_RETURN_IF_ERROR(Check(
        d_.map(at, bytes, 0, static_cast<CUmemGenericAllocationHandle>(handle), 0), "cuMemMap"));
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    Status set = Check(d_.set_access(at, bytes, &access, 1), "cuMemSetAccess");
    if (!set.ok()) d_.unmap(at, bytes);
    return set;
  }

  Status Unmap(uintptr_t address, size_t bytes) override {
    return Check(d_.unmap(static_cast<CUdeviceptr>(address), bytes), "cuMemUnmap");
  }

  std::string FreeMemory() override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return "";
    }
    return FormatBytes(static_cast<double>(free)) + " of its " +
           FormatBytes(static_cast<double>(total)) + " free";
  }

 private:
  Status Check(CUresult result, const char* call) const {
    if (result == CUDA_SUCCESS) return Status::Ok();
    const char* text = nullptr;
    d_.error_string(result, &text);
    const std::string message =
        std::string(call) + ": " + (text != nullptr ? text : "unknown error");
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return OutOfMemory(message);
    return Internal(message);
  }

  CUmemAllocationProp Properties() const {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal_;
    return prop;
  }

  DriverCalls d_;
  int ordinal_;
};

}  // namespace

StatusOr<std::unique_ptr<VirtualMemory>> CudaDevice::CreateVirtualMemory(size_t chunk_bytes,
                                                                         size_t chunks,
                                                                         size_t address_bytes) {
  SPILL_ASSIGN_OR_RETURN(DriverCalls calls, LoadDriverCalls());
  return CreateDriverVirtualMemory(std::make_unique<CudaMappingDriver>(calls, ordinal_),
                                   chunk_bytes, chunks, address_bytes);
}

}  // namespace spill
