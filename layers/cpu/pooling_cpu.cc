// Max, average and global average pooling on the CPU, in any layout
// (framework/device/tensor.h). A run is what one thread computes: a plane of one
// channel (plain) or of a block of 16 channels, the lanes (blocked and
// channels-last: layers/cpu/blocked.h), element (h, w, lane) at
// (h * W + w) * stride + lane from the run's start. Each output (and, in
// backward, each input run) is computed by one thread, so sums are
// deterministic, and every layout adds a window's elements in the same order. Window bounds are
// computed once per row and column, not per output. Tensors stored in 16
// bits are read and written as they are (layers/cpu/typed_elements.h); a
// run's input gradient sums in a float32 buffer and is rounded once, so the
// bits are those of float32 copies.
#include <algorithm>
#include <cfloat>
#include <type_traits>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/blocked.h"
#include "layers/cpu/typed_elements.h"
#include "layers/pooling_layer.h"

namespace spill {
namespace {

// Clipped window bounds along one axis, and the divisor's factor for it.
struct Ranges {
  std::vector<int64_t> begin, end, span;
};

Ranges AxisRanges(int64_t out, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                  bool count_pad) {
  Ranges r;
  for (int64_t o = 0; o < out; ++o) {
    int64_t s = o * stride - pad, e = std::min(s + kernel, in + pad);
    int64_t b = std::max<int64_t>(s, 0), f = std::min(e, in);
    r.begin.push_back(b);
    r.end.push_back(f);
    r.span.push_back(count_pad ? e - s : f - b);
  }
  return r;
}

struct Windows {
  explicit Windows(const PoolGeometry& g)
      : rows(AxisRanges(g.out_height, g.height, g.kernel[0], g.stride[0], g.pad[0],
                        g.count_include_pad)),
        cols(AxisRanges(g.out_width, g.width, g.kernel[1], g.stride[1], g.pad[1],
                        g.count_include_pad)) {}
  Ranges rows, cols;
};

// Where each run starts in x and in y, and how far apart a run's pixels lie.
struct PoolRuns {
  PoolRuns(const Shape& x, const Shape& y, Layout layout)
      : in(x, layout), out(y, layout), plain(layout == Layout::kPlain) {}
  int64_t count() const { return plain ? in.images * in.channels : in.count(); }
  int64_t in_start(int64_t r) const { return plain ? r * in.plane : in.start(r); }
  int64_t out_start(int64_t r) const { return plain ? r * out.plane : out.start(r); }
  int64_t stride() const { return plain ? 1 : in.stride; }
  cpu::Lanes in, out;
  bool plain;
};

template <int kLanes, typename E>
void PoolRun(const PoolGeometry& g, const Windows& win, bool max, const typename E::T* in,
             typename E::T* out, int64_t stride) {
  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    for (int64_t ow = 0; ow < g.out_width; ++ow) {
      float value[kLanes];
      std::fill(value, value + kLanes, max ? -FLT_MAX : 0.0f);
      for (int64_t h = win.rows.begin[oh]; h < win.rows.end[oh]; ++h) {
        for (int64_t w = win.cols.begin[ow]; w < win.cols.end[ow]; ++w) {
          const typename E::T* at = in + (h * g.width + w) * stride;
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) {
            const float v = E::Load(at[l]);
            value[l] = max ? std::max(value[l], v) : value[l] + v;
          }
        }
      }
      typename E::T* to = out + (oh * g.out_width + ow) * stride;
      const float area = static_cast<float>(win.rows.span[oh] * win.cols.span[ow]);
      for (int l = 0; l < kLanes; ++l) to[l] = E::Store(max ? value[l] : value[l] / area);
    }
  }
}

// dx of one run; max pooling passes each output's gradient to the first
// position of its window holding the maximum.
// x, y and dy's pixels lie `stride` apart, dx's `dx_stride`.
template <int kLanes, typename E>
void PoolRunBackward(const PoolGeometry& g, const Windows& win, const typename E::T* x,
                     const typename E::T* y, const typename E::T* dy, float* dx, int64_t stride,
                     int64_t dx_stride) {
  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    for (int64_t ow = 0; ow < g.out_width; ++ow) {
      const int64_t o = (oh * g.out_width + ow) * stride;
      const int64_t h0 = win.rows.begin[oh], h1 = win.rows.end[oh];
      const int64_t w0 = win.cols.begin[ow], w1 = win.cols.end[ow];
      for (int l = 0; l < kLanes; ++l) {
        if (x != nullptr) {
          bool found = false;
          for (int64_t h = h0; h < h1 && !found; ++h) {
            for (int64_t w = w0; w < w1 && !found; ++w) {
              const int64_t p = h * g.width + w;
              if (E::Load(x[p * stride + l]) == E::Load(y[o + l])) {
                dx[p * dx_stride + l] += E::Load(dy[o + l]);
                found = true;
              }
            }
          }
          continue;
        }
        const float share =
            E::Load(dy[o + l]) / static_cast<float>(win.rows.span[oh] * win.cols.span[ow]);
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) dx[(h * g.width + w) * dx_stride + l] += share;
        }
      }
    }
  }
}

