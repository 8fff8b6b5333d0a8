// matmul, softmax and reshape on the CPU (layers/matrix_math.h holds the
// arithmetic the CUDA kernels share). Each output element is one loop in a
// fixed order, computed by one thread: the bits depend neither on the
// thread count nor on how many images a call holds.
#include <cstring>

#include "framework/graph/layer_registry.h"
#include "layers/matrix_layers.h"

namespace spill {
namespace {

class CpuMatmulLayer : public MatmulLayer {
 public:
  using MatmulLayer::MatmulLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const MatmulGeometry g = geometry_;
    const Shape& a = args.inputs[0].shape();
    const int64_t matrices = a.n() * a.c();
    const float* x = args.inputs[0].data();
    const float* w = args.inputs[1].data();
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < matrices * g.m; ++r) {
      const int64_t q = r / g.m, i = r % g.m;
      for (int64_t j = 0; j < g.p; ++j) {
        y[q * g.y_size() + i * g.p + j] =
            MatmulElement(g, x + q * g.a_size(), w + q * g.b_size(), i, j);
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const MatmulGeometry g = geometry_;
    const Shape& s = args.inputs[0].shape();
    const int64_t matrices = s.n() * s.c();
    const float* a = args.inputs[0].data();
    const float* b = args.inputs[1].data();
    const float* dy = args.output_grads[0].data();
    if (args.input_grads[0].valid()) {  // stored A: element (h, w) is op(A)[h][w] or [w][h]
      float* da = args.input_grads[0].data();
      const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
      for (int64_t q = 0; q < matrices; ++q) {
        for (int64_t i = 0; i < g.m; ++i) {
          for (int64_t t = 0; t < g.k; ++t) {
            const float v = MatmulGradA(g, dy + q * g.y_size(), b + q * g.b_size(), i, t);
            float& d = da[q * g.a_size() + g.a_at(i, t)];
            d = accumulate ? d + v : v;
          }
        }
      }
    }
    if (args.input_grads[1].valid()) {
      float* db = args.input_grads[1].data();
      const bool accumulate = args.accumulate[1];
#pragma omp parallel for schedule(static)
      for (int64_t q = 0; q < matrices; ++q) {
        for (int64_t t = 0; t < g.k; ++t) {
          for (int64_t j = 0; j < g.p; ++j) {
            const float v = MatmulGradB(g, a + q * g.a_size(), dy + q * g.y_size(), t, j);
            float& d = db[q * g.b_size() + g.b_at(t, j)];
            d = accumulate ? d + v : v;
          }
        }
      }
    }
  }
};

class CpuSoftmaxLayer : public SoftmaxLayer {
 public:
  using SoftmaxLayer::SoftmaxLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const SoftmaxRows s = RowsOf(args.inputs[0].shape());
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < s.rows; ++r) SoftmaxRow(s, x + s.start(r), y + s.start(r));
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const SoftmaxRows s = RowsOf(args.outputs[0].shape());
    const float* y = args.outputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < s.rows; ++r) {
      SoftmaxRowGrad(s, y + s.start(r), dy + s.start(r), dx + s.start(r), accumulate);
    }
  }
};

class CpuReshapeLayer : public ReshapeLayer {
 public:
  using ReshapeLayer::ReshapeLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    std::memcpy(args.outputs[0].data(), args.inputs[0].data(),
                static_cast<size_t>(args.inputs[0].numel()) * sizeof(float));
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t n = args.output_grads[0].numel();
    if (!args.accumulate[0]) {
      std::memcpy(dx, dy, static_cast<size_t>(n) * sizeof(float));
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
  }
};

}  // namespace

SPILL_REGISTER_LAYER(matmul, kCpu, CpuMatmulLayer);
SPILL_REGISTER_LAYER(softmax, kCpu, CpuSoftmaxLayer);
SPILL_REGISTER_LAYER(reshape, kCpu, CpuReshapeLayer);

}  // namespace spill
