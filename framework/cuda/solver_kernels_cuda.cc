// Solver arithmetic for the CUDA device, on its compute stream.
#include "framework/cuda/solver_kernels_cuda.h"

#include <cmath>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_device.h"
#include "framework/solver/solver.h"

namespace spill {
namespace {

class CudaSolverKernels : public SolverKernels {
 private:
  static cudaStream_t Stream(Device& device) {
    return static_cast<CudaDevice&>(device).compute_stream();
  }

 public:
  void Sgd(Device& device, int64_t n, float* w, const float* g, float* v, float lr, float momentum,
           float decay, bool nesterov) override {
    cuda::LaunchSgd(n, w, g, v, lr, momentum, decay, nesterov, Stream(device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
  void Adam(Device& device, int64_t n, float* w, const float* g, float* m, float* s, float lr,
            float beta1, float beta2, float epsilon, float decay, int64_t t) override {
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(t));
    const float root_c2 = std::sqrt(1.0f - std::pow(beta2, static_cast<float>(t)));
    cuda::LaunchAdam(n, w, g, m, s, lr, beta1, beta2, epsilon, decay, c1, root_c2, Stream(device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
  // The flag lives in mapped pinned host memory: the kernel sets it, the
  // host reads it once the stream is done.
  bool Unscale(Device& device, int64_t n, float* g, float factor) override {
    static int* flag = [] {
      int* host = nullptr;
      SPILL_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
      return host;
    }();
    int* on_device = nullptr;
    SPILL_CUDA_CHECK(cudaHostGetDevicePointer(&on_device, flag, 0));
    *flag = 0;
    cuda::LaunchUnscale(n, g, factor, on_device, Stream(device));
    SPILL_CUDA_CHECK_LAUNCH();
    SPILL_CUDA_CHECK(cudaStreamSynchronize(Stream(device)));
    return *flag == 0;
  }
};

const bool registered = RegisterSolverKernels(DeviceType::kCuda, new CudaSolverKernels());

}  // namespace
}  // namespace spill
