// Max, average and global average pooling on the CPU. Planes are spread over
// threads; each output (and, in backward, each input plane) is computed by
// one thread, so sums are deterministic. Window bounds are computed once
// per row and column, not per output.
#include <cfloat>
#include <vector>

#include "framework/layer_registry.h"
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

class CpuPoolingLayer : public PoolingLayer {
 public:
  CpuPoolingLayer(LayerParams& params, Kind kind) : PoolingLayer(params, kind) {}

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const PoolGeometry& g = geom_;
    const Ranges rows =
        AxisRanges(g.out_height, g.height, g.kernel[0], g.stride[0], g.pad[0], g.count_include_pad);
    const Ranges cols =
        AxisRanges(g.out_width, g.width, g.kernel[1], g.stride[1], g.pad[1], g.count_include_pad);
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t planes = args.inputs[0].shape().n() * g.channels;  // the images given
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x + p * g.height * g.width;
      float* out = y + p * g.out_height * g.out_width;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          float value = kind_ == Kind::kMax ? -FLT_MAX : 0.0f;
          for (int64_t h = rows.begin[oh]; h < rows.end[oh]; ++h) {
            const float* line = in + h * g.width;
            for (int64_t w = cols.begin[ow]; w < cols.end[ow]; ++w) {
              value = kind_ == Kind::kMax ? std::max(value, line[w]) : value + line[w];
            }
          }
          if (kind_ != Kind::kMax) value /= static_cast<float>(rows.span[oh] * cols.span[ow]);
          out[oh * g.out_width + ow] = value;
        }
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const PoolGeometry& g = geom_;
    const Ranges rows =
        AxisRanges(g.out_height, g.height, g.kernel[0], g.stride[0], g.pad[0], g.count_include_pad);
    const Ranges cols =
        AxisRanges(g.out_width, g.width, g.kernel[1], g.stride[1], g.pad[1], g.count_include_pad);
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const float* x = kind_ == Kind::kMax ? args.inputs[0].data() : nullptr;
    const float* y = kind_ == Kind::kMax ? args.outputs[0].data() : nullptr;
    const int64_t planes = args.output_grads[0].shape().n() * g.channels;
    const int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      float* grad_in = dx + p * in_plane;
      if (!accumulate) std::fill(grad_in, grad_in + in_plane, 0.0f);
      const float* grad_out = dy + p * out_plane;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          const int64_t o = oh * g.out_width + ow;
          if (kind_ == Kind::kMax) {
            const int64_t at = ArgMax(x + p * in_plane, rows.begin[oh], rows.end[oh],
                                      cols.begin[ow], cols.end[ow], y[p * out_plane + o]);
            if (at >= 0) grad_in[at] += grad_out[o];
            continue;
          }
          const float share = grad_out[o] / static_cast<float>(rows.span[oh] * cols.span[ow]);
          for (int64_t h = rows.begin[oh]; h < rows.end[oh]; ++h) {
            float* line = grad_in + h * g.width;
            for (int64_t w = cols.begin[ow]; w < cols.end[ow]; ++w) line[w] += share;
          }
        }
      }
    }
  }

 private:
  // The first position in the window holding the pooled maximum.
  int64_t ArgMax(const float* in, int64_t h0, int64_t h1, int64_t w0, int64_t w1, float max) const {
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) {
        if (in[h * geom_.width + w] == max) return h * geom_.width + w;
      }
    }
    return -1;
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
