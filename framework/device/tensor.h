// Shapes and tensors. A tensor's elements are float32 unless the run's
// precision stores activations in 16 bits (DType below), in NCHW layout
// unless the network chose a blocked layout for it (Layout below); fully connected
// outputs are N x C x 1 x 1 and labels are N x 1 x 1 x 1 (class indices
// stored as exact small integers in float).
//
// A Tensor is a non-owning view: the bytes belong to the memory runtime
// (memory/), which decides where they live and when. Layers only ever see
// views that the runtime made resident for the step being computed.
#ifndef SPILL_FRAMEWORK_DEVICE_TENSOR_H_
#define SPILL_FRAMEWORK_DEVICE_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace spill {

// How a tensor's elements lie in memory.
//   kPlain      NCHW: element (n, c, h, w) at ((n * C + c) * H + h) * W + w.
//   kBlocked16  oneDNN's nChw16c: channels in blocks of 16, the block
//               innermost: (n, c, h, w) at ((n * C/16 + c/16) * H * W +
//               h * W + w) * 16 + c % 16. The layout oneDNN's AVX-512
//               convolutions compute in, so that activations pass from one
//               convolution to the next without reordering.
//   kChannelsLast  NHWC: (n, c, h, w) at ((n * H + h) * W + w) * C + c. The
//               layout oneDNN's AMX bfloat16 convolutions compute in.
// Only tensors whose channels fill whole blocks of 16 leave the plain layout,
// so a tensor has exactly the bytes of its plain form (no padding), and each
// image is still one contiguous run of C*H*W elements: a slice of the batch is
// a contiguous range in every layout. In both other layouts a pixel's
// channels lie in runs of 16 adjacent elements (layers/cpu/blocked.h).
// Tensors of 1x1 planes (fully connected outputs, pooled features) are the
// same bytes in all three and are always plain. Only the layers see layouts;
// the memory runtime moves bytes.
enum class Layout { kPlain, kBlocked16, kChannelsLast };
constexpr int64_t kChannelBlock = 16;   // channels per block of kBlocked16
const char* LayoutName(Layout layout);  // "nchw", "nChw16c", "nhwc"

// How a tensor's elements are stored. Layers compute on float32; a tensor
// stored in 16 bits is converted to float32 around the computations that
// read or write it, unless the layer computes in 16 bits itself
// (framework/graph/precision.h).
//   kF32   IEEE binary32
//   kBF16  bfloat16: the upper half of a binary32 (8-bit exponent, 7-bit
//          fraction), rounded to nearest even
//   kF16   IEEE binary16 (5-bit exponent, 10-bit fraction), rounded to
//          nearest even; beyond 65504 it is infinite
enum class DType { kF32, kBF16, kF16 };
size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // "fp32", "bf16", "fp16"

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
  Tensor(const Shape& shape, float* data, Layout layout = Layout::kPlain)
      : shape_(shape), data_(data), layout_(layout) {}
  // A tensor of another element type (its bytes at `data`).
  Tensor(const Shape& shape, void* data, DType dtype, Layout layout)
      : shape_(shape), data_(static_cast<float*>(data)), layout_(layout), dtype_(dtype) {}

  const Shape& shape() const { return shape_; }
  Layout layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  // The elements as float32: only for a kF32 tensor (raw() reaches any).
  float* data() const { return data_; }
  void* raw() const { return data_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool valid() const { return data_ != nullptr; }

 private:
  Shape shape_;
  float* data_ = nullptr;
  Layout layout_ = Layout::kPlain;
  DType dtype_ = DType::kF32;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_TENSOR_H_
