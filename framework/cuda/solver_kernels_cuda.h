// Launchers of the solver's update kernels (solver_kernels.cu).
#ifndef SPILL_FRAMEWORK_CUDA_SOLVER_KERNELS_CUDA_H_
#define SPILL_FRAMEWORK_CUDA_SOLVER_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace spill {
namespace cuda {

void LaunchSgd(int64_t n, float* w, const float* g, float* v, float lr, float momentum, float decay,
               bool nesterov, cudaStream_t stream);
void LaunchAdam(int64_t n, float* w, const float* g, float* m, float* s, float lr, float beta1,
                float beta2, float epsilon, float decay, float c1, float root_c2,
                cudaStream_t stream);

// g *= factor; *nonfinite (device-visible) set to 1 where a value was not.
void LaunchUnscale(int64_t n, float* g, float factor, int* nonfinite, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_SOLVER_KERNELS_CUDA_H_
