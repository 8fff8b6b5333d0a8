// Max, average and global average pooling on the CPU. Each output (and, in
// backward, each input plane) is computed by one thread, so sums are
// deterministic.
#include <cfloat>

#include "framework/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/pooling_layer.h"

namespace spill {
namespace {

class CpuPoolingLayer : public PoolingLayer {
 public:
  CpuPoolingLayer(LayerParams& params, Kind kind) : PoolingLayer(params, kind) {}

  void Forward(const ForwardArgs& args) override {
    const PoolGeometry& g = geom_;
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t planes = g.batch * g.channels;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x + p * g.height * g.width;
      float* out = y + p * g.out_height * g.out_width;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          int64_t h0, h1, w0, w1, area;
          g.Window(oh, ow, &h0, &h1, &w0, &w1, &area);
          out[oh * g.out_width + ow] = kind_ == Kind::kMax ? Max(in, h0, h1, w0, w1)
                                                           : Sum(in, h0, h1, w0, w1) / area;
        }
      }
    }
  }

  void Backward(const BackwardArgs& args) override {
    const PoolGeometry& g = geom_;
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const int64_t planes = g.batch * g.channels;
    const float* x = kind_ == Kind::kMax ? args.inputs[0].data() : nullptr;
    const float* y = kind_ == Kind::kMax ? args.outputs[0].data() : nullptr;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
      float* grad_in = dx + p * in_plane;
      if (!accumulate) {
        for (int64_t i = 0; i < in_plane; ++i) grad_in[i] = 0.0f;
      }
      const float* grad_out = dy + p * out_plane;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          int64_t h0, h1, w0, w1, area;
          g.Window(oh, ow, &h0, &h1, &w0, &w1, &area);
          const float grad = grad_out[oh * g.out_width + ow];
          if (kind_ == Kind::kMax) {
            int64_t at = ArgMax(x + p * in_plane, h0, h1, w0, w1, y[p * out_plane + oh * g.out_width + ow]);
            if (at >= 0) grad_in[at] += grad;
            continue;
          }
          const float share = grad / area;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) grad_in[h * g.width + w] += share;
          }
        }
      }
    }
  }

 private:
  float Max(const float* in, int64_t h0, int64_t h1, int64_t w0, int64_t w1) const {
    float best = -FLT_MAX;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) best = std::max(best, in[h * geom_.width + w]);
    }
    return best;
  }

  float Sum(const float* in, int64_t h0, int64_t h1, int64_t w0, int64_t w1) const {
    float sum = 0;
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t w = w0; w < w1; ++w) sum += in[h * geom_.width + w];
    }
    return sum;
  }

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
