// Checks for CUDA, cuBLAS and cuDNN calls. A failing call aborts with the
// call, the file, the line and the library's own description - these are
// internal invariants (a bad launch, a wrong argument). Conditions a user can
// cause, such as running out of device memory, are returned as a Status by
// the code that expects them.
#ifndef SPILL_FRAMEWORK_CUDA_CUDA_CHECK_H_
#define SPILL_FRAMEWORK_CUDA_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace spill {
namespace cuda {

[[noreturn]] void Fail(const char* library, const char* call, const char* message, const char* file,
                       int line);
const char* CublasStatusName(cublasStatus_t status);

}  // namespace cuda
}  // namespace spill

#define SPILL_CUDA_CHECK(call)                                                            \
  do {                                                                                    \
    cudaError_t spill_cuda_error_ = (call);                                               \
    if (spill_cuda_error_ != cudaSuccess) {                                               \
      ::spill::cuda::Fail("CUDA", #call, cudaGetErrorString(spill_cuda_error_), __FILE__, \
                          __LINE__);                                                      \
    }                                                                                     \
  } while (0)

#define SPILL_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                            \
    cublasStatus_t spill_cublas_status_ = (call);                                                 \
    if (spill_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                          \
      ::spill::cuda::Fail("cuBLAS", #call, ::spill::cuda::CublasStatusName(spill_cublas_status_), \
                          __FILE__, __LINE__);                                                    \
    }                                                                                             \
  } while (0)

#define SPILL_CUDNN_CHECK(call)                                                               \
  do {                                                                                        \
    cudnnStatus_t spill_cudnn_status_ = (call);                                               \
    if (spill_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                        \
      ::spill::cuda::Fail("cuDNN", #call, cudnnGetErrorString(spill_cudnn_status_), __FILE__, \
                          __LINE__);                                                          \
    }                                                                                         \
  } while (0)

// After a kernel launch: launch configuration errors surface here.
#define SPILL_CUDA_CHECK_LAUNCH() SPILL_CUDA_CHECK(cudaGetLastError())

#endif  // SPILL_FRAMEWORK_CUDA_CUDA_CHECK_H_
