#include "framework/graph/conversions.h"

#include "framework/base/check.h"
#include "framework/graph/precision.h"

namespace spill {

Tensor Conversions::Float(const Tensor& t, bool read, bool written) {
  if (!active_ || !t.valid() || t.dtype() == DType::kF32) return t;
  for (Copy& c : copies_) {
    if (c.half.raw() == t.raw()) {
      c.read |= read;
      c.written |= written;
      return Tensor(t.shape(), c.copy, t.layout());
    }
  }
  const size_t bytes = ConversionCopyBytes(t.numel());
  SPILL_CHECK(used_ + bytes <= workspace_.bytes)
      << "the step's workspace (" << workspace_.bytes
      << " bytes) has no room for a float32 copy of " << t.shape().ToString() << " after " << used_
      << " bytes of copies";
  float* copy = reinterpret_cast<float*>(static_cast<char*>(workspace_.data) + used_);
  used_ += bytes;
  copies_.push_back({t, copy, read, written});
  return Tensor(t.shape(), copy, t.layout());
}

void Conversions::Float(std::vector<Tensor>* views, bool read, bool written) {
  for (Tensor& t : *views) t = Float(t, read, written);
}

void Conversions::ConvertIn() {
  for (const Copy& c : copies_) {
    if (!c.read) continue;
    device_->ConvertAsync(c.copy, DType::kF32, c.half.raw(), c.half.dtype(), c.half.numel(),
                          device_->compute_queue());
  }
}

Workspace Conversions::rest() const {
  if (used_ == 0) return workspace_;
  Workspace rest;
  rest.bytes = workspace_.bytes - used_;
  rest.data = rest.bytes == 0 ? nullptr : static_cast<char*>(workspace_.data) + used_;
  return rest;
}

void Conversions::WriteBack() {
  for (const Copy& c : copies_) {
    if (!c.written) continue;
    device_->ConvertAsync(c.half.raw(), c.half.dtype(), c.copy, DType::kF32, c.half.numel(),
                          device_->compute_queue());
  }
}

}  // namespace spill
