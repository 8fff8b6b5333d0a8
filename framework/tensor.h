// Shapes and tensors. Every tensor is float32 in NCHW layout; fully connected
// outputs are N x C x 1 x 1 and labels are N x 1 x 1 x 1 (class indices stored
// as exact small integers in float).
//
// A Tensor is a non-owning view: the bytes belong to the memory runtime
// (memory/), which decides where they live and when. Layers only ever see
// views that the runtime made resident for the step being computed.
#ifndef SPILL_FRAMEWORK_TENSOR_H_
#define SPILL_FRAMEWORK_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace spill {

struct Shape {
  std::array<int64_t, 4> dims = {0, 0, 0, 0};

  Shape() = default;
  Shape(int64_t n, int64_t c, int64_t h, int64_t w) : dims{n, c, h, w} {}

  int64_t n() const { return dims[0]; }
  int64_t c() const { return dims[1]; }
  int64_t h() const { return dims[2]; }
  int64_t w() const { return dims[3]; }
  int64_t numel() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
  // Elements of one sample: C*H*W.
  int64_t sample_size() const { return dims[1] * dims[2] * dims[3]; }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(float); }

  bool operator==(const Shape& o) const { return dims == o.dims; }
  bool operator!=(const Shape& o) const { return dims != o.dims; }
  // "2x64x56x56"
  std::string ToString() const;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(const Shape& shape, float* data) : shape_(shape), data_(data) {}

  const Shape& shape() const { return shape_; }
  float* data() const { return data_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return shape_.bytes(); }
  bool valid() const { return data_ != nullptr; }

 private:
  Shape shape_;
  float* data_ = nullptr;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_TENSOR_H_
