// Staging: the staged tensors of the streamed step being run and the
// images per slice (0: the step is not streamed). See runtime_streaming.cc
// for when a step streams and how its slice is chosen; this part holds the
// staging blocks and runs each slice's copies through the residency state
// machine.
//
// Double buffering (memory.stream_buffers: 2): each staging block holds two
// slices. While slice k computes in one half, slice k+1 is copied into the
// other and slice k-1 out of it, so a step's copies hide behind its compute
// instead of alternating with it. Slice k's compute waits for its own copy
// in and for the copy out of slice k-2, which left the same half; the copy
// queue runs in order.
#ifndef SPILL_MEMORY_RUNTIME_STAGING_H_
#define SPILL_MEMORY_RUNTIME_STAGING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/device/device.h"
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
  char* data = nullptr;  // the staging block (`buffers` slices); null when planning
  // The copies in flight into and out of each half.
  std::shared_ptr<Event> copied_in[2], copied_out[2];
};

// One call of a streamed step: images [begin, begin + images) in one sweep.
struct StreamSlice {
  int64_t begin = 0;
  int64_t images = 0;
  bool last_sweep = false;
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
  // Slices per staging block: 1, or 2 when double-buffered.
  int buffers() const { return buffers_; }
  // The slice calls the step makes: `sweeps` passes over `batch` images,
  // `images` at a time, each slice `buffers` deep.
  void SetSlices(int64_t batch, int64_t images, int sweeps, int buffers);
  int slice_calls() const { return static_cast<int>(slices_.size()); }
  // A staging block's bytes: `buffers` slices of `images` images, each half
  // of a double buffer starting on a 256-byte boundary, as a device block
  // does (vector loads, cuDNN).
  static size_t BlockBytes(int64_t images, size_t image_bytes, int buffers);
  // The half of `id`'s staging block the current slice computes in; null
  // when it is not staged (or planning).
  float* Data(TensorId id) const;

  // Gives every staging block back (the tensors stay listed).
  void FreeBlocks(DeviceAllocator& allocator, Backing& backing);
  // The step is over: blocks given back, nothing staged.
  void Clear(DeviceAllocator& allocator, Backing& backing);

  // Each slice's copies: in before the call (double-buffered: the next
  // slice's too), out after the last sweep's.
  void BeginSlice(ResidencyManager& residency, int64_t begin, int64_t images, bool last_sweep);
  void EndSlice(ResidencyManager& residency, int64_t begin, int64_t images, bool last_sweep);

  // The streamed step's state, set aside while a rebuild streams its own.
  Staging TakeAside();
  void Restore(Staging&& aside);

 private:
  int half(int call) const { return call % buffers_; }
  // Where the second half of a double buffer starts.
  static size_t HalfStride(int64_t images, size_t image_bytes);
  size_t slice_bytes(const StagedTensor& t) const { return HalfStride(images_, t.image_bytes); }
  // Where slice call `call` lies in `t`'s staging block (null when planning).
  char* HalfOf(const StagedTensor& t, int call) const {
    return t.data == nullptr ? nullptr : t.data + half(call) * slice_bytes(t);
  }
  // Slice call `call`'s copies in, into its half.
  void CopyIn(ResidencyManager& residency, int call);

  std::vector<StagedTensor> tensors_;
  int64_t images_ = 0;
  int buffers_ = 1;
  std::vector<StreamSlice> slices_;
  int call_ = 0;  // the slice call running or next
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_STAGING_H_
