// Staging: the staged tensors of the streamed step being run and the
// images per slice (0: the step is not streamed). See runtime_streaming.cc
// for when a step streams and how its slice is chosen; this part holds the
// staging blocks and runs each slice's copies through the residency state
// machine.
#ifndef SPILL_MEMORY_STAGING_H_
#define SPILL_MEMORY_STAGING_H_

#include <cstdint>
#include <vector>

#include "memory/allocators/allocator.h"
#include "memory/backing.h"
#include "memory/residency.h"

namespace spill {

struct StagedTensor {
  TensorId id = kNoTensor;
  size_t image_bytes = 0;
  bool read = false;         // copied in before each call
  bool accumulated = false;  // added into: copied in before each call of the last sweep
  bool written = false;      // copied out after each call of the last sweep
  AllocationId block = -1;
  size_t offset = 0;     // of the staging block
  char* data = nullptr;  // the staging block; null when planning
};

class Staging {
 public:
  const std::vector<StagedTensor>& tensors() const { return tensors_; }
  std::vector<StagedTensor>& tensors() { return tensors_; }
  // A streamed step starts: nothing staged yet.
  void Begin() { tensors_.clear(); }
  void Add(const StagedTensor& t) { tensors_.push_back(t); }
  bool Contains(TensorId id) const;
  // Staging bytes per image of the slice, over every staged tensor.
  size_t image_bytes() const;
  int64_t images() const { return images_; }
  void set_images(int64_t images) { images_ = images; }
  // The staging block of `id`; null when it is not staged (or planning).
  float* Data(TensorId id) const;

  // Gives every staging block back (the tensors stay listed).
  void FreeBlocks(DeviceAllocator& allocator, Backing& backing);
  // The step is over: blocks given back, nothing staged.
  void Clear(DeviceAllocator& allocator, Backing& backing);

  // Each slice's copies: in before the call, out after the last sweep's.
  void BeginSlice(ResidencyManager& residency, int64_t begin, int64_t images, bool last_sweep);
  void EndSlice(ResidencyManager& residency, int64_t begin, int64_t images, bool last_sweep);

  // The streamed step's state, set aside while a rebuild streams its own.
  Staging TakeAside();
  void Restore(Staging&& aside);

 private:
  std::vector<StagedTensor> tensors_;
  int64_t images_ = 0;
};

}  // namespace spill

#endif  // SPILL_MEMORY_STAGING_H_
