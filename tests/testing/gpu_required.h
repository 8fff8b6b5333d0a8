// SPILL_REQUIRE_GPU=1 turns a skipped GPU test into a failure.
//
// Without a usable GPU the CUDA tests skip, saying why, and the binary exits
// 0 - right on a machine that has none, but on a GPU machine whose driver or
// libraries do not fit it would report a vacuous success. tools/ci/gpu_check.sh
// sets the variable, so there a test that cannot reach the GPU fails and
// prints the driver, runtime, cuDNN and cuBLAS versions it saw.
#ifndef SPILL_TESTS_TESTING_GPU_REQUIRED_H_
#define SPILL_TESTS_TESTING_GPU_REQUIRED_H_

#include <gtest/gtest.h>

#include <string>

namespace spill {
namespace testing {

// True when SPILL_REQUIRE_GPU is set to 1.
bool GpuRequired();

// The failure message for a GPU test that found no usable GPU (`why`).
std::string GpuRequiredFailure(const std::string& why);

}  // namespace testing
}  // namespace spill

// In a test body or SetUp: skips with `why`, or fails when a GPU is required.
#define SPILL_GPU_UNAVAILABLE(why)                         \
  do {                                                     \
    if (::spill::testing::GpuRequired()) {                 \
      FAIL() << ::spill::testing::GpuRequiredFailure(why); \
    } else {                                               \
      GTEST_SKIP() << (why);                               \
    }                                                      \
  } while (0)

#endif  // SPILL_TESTS_TESTING_GPU_REQUIRED_H_
