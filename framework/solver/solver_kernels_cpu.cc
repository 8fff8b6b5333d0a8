// Solver arithmetic on the CPU device: elementwise, one pass per tensor.
#include <cmath>

#include "framework/solver/solver.h"

namespace spill {
namespace {

class CpuSolverKernels : public SolverKernels {
 public:
  void Sgd(Device&, int64_t n, float* w, const float* g, float* v, float lr, float momentum,
           float decay, bool nesterov) override {
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + decay * w[i];
      if (v != nullptr) {
        v[i] = momentum * v[i] + d;
        d = nesterov ? d + momentum * v[i] : v[i];
      }
      w[i] -= lr * d;
    }
  }

  void Adam(Device&, int64_t n, float* w, const float* g, float* m, float* s, float lr, float beta1,
            float beta2, float epsilon, float decay, int64_t t) override {
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(t));
    const float step = lr / c1;
    const float root_c2 = std::sqrt(c2);
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + decay * w[i];
      m[i] = beta1 * m[i] + (1.0f - beta1) * d;
      s[i] = beta2 * s[i] + (1.0f - beta2) * d * d;
      w[i] -= step * m[i] / (std::sqrt(s[i]) / root_c2 + epsilon);
    }
  }

  bool Unscale(Device&, int64_t n, float* g, float factor) override {
    int64_t bad = 0;
#pragma omp parallel for if (n > 65536) schedule(static) reduction(+ : bad)
    for (int64_t i = 0; i < n; ++i) {
      bad += !std::isfinite(g[i]);
      g[i] *= factor;
    }
    return bad == 0;
  }
};

const bool registered = RegisterSolverKernels(DeviceType::kCpu, new CpuSolverKernels());

}  // namespace
}  // namespace spill