class CpuPoolingLayer : public PoolingLayer {
 public:
  CpuPoolingLayer(LayerParams& params, Kind kind) : PoolingLayer(params, kind) {}

  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }
  // x and y (so dx and dy) of one type; otherwise float32 copies.
  bool computes_16_bit(Pass) const override { return input_dtype(0) == output_dtype(0); }

  void Forward(const ForwardArgs& args) const override {
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      using E = decltype(e);
      if (args.inputs[0].layout() != Layout::kPlain) return ForwardRuns<kChannelBlock, E>(args);
      ForwardRuns<1, E>(args);
    });
  }

  void Backward(const BackwardArgs& args) const override {
    cpu::WithElements(args.output_grads[0].dtype(), [&](auto e) {
      using E = decltype(e);
      if (args.input_grads[0].layout() != Layout::kPlain) {
        return BackwardRuns<kChannelBlock, E>(args);
      }
      BackwardRuns<1, E>(args);
    });
  }

 private:
  template <int kLanes, typename E>
  void ForwardRuns(const ForwardArgs& args) const {
    const PoolGeometry& g = geom_;
    const Windows win(g);
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    auto* y = cpu::ElementsOf<E>(args.outputs[0]);
    const bool max = kind_ == Kind::kMax;
    const PoolRuns runs(args.inputs[0].shape(), args.outputs[0].shape(),
                        args.inputs[0].layout());  // the images given
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < runs.count(); ++r) {
      PoolRun<kLanes, E>(g, win, max, x + runs.in_start(r), y + runs.out_start(r), runs.stride());
    }
  }

  // A float32 input gradient is summed in place; a 16-bit one in a float32
  // buffer per run, rounded once.
  template <int kLanes, typename E>
  void BackwardRuns(const BackwardArgs& args) const {
    const PoolGeometry& g = geom_;
    const Windows win(g);
    using T = typename E::T;
    constexpr bool kInPlace = std::is_same_v<E, cpu::Float32Elements>;
    const T* dy = cpu::ElementsOf<E>(args.output_grads[0]);
    T* dx = cpu::ElementsOf<E>(args.input_grads[0]);
    const bool accumulate = args.accumulate[0];
    const T* x = kind_ == Kind::kMax ? cpu::ElementsOf<E>(args.inputs[0]) : nullptr;
    const T* y = kind_ == Kind::kMax ? cpu::ElementsOf<E>(args.outputs[0]) : nullptr;
    const PoolRuns runs(args.input_grads[0].shape(), args.output_grads[0].shape(),
                        args.input_grads[0].layout());
    const int64_t stride = runs.stride(), plane = g.height * g.width;
    const int64_t dx_stride = kInPlace ? stride : kLanes;
#pragma omp parallel
    {
      std::vector<float> buffer(kInPlace ? 0 : plane * kLanes);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < runs.count(); ++r) {
        T* run = dx + runs.in_start(r);
        float* grad_in = nullptr;
        if constexpr (kInPlace) {
          grad_in = run;
        } else {
          grad_in = buffer.data();
        }
        for (int64_t p = 0; p < plane; ++p) {
          for (int l = 0; l < kLanes; ++l) {
            float& to = grad_in[p * dx_stride + l];
            if (!accumulate) {
              to = 0.0f;
            } else if (!kInPlace) {
              to = E::Load(run[p * stride + l]);
            }
          }
        }
        const int64_t in = runs.in_start(r), out = runs.out_start(r);
        PoolRunBackward<kLanes, E>(g, win, x ? x + in : nullptr, y ? y + out : nullptr, dy + out,
                                   grad_in, stride, dx_stride);
        if (!kInPlace) {
          for (int64_t p = 0; p < plane; ++p) {
            for (int l = 0; l < kLanes; ++l)
              run[p * stride + l] = E::Store(grad_in[p * kLanes + l]);
          }
        }
      }
    }
  }
};

class CpuMaxPool : public CpuPoolingLayer {
 public:
  explicit CpuMaxPool(LayerParams& p) : CpuPoolingLayer(p, Kind::kMax) {}
};
class CpuAvgPool : public CpuPoolingLayer {
 public:
  explicit CpuAvgPool(LayerParams& p) : CpuPoolingLayer(p, Kind::kAverage) {}
};
class CpuGlobalAvgPool : public CpuPoolingLayer {
 public:
  explicit CpuGlobalAvgPool(LayerParams& p) : CpuPoolingLayer(p, Kind::kGlobalAverage) {}
};

}  // namespace

SPILL_REGISTER_LAYER(max_pool, kCpu, CpuMaxPool);
SPILL_REGISTER_LAYER(avg_pool, kCpu, CpuAvgPool);
SPILL_REGISTER_LAYER(global_avg_pool, kCpu, CpuGlobalAvgPool);

}  // namespace spill
