// What the oneDNN-based convolution algorithms (conv_dnnl.cc,
// conv_gemm_bf16.cc) share: the oneDNN names of the framework's layouts and
// types, and a per-geometry cache of what they build once per shape.
#ifndef SPILL_LAYERS_CPU_DNNL_CONV_COMMON_H_
#define SPILL_LAYERS_CPU_DNNL_CONV_COMMON_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "layers/convolution_layer.h"

namespace spill {
namespace cpu {

// The oneDNN format of a framework layout.
inline dnnl::memory::format_tag DnnlTag(Layout layout) {
  switch (layout) {
    case Layout::kBlocked16:
      return dnnl::memory::format_tag::nChw16c;
    case Layout::kChannelsLast:
      return dnnl::memory::format_tag::nhwc;
    case Layout::kPlain:
      break;
  }
  return dnnl::memory::format_tag::nchw;
}

// The oneDNN type of a storage type.
inline dnnl::memory::data_type DnnlType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return dnnl::memory::data_type::f32;
    case DType::kBF16:
      return dnnl::memory::data_type::bf16;
    case DType::kF16:
      return dnnl::memory::data_type::f16;
  }
  return dnnl::memory::data_type::f32;
}

// What an algorithm builds for a geometry (primitives, workspace layout),
// built on first use and kept: entries are never removed or changed once
// built, so references stay valid. Thread-safe.
template <typename Entry>
class GeometryCache {
 public:
  template <typename Build>
  const Entry& Find(const ConvGeometry& g, Build build) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Entry>& entry = entries_[KeyOf(g)];
    if (!entry) entry = build(g);
    return *entry;
  }

 private:
  // Every field of ConvGeometry.
  using Key = std::array<int64_t, 20>;

  static Key KeyOf(const ConvGeometry& g) {
    return {g.batch,
            g.channels,
            g.height,
            g.width,
            g.filters,
            g.out_height,
            g.out_width,
            g.kernel[0],
            g.kernel[1],
            g.stride[0],
            g.stride[1],
            g.pad[0],
            g.pad[1],
            g.dilation[0],
            g.dilation[1],
            g.groups,
            static_cast<int64_t>(g.input_layout),
            static_cast<int64_t>(g.output_layout),
            static_cast<int64_t>(g.input_dtype),
            static_cast<int64_t>(g.output_dtype)};
  }

  mutable std::mutex mutex_;
  mutable std::map<Key, std::unique_ptr<Entry>> entries_;
};

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_DNNL_CONV_COMMON_H_
