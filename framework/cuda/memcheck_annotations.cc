#include "framework/cuda/memcheck_annotations.h"

#include <nvtx3/nvToolsExtMem.h>

#include <cstdlib>
#include <cstring>

namespace spill {
namespace cuda {
namespace {

nvtxDomainHandle_t Domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("spill");
  return domain;
}

}  // namespace

bool MemcheckAnnotationsEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("SPILL_CUDA_MEMCHECK");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return enabled;
}

void* RegisterPoolHeap(void* base, size_t bytes) {
  if (!MemcheckAnnotationsEnabled() || base == nullptr) return nullptr;
  nvtxMemVirtualRangeDesc_t range = {};
  range.ptr = base;
  range.size = bytes;
  nvtxMemHeapDesc_t heap = {};
  heap.extCompatID = NVTX_EXT_COMPATID_MEM;
  heap.structSize = sizeof(heap);
  heap.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  heap.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  heap.typeSpecificDescSize = sizeof(range);
  heap.typeSpecificDesc = &range;
  return nvtxMemHeapRegister(Domain(), &heap);
}

void UnregisterPoolHeap(void* heap) {
  if (heap == nullptr) return;
  nvtxMemHeapUnregister(Domain(), static_cast<nvtxMemHeapHandle_t>(heap));
}

void RegisterPoolBlock(void* heap, void* p, size_t bytes) {
  if (heap == nullptr || p == nullptr) return;
  nvtxMemVirtualRangeDesc_t range = {};
  range.ptr = p;
  range.size = bytes;
  nvtxMemRegionsRegisterBatch_t batch = {};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = static_cast<nvtxMemHeapHandle_t>(heap);
  batch.regionCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemRegionsRegister(Domain(), &batch);
}

void UnregisterPoolBlock(void* p) {
  if (!MemcheckAnnotationsEnabled() || p == nullptr) return;
  nvtxMemRegionRef_t ref;
  ref.pointer = p;
  nvtxMemRegionsUnregisterBatch_t batch = {};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  batch.refCount = 1;
  batch.refElementSize = sizeof(ref);
  batch.refElements = &ref;
  nvtxMemRegionsUnregister(Domain(), &batch);
}

}  // namespace cuda
}  // namespace spill
