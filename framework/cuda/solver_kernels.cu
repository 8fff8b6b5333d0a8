// Solver updates on the GPU: the same arithmetic as the CPU device's
// (framework/solver/solver_kernels_cpu.cc), one thread per element.
#include <algorithm>

#include "framework/cuda/solver_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__global__ void Sgd(int64_t n, float* w, const float* g, float* v, float lr, float momentum,
                    float decay, bool nesterov) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float d = g[i] + decay * w[i];
    if (v != nullptr) {
      v[i] = momentum * v[i] + d;
      d = nesterov ? d + momentum * v[i] : v[i];
    }
    w[i] -= lr * d;
  }
}

__global__ void Adam(int64_t n, float* w, const float* g, float* m, float* s, float lr, float beta1,
                     float beta2, float epsilon, float decay, float c1, float root_c2) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float d = g[i] + decay * w[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * d;
    s[i] = beta2 * s[i] + (1.0f - beta2) * d * d;
    w[i] -= (lr / c1) * m[i] / (sqrtf(s[i]) / root_c2 + epsilon);
  }
}

__global__ void Unscale(int64_t n, float* g, float factor, int* nonfinite) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(g[i])) *nonfinite = 1;
    g[i] *= factor;
  }
}

// At least one block (a grid of none is a launch error), at most 4096.
int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

}  // namespace

void LaunchSgd(int64_t n, float* w, const float* g, float* v, float lr, float momentum, float decay,
               bool nesterov, cudaStream_t stream) {
  if (n <= 0) return;
  Sgd<<<Blocks(n), kThreads, 0, stream>>>(n, w, g, v, lr, momentum, decay, nesterov);
}

void LaunchAdam(int64_t n, float* w, const float* g, float* m, float* s, float lr, float beta1,
                float beta2, float epsilon, float decay, float c1, float root_c2,
                cudaStream_t stream) {
  if (n <= 0) return;
  Adam<<<Blocks(n), kThreads, 0, stream>>>(n, w, g, m, s, lr, beta1, beta2, epsilon, decay, c1,
                                           root_c2);
}

void LaunchUnscale(int64_t n, float* g, float factor, int* nonfinite, cudaStream_t stream) {
  if (n <= 0) return;
  Unscale<<<Blocks(n), kThreads, 0, stream>>>(n, g, factor, nonfinite);
}

}  // namespace cuda
}  // namespace spill
