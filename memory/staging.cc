#include "memory/staging.h"

namespace spill {

bool Staging::Contains(TensorId id) const {
  for (const StagedTensor& t : tensors_) {
    if (t.id == id) return true;
  }
  return false;
}

size_t Staging::image_bytes() const {
  size_t bytes = 0;
  for (const StagedTensor& t : tensors_) bytes += t.image_bytes;
  return bytes;
}

float* Staging::Data(TensorId id) const {
  for (const StagedTensor& t : tensors_) {
    if (t.id == id) return reinterpret_cast<float*>(t.data);
  }
  return nullptr;
}

void Staging::FreeBlocks(DeviceAllocator& allocator, Backing& backing) {
  for (StagedTensor& t : tensors_) {
    if (t.block < 0) continue;
    backing.AnnotateFree(t.offset);
    allocator.Free(t.block);
    t.block = -1;
    t.data = nullptr;
  }
}

void Staging::Clear(DeviceAllocator& allocator, Backing& backing) {
  FreeBlocks(allocator, backing);
  tensors_.clear();
  images_ = 0;
}

void Staging::BeginSlice(ResidencyManager& residency, int64_t begin, int64_t images,
                         bool last_sweep) {
  for (const StagedTensor& t : tensors_) {
    // The previous slice's copy out has left the block before it is refilled.
    if (t.written) residency.WaitForCopy(t.id);
    if (t.read || (t.accumulated && last_sweep)) {
      residency.CopySliceIn(t.id, t.data, static_cast<size_t>(begin) * t.image_bytes,
                            static_cast<size_t>(images) * t.image_bytes);
    }
  }
}

void Staging::EndSlice(ResidencyManager& residency, int64_t begin, int64_t images,
                       bool last_sweep) {
  if (!last_sweep) return;
  for (const StagedTensor& t : tensors_) {
    if (!t.written) continue;
    residency.CopySliceOut(t.id, t.data, static_cast<size_t>(begin) * t.image_bytes,
                           static_cast<size_t>(images) * t.image_bytes);
  }
}

Staging Staging::TakeAside() {
  Staging aside;
  aside.tensors_.swap(tensors_);
  aside.images_ = images_;
  images_ = 0;
  return aside;
}

void Staging::Restore(Staging&& aside) {
  tensors_.swap(aside.tensors_);
  images_ = aside.images_;
}

}  // namespace spill
