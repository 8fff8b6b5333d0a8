// The CUDA driver, runtime, cuDNN and cuBLAS versions a process runs with,
// against the headers spill was built with.
//
// A GPU machine assembles these libraries from several places (the driver
// from the host, the runtime and cuBLAS from a toolkit or pip wheels, cuDNN
// from a wheel), so they can disagree with each other and with the build.
// The rules, from the libraries' compatibility promises:
//   * a different major version than the build's headers (runtime, cuDNN,
//     cuBLAS), a cuDNN made for another CUDA major version, or a driver older
//     than the runtime's major version: an error - symbols or behaviour
//     differ, and what fails later fails far from the cause;
//   * an older minor version than the headers (or a driver older than the
//     runtime within one major version): a warning - the libraries promise
//     to run code built for older minors, not newer;
//   * anything newer within the same major version: fine.
// Reading the versions needs no GPU, so a machine without one still says
// which libraries it found.
#ifndef SPILL_FRAMEWORK_CUDA_CUDA_VERSIONS_H_
#define SPILL_FRAMEWORK_CUDA_CUDA_VERSIONS_H_

#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

// major.minor.patch; major 0 when unknown.
struct LibraryVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string ToString() const;
};

struct CudaLibraryVersions {
  LibraryVersion driver;    // the CUDA version the driver supports
  std::string driver_note;  // why no driver version, when there is none
  LibraryVersion runtime, runtime_built;
  LibraryVersion cudnn, cudnn_built;
  LibraryVersion cudnn_cuda;  // the CUDA runtime the loaded cuDNN was made for
  LibraryVersion cublas, cublas_built;
};

// What the loaded libraries report, and what the headers said at build time.
CudaLibraryVersions ReadCudaLibraryVersions();

// One line: "driver 13.0, runtime 13.0.0 (built with 13.0.0), cuDNN ...".
std::string DescribeCudaLibraries(const CudaLibraryVersions& v);

// The rules above: an error naming every mismatch that breaks compatibility;
// `warnings` (may be null) receives the ones that only might.
Status CheckCudaLibraries(const CudaLibraryVersions& v, std::vector<std::string>* warnings);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_CUDA_VERSIONS_H_
