// Annotations that let compute-sanitizer's memcheck see inside the device
// region.
//
// The memory runtime carves every tensor out of one cudaMalloc region, so to
// memcheck the whole region is one valid allocation and a kernel that runs
// past the end of one tensor into the next goes unreported. With the NVTX
// memory API the region is registered as a sub-allocating heap and each
// block as a region inside it; memcheck then reports any access to bytes of
// the heap that no live block covers (the rounding slack after a tensor, a
// freed block, a hole).
//
// Off unless SPILL_CUDA_MEMCHECK=1 (tools/ci/gpu_check.sh sets it for its
// sanitizer runs): outside a tool the NVTX calls cost little, but nothing is
// gained. NVTX is header-only; the calls reach compute-sanitizer through the
// injection library it names in the environment.
#ifndef SPILL_FRAMEWORK_CUDA_MEMCHECK_ANNOTATIONS_H_
#define SPILL_FRAMEWORK_CUDA_MEMCHECK_ANNOTATIONS_H_

#include <cstddef>

namespace spill {
namespace cuda {

// True when SPILL_CUDA_MEMCHECK=1 (read once).
bool MemcheckAnnotationsEnabled();

// The device region [base, base + bytes) as a heap; returns its handle (null
// when annotations are off). The CUDA runtime must be initialized.
void* RegisterPoolHeap(void* base, size_t bytes);
void UnregisterPoolHeap(void* heap);
// One block of the heap: accesses to [p, p + bytes) are valid until freed.
void RegisterPoolBlock(void* heap, void* p, size_t bytes);
void UnregisterPoolBlock(void* p);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_MEMCHECK_ANNOTATIONS_H_
