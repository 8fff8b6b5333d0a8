#include "memory/runtime/staging.h"

#include <algorithm>

#include "framework/base/check.h"

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
    if (t.id == id) return reinterpret_cast<float*>(HalfOf(t, call_));
  }
  return nullptr;
}

namespace {
constexpr size_t kHalfAlignment = 256;
}  // namespace

size_t Staging::HalfStride(int64_t images, size_t image_bytes) {
  const size_t bytes = static_cast<size_t>(images) * image_bytes;
  return (bytes + kHalfAlignment - 1) / kHalfAlignment * kHalfAlignment;
}

size_t Staging::BlockBytes(int64_t images, size_t image_bytes, int buffers) {
  if (buffers == 1) return static_cast<size_t>(images) * image_bytes;
  return HalfStride(images, image_bytes) + static_cast<size_t>(images) * image_bytes;
}

void Staging::SetSlices(int64_t batch, int64_t images, int sweeps, int buffers) {
  images_ = images;
  buffers_ = buffers;
  call_ = 0;
  slices_.clear();
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (int64_t begin = 0; begin < batch; begin += images) {
      slices_.push_back({begin, std::min(images, batch - begin), sweep + 1 == sweeps});
    }
  }
}

void Staging::FreeBlocks(DeviceAllocator& allocator, Backing& backing) {
  for (StagedTensor& t : tensors_) {
    // A copy in that no slice consumed (a step cut short) must not land in
    // a block given back.
    for (std::shared_ptr<Event>& e : t.copied_in) {
      if (e) e->Synchronize();
      e.reset();
    }
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
  buffers_ = 1;
  slices_.clear();
  call_ = 0;
}

void Staging::CopyIn(ResidencyManager& residency, int call) {
  const StreamSlice& slice = slices_[call];
  for (StagedTensor& t : tensors_) {
    if (!t.read && !(t.accumulated && slice.last_sweep)) continue;
    t.copied_in[half(call)] = residency.CopySliceIn(
        t.id, HalfOf(t, call), static_cast<size_t>(slice.begin) * t.image_bytes,
        static_cast<size_t>(slice.images) * t.image_bytes);
  }
}

void Staging::BeginSlice(ResidencyManager& residency, int64_t begin, int64_t images,
                         bool last_sweep) {
  SPILL_CHECK(call_ < slice_calls() && slices_[call_].begin == begin &&
              slices_[call_].images == images && slices_[call_].last_sweep == last_sweep)
      << "slice " << call_ << " of a streamed step is not the one planned";
  // Single-buffered, or the first slice: nothing was copied ahead.
  if (buffers_ == 1 || call_ == 0) CopyIn(residency, call_);
  const int h = half(call_);
  for (StagedTensor& t : tensors_) {
    residency.ComputeWaits(t.copied_in[h]);   // this slice's data is in
    residency.ComputeWaits(t.copied_out[h]);  // the slice before in this half is out
    t.copied_in[h].reset();
    t.copied_out[h].reset();
  }
  // The next slice comes in while this one computes.
  if (buffers_ == 2 && call_ + 1 < slice_calls()) CopyIn(residency, call_ + 1);
}

void Staging::EndSlice(ResidencyManager& residency, int64_t begin, int64_t images,
                       bool last_sweep) {
  const int call = call_++;
  if (!last_sweep) return;
  for (StagedTensor& t : tensors_) {
    if (!t.written) continue;
    t.copied_out[half(call)] =
        residency.CopySliceOut(t.id, HalfOf(t, call), static_cast<size_t>(begin) * t.image_bytes,
                               static_cast<size_t>(images) * t.image_bytes);
  }
}

Staging Staging::TakeAside() {
  Staging aside = std::move(*this);
  *this = Staging();
  return aside;
}

void Staging::Restore(Staging&& aside) { *this = std::move(aside); }

}  // namespace spill
