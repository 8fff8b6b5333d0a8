#include "framework/cuda/cuda_versions.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <library_types.h>

namespace spill {
namespace {

// CUDA encodes its versions as 1000 * major + 10 * minor.
LibraryVersion FromCudaNumber(int number) {
  LibraryVersion v;
  v.major = number / 1000;
  v.minor = (number % 1000) / 10;
  return v;
}

bool OlderMinor(const LibraryVersion& loaded, const LibraryVersion& built) {
  return loaded.major == built.major &&
         (loaded.minor < built.minor ||
          (loaded.minor == built.minor && loaded.patch < built.patch));
}

// Appends the problems of one library to `errors` and `warnings`.
void CheckAgainstBuild(const char* name, const LibraryVersion& loaded, const LibraryVersion& built,
                       std::vector<std::string>* errors, std::vector<std::string>* warnings) {
  if (loaded.major == 0) {
    errors->push_back(std::string(name) + ": no version could be read");
  } else if (loaded.major != built.major) {
    errors->push_back(std::string(name) + " " + loaded.ToString() +
                      " is loaded, but spill was built with " + built.ToString() +
                      " (major versions differ)");
  } else if (OlderMinor(loaded, built)) {
    warnings->push_back(std::string(name) + " " + loaded.ToString() + " is older than the " +
                        built.ToString() + " spill was built with; a newer one is safer");
  }
}

}  // namespace

std::string LibraryVersion::ToString() const {
  if (major == 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

CudaLibraryVersions ReadCudaLibraryVersions() {
  CudaLibraryVersions v;
  int number = 0;
  const cudaError_t driver_status = cudaDriverGetVersion(&number);
  if (driver_status != cudaSuccess) {
    v.driver_note = cudaGetErrorString(driver_status);
    cudaGetLastError();
  } else if (number == 0) {
    v.driver_note = "libcuda.so not found";
  } else {
    v.driver = FromCudaNumber(number);
  }
  if (cudaRuntimeGetVersion(&number) == cudaSuccess) v.runtime = FromCudaNumber(number);
  v.runtime_built = FromCudaNumber(CUDART_VERSION);
  cudnnGetProperty(MAJOR_VERSION, &v.cudnn.major);
  cudnnGetProperty(MINOR_VERSION, &v.cudnn.minor);
  cudnnGetProperty(PATCH_LEVEL, &v.cudnn.patch);
  v.cudnn_built = {CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL};
  v.cudnn_cuda = FromCudaNumber(static_cast<int>(cudnnGetCudartVersion()));
  cublasGetProperty(MAJOR_VERSION, &v.cublas.major);
  cublasGetProperty(MINOR_VERSION, &v.cublas.minor);
  cublasGetProperty(PATCH_LEVEL, &v.cublas.patch);
  v.cublas_built = {CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH};
  return v;
}

std::string DescribeCudaLibraries(const CudaLibraryVersions& v) {
  const std::string driver =
      v.driver.major == 0 ? "none (" + v.driver_note + ")"
                          : std::to_string(v.driver.major) + "." + std::to_string(v.driver.minor);
  return "driver " + driver + ", runtime " + v.runtime.ToString() + " (built with " +
         v.runtime_built.ToString() + "), cuDNN " + v.cudnn.ToString() + " for CUDA " +
         std::to_string(v.cudnn_cuda.major) + "." + std::to_string(v.cudnn_cuda.minor) +
         " (built with " + v.cudnn_built.ToString() + "), cuBLAS " + v.cublas.ToString() +
         " (built with " + v.cublas_built.ToString() + ")";
}

Status CheckCudaLibraries(const CudaLibraryVersions& v, std::vector<std::string>* warnings) {
  std::vector<std::string> errors, notes;
  CheckAgainstBuild("the CUDA runtime", v.runtime, v.runtime_built, &errors, &notes);
  CheckAgainstBuild("cuDNN", v.cudnn, v.cudnn_built, &errors, &notes);
  CheckAgainstBuild("cuBLAS", v.cublas, v.cublas_built, &errors, &notes);
  if (v.cudnn.major != 0 && v.runtime.major != 0 && v.cudnn_cuda.major != v.runtime.major) {
    errors.push_back("cuDNN " + v.cudnn.ToString() + " was made for CUDA " +
                     std::to_string(v.cudnn_cuda.major) + ", the CUDA runtime is " +
                     v.runtime.ToString() + " (install the cuDNN for CUDA " +
                     std::to_string(v.runtime.major) + ", e.g. the nvidia-cudnn-cu" +
                     std::to_string(v.runtime.major) + " wheel)");
  }
  if (v.driver.major != 0 && v.runtime.major != 0) {
    if (v.driver.major < v.runtime.major) {
      errors.push_back("the driver supports CUDA " + std::to_string(v.driver.major) + "." +
                       std::to_string(v.driver.minor) + ", older than the CUDA runtime " +
                       v.runtime.ToString() + " (update the driver)");
    } else if (v.driver.major == v.runtime.major && v.driver.minor < v.runtime.minor) {
      notes.push_back("the driver supports CUDA " + std::to_string(v.driver.major) + "." +
                      std::to_string(v.driver.minor) + ", older than the CUDA runtime " +
                      v.runtime.ToString() + " (minor-version compatibility: no PTX JIT)");
    }
  }
  if (warnings != nullptr) *warnings = notes;
  if (errors.empty()) return Status::Ok();
  std::string message = "incompatible CUDA libraries: ";
  for (size_t i = 0; i < errors.size(); ++i) message += (i ? "; " : "") + errors[i];
  return Unimplemented(message + " [" + DescribeCudaLibraries(v) +
                       "; the library path decides which are loaded: LD_LIBRARY_PATH]");
}

}  // namespace spill
