#include "tests/testing/gpu_required.h"

#include <cstdlib>
#include <cstring>

#include "framework/cuda/cuda_device.h"

namespace spill {
namespace testing {

bool GpuRequired() {
  const char* value = std::getenv("SPILL_REQUIRE_GPU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::string GpuRequiredFailure(const std::string& why) {
  return "SPILL_REQUIRE_GPU=1, but no usable GPU: " + why +
         "\n  libraries seen: " + CudaLibrariesSeen();
}

}  // namespace testing
}  // namespace spill
