// A block of Dynamic Storage Allocation (memory/allocators/dsa_solver.h):
// its size and its closed lifetime on an integer event clock. Plain data,
// shared by the solver and its candidate index.
#ifndef SPILL_MEMORY_ALLOCATORS_DSA_BLOCK_H_
#define SPILL_MEMORY_ALLOCATORS_DSA_BLOCK_H_

#include <cstddef>
#include <cstdint>

namespace spill {

struct DsaBlock {
  size_t bytes = 0;        // > 0; callers round to 1 KiB pool blocks, the solver does not assume it
  int64_t alloc_time = 0;  // event clock, inclusive
  int64_t free_time = 0;   // inclusive, >= alloc_time; blocks never freed use the last event time
};

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_DSA_BLOCK_H_
