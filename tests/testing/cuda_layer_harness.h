// What the CUDA layer tests share: device copies of a layer harness's
// tensors that run the CUDA layer (over the whole batch, or over one slice
// of it as the executor cuts one), comparisons, the inputs both devices
// get, the algorithm trials, the test cases, and a fixture with one CUDA
// device per suite that skips, saying why, without a GPU (fails instead
// with SPILL_REQUIRE_GPU=1).
#ifndef SPILL_TESTS_TESTING_CUDA_LAYER_HARNESS_H_
#define SPILL_TESTS_TESTING_CUDA_LAYER_HARNESS_H_

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "framework/cuda/cuda_device.h"
#include "framework/graph/layer.h"
#include "tests/testing/layer_harness.h"

namespace spill {
namespace testing {

// Tolerance: for each tensor, max |cuda - cpu| <= tol * max(|cpu|), with
//   tol = 1e-4 in general: float32 sums of at most a few hundred terms of
//     magnitude <= 1 (inputs and parameters are uniform in [-1, 1)) that
//     differ only in summation order, or in libm vs CUDA powf/exp, stay
//     around 1e-6 relative to the largest magnitude, so 1e-4 leaves two
//     orders of margin while still catching any wrong index, window, sign or
//     scale (those err by O(1) relative);
//   tol = 1e-3 for cuDNN's FFT and Winograd convolution algorithms, which
//     compute in a transformed domain and round more.
constexpr double kTolerance = 1e-4;
constexpr double kTransformTolerance = 1e-3;

double ToleranceFor(const std::string& algorithm);

// Empty when `cuda` matches `cpu` within tol * max |cpu|; else the worst
// element. NaN anywhere in `cuda` fails.
std::string Compare(const std::vector<float>& cuda, const std::vector<float>& cpu, double tol);
bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b);

// Device copies of every tensor of a harness; the harness's host vectors are
// the staging area (Upload / Download copy all of them).
class DeviceTensors {
 public:
  DeviceTensors(CudaDevice& device, LayerHarness& h, const std::vector<Shape>& input_shapes);
  ~DeviceTensors();
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;

  void Upload();
  void Download();
  // One call of the layer: the whole batch when `slice` is, else the
  // slice's `images` images, every batch-major tensor a view of them (as
  // the executor cuts them). Waits for the device.
  void Forward(Phase phase, bool recompute, uint64_t seed, const std::vector<int>& algorithms = {},
               const BatchSlice& slice = {}, int64_t images = 0);
  void Backward(const std::vector<bool>& accumulate, const std::vector<int>& algorithms = {},
                const BatchSlice& slice = {}, int64_t images = 0);

 private:
  static void Allocate(const std::vector<std::vector<float>>& host, std::vector<float*>* device);
  void Copy(std::vector<std::vector<float>>& host, const std::vector<float*>& device, bool up);
  // `data` of `shape` as the call sees it: its slice when it is batch-major.
  Tensor View(const Shape& shape, float* data, const BatchSlice& slice, int64_t images) const;

  CudaDevice& device_;
  LayerHarness& h_;
  std::vector<Shape> input_shapes_;
  int64_t batch_ = 0;
  std::vector<float*> inputs_, outputs_, params_, aux_, input_grads_, output_grads_, param_grads_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

struct LayerCase {
  const char* name;
  const char* entry;
  std::vector<Shape> inputs;
  Phase phase = Phase::kTrain;
  bool quantize = false;  // inputs on a coarse grid: ties for max pooling
};

inline void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

// Every layer type in the configurations worth checking (cuda_layer_cases.cc).
const std::vector<LayerCase>& CudaLayerCases();

// The same reproducible inputs and parameters for both harnesses, made valid
// for the layer: labels in range, running variances positive, an embedding's
// ids whole numbers (most of them in its vocabulary).
void FillInputs(LayerHarness& h, bool quantize);
void FillRandom(std::vector<std::vector<float>>* tensors, uint64_t seed);
void FillValue(std::vector<std::vector<float>>* tensors, float value);

// Algorithm choices to try for a pass: trial t picks candidate
// min(t, count - 1) of each operation, so every candidate of every operation
// runs at least once. Returns the choices and the tolerance of each trial.
std::vector<std::pair<std::vector<int>, double>> Trials(const Layer& layer, Pass pass);
// " with <candidate names>" for a trial's choice.
std::string Describe(const Layer& layer, Pass pass, const std::vector<int>& choice);

// One CUDA device per test suite; every test skips, saying why, without one.
class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  static CudaDevice* device_;
  static std::string skip_reason_;
};

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_CUDA_LAYER_HARNESS_H_
