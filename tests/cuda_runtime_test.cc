// The memory runtime on the GPU: copies on the copy stream are ordered
// against the compute stream by events; every memory mode trains
// bit-identically to the baseline on the CUDA device too, at a roomy budget
// and at the smallest that runs - under every allocator, parameter
// placement and slicing of the batch (streamed steps), with an algorithm
// pinned; the plan computed from shapes equals the run on the GPU; and GPU
// training follows CPU training.
//
// The convolution algorithms are chosen by the memory_optimal policy (the
// least workspace), so every mode runs the same deterministic cuDNN
// algorithms and bit equality between modes is a fair demand.
//
// Without a usable GPU every test skips, saying why (and fails instead with
// SPILL_REQUIRE_GPU=1, as tools/ci/gpu_check.sh runs it). The checks of the
// library versions need no GPU and always run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/cuda/cuda_device.h"
#include "framework/cuda/cuda_versions.h"
#include "framework/cuda/memcheck_annotations.h"
#include "framework/graph/net.h"
#include "framework/graph/precision.h"
#include "layers/convolution_layer.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "tests/testing/equivalence.h"
#include "tests/testing/gpu_required.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

#define SKIP_WITHOUT_GPU()                                \
  do {                                                    \
    std::string why;                                      \
    if (!CudaAvailable(&why)) SPILL_GPU_UNAVAILABLE(why); \
  } while (0)

// Every mode but the costly ones (memory/memory_options.h), which train or
// solve for each budget the smallest-budget searches below probe.
std::vector<std::string> Modes() {
  std::vector<std::string> modes;
  for (const MemoryMode& m : MemoryModes()) {
    if (!m.costly) modes.push_back(m.name);
  }
  return modes;
}

// One device for the many training runs: making a CUDA device (streams,
// cuBLAS and cuDNN handles) for each would take much of their time. Called
// after SKIP_WITHOUT_GPU.
Device* SharedDevice() {
  static CudaDevice* device = [] {
    auto created = CudaDevice::Create(0);
    SPILL_CHECK(created.ok()) << created.status().ToString();
    return std::move(created).value().release();
  }();
  return device;
}

testing::SyntheticRun GpuRun(const std::string& mode) {
  testing::SyntheticRun run;
  run.device = "cuda";
  run.use_device = SharedDevice();
  run.batch = 4;
  run.steps = 3;
  run.learning_rate = 0.05f;
  SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok());
  run.memory.device_budget = 256 << 20;
  run.memory.host_budget = 64 << 20;  // page-locked as used; these networks use far less
  run.memory.poison_freed = true;
  run.memory.workspace = *ParseWorkspacePolicy("memory_optimal");
  // The cost-aware planners (greedy, memonger) weigh every convolution
  // algorithm's time. Measured times differ from one timing to the next, and
  // the plan these tests compare with the run is made from shapes alone, so
  // both keep the algorithms' estimated times. (Calibration itself:
  // cuda_layers_test.)
  run.calibrate = false;
  // Offload and place by mobility even these small maps.
  SPILL_CHECK(run.memory.settings.Set("min_offload", "0").ok());
  return run;
}

size_t SmallestBudget(const NetSpec& spec, const testing::SyntheticRun& run) {
  auto net = testing::BuildTrainingNet(spec, testing::NetOptionsOf(run, DeviceType::kCuda));
  SPILL_CHECK(net.ok()) << net.status().ToString();
  auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
  SPILL_CHECK(minimum.ok()) << minimum.status().ToString();
  return *minimum;
}

// A memory configuration of the GPU equivalence tests: every allocator,
// parameter placement and slicing of the batch (streamed steps included).
struct GpuVariant {
  const char* name;
  const char* allocator;
  const char* params = "device";  // where parameters, gradients and solver state live
  bool update_on_host = false;
  int64_t batch_chunk = kBatchChunkOff;  // images per slice of the batch
  // bf16: activations in 16 bits, every step that can in slices
  // (NetOptions::slice_copies_from 0), against the bf16 baseline.
  Precision precision = Precision::kFp32;
};
constexpr GpuVariant kFirstFit = {"first_fit", "first_fit"};
constexpr GpuVariant kGpuVariants[] = {
    kFirstFit,
    {"best_fit", "best_fit"},
    {"static", "static"},
    {"gtbm", "gtbm"},
    {"gtbm_soft", "gtbm_soft"},
    {"caching", "caching"},
    {"va", "va"},
    {"params_host", "first_fit", "host"},
    {"params_host_update_host", "first_fit", "host", true},
    {"params_above_64KiB", "best_fit", "above:64KiB"},
    // Slices of one image and of three (3 + 1 of the batch of 4); `auto`
    // slices the steps that stream, which at the smallest budgets some do.
    {"chunk_1", "first_fit", "device", false, 1},
    {"chunk_3", "best_fit", "device", false, 3},
    {"chunk_auto", "first_fit", "device", false, kBatchChunkAuto},
    {"bf16", "first_fit", "device", false, kBatchChunkOff, Precision::kBf16},
    {"bf16_params_host", "best_fit", "host", true, kBatchChunkOff, Precision::kBf16},
};

// The cuDNN algorithm the equivalence tests pin: deterministic and needing
// no workspace. A pinned algorithm also makes every layer compute image by
// image (BatchSlice::in_image_order), so slices of the batch give the bits
// of the whole batch.
constexpr char kPinned[] = "pin:cudnn_fwd_implicit_gemm";

testing::SyntheticRun PinnedRun(const std::string& mode, const GpuVariant& variant) {
  testing::SyntheticRun run = GpuRun(mode);
  run.memory.workspace = *ParseWorkspacePolicy(kPinned);
  run.memory.allocator = variant.allocator;
  run.memory.params = *ParseParamPlacement(variant.params);
  run.memory.update_on_host = variant.update_on_host;
  run.memory.batch_chunk = variant.batch_chunk;
  run.precision = variant.precision;
  if (variant.precision != Precision::kFp32) run.slice_copies_from = 0;
  // The GPU's mapping granularity.
  SPILL_CHECK(run.memory.settings.Set("va_chunk", "2MiB").ok());
  const std::string allocator = variant.allocator;
  run.memory.check_allocator = allocator == "gtbm" || allocator == "caching";
  run.memory.record_events = true;
  return run;
}

// Host -> device on the copy stream, device -> device on the compute stream
// after an event, device -> host on the copy stream after another: the data
// arrives intact only if each queue waits for the other's event.
TEST(CudaCopyTest, EventsOrderCopiesAcrossStreams) {
  SKIP_WITHOUT_GPU();
  auto created = CudaDevice::Create(0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CudaDevice& device = **created;
  const size_t bytes = 64 << 20;
  auto dev = device.ReserveDeviceRegion(2 * bytes);
  auto host = device.ReserveHostRegion(2 * bytes);
  ASSERT_TRUE(dev.ok() && host.ok());
  ASSERT_TRUE(device.EnsureHostPinned(*host, 2 * bytes).ok());
  char* d = static_cast<char*>(*dev);
  char* h = static_cast<char*>(*host);
  for (size_t i = 0; i < bytes; ++i) h[i] = static_cast<char>(i * 131 + 7);
  std::memset(h + bytes, 0, bytes);

  device.CopyAsync(d, h, bytes, CopyKind::kHostToDevice, device.host_to_device_queue());
  device.compute_queue().Wait(device.host_to_device_queue().Record());
  device.CopyAsync(d + bytes, d, bytes, CopyKind::kDeviceToDevice, device.compute_queue());
  device.device_to_host_queue().Wait(device.compute_queue().Record());
  device.CopyAsync(h + bytes, d + bytes, bytes, CopyKind::kDeviceToHost,
                   device.device_to_host_queue());
  std::shared_ptr<Event> done = device.device_to_host_queue().Record();
  done->Synchronize();
  EXPECT_TRUE(done->IsComplete());
  EXPECT_EQ(std::memcmp(h, h + bytes, bytes), 0);
  EXPECT_EQ(device.bytes_copied(CopyKind::kHostToDevice), bytes);
  EXPECT_EQ(device.bytes_copied(CopyKind::kDeviceToHost), bytes);
  device.ReleaseHostRegion(*host);
  device.ReleaseDeviceRegion(*dev);
}

TEST(CudaCopyTest, MemsetAndSynchronousCopies) {
  SKIP_WITHOUT_GPU();
  auto created = CudaDevice::Create(0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CudaDevice& device = **created;
  auto dev = device.ReserveDeviceRegion(1 << 20);
  ASSERT_TRUE(dev.ok());
  device.MemsetAsync(*dev, 0xFF, 1 << 20, device.compute_queue());
  device.compute_queue().Synchronize();
  std::vector<unsigned char> back(1 << 20, 0);
  device.CopySync(back.data(), *dev, back.size(), CopyKind::kDeviceToHost);
  for (unsigned char b : back) ASSERT_EQ(b, 0xFF);
  device.ReleaseDeviceRegion(*dev);
}

// Host memory is page-locked chunk by chunk; a copy whose host side crosses
// from one chunk into the next arrives intact in both directions.
TEST(CudaCopyTest, CopiesAcrossPinnedChunks) {
  SKIP_WITHOUT_GPU();
  auto created = CudaDevice::Create(0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CudaDevice& device = **created;
  const size_t region = kHostPinChunkBytes + (64 << 20);
  const size_t bytes = 16 << 20;
  const size_t start = kHostPinChunkBytes - bytes / 2;  // straddles the boundary
  auto host = device.ReserveHostRegion(region);
  auto dev = device.ReserveDeviceRegion(bytes);
  ASSERT_TRUE(host.ok() && dev.ok());
  ASSERT_TRUE(device.EnsureHostPinned(*host, start + bytes).ok());
  char* h = static_cast<char*>(*host);
  for (size_t i = 0; i < bytes; ++i) h[start + i] = static_cast<char>(i * 37 + 11);
  device.CopyAsync(*dev, h + start, bytes, CopyKind::kHostToDevice, device.host_to_device_queue());
  device.host_to_device_queue().Synchronize();
  std::vector<char> expected(h + start, h + start + bytes);
  std::memset(h + start, 0, bytes);
  device.CopyAsync(h + start, *dev, bytes, CopyKind::kDeviceToHost, device.device_to_host_queue());
  device.device_to_host_queue().Synchronize();
  EXPECT_EQ(std::memcmp(h + start, expected.data(), bytes), 0);
  device.ReleaseDeviceRegion(*dev);
  device.ReleaseHostRegion(*host);
}

// Pool annotations for compute-sanitizer: two tensors back to back in the
// device region, each annotated with its exact size, and a ReLU from the
// first (n + 1 floats) into the second (n floats) over n elements. With
// SPILL_MEMCHECK_PLANT=1 the ReLU runs over n + 1: it reads only what it may
// but writes one float past the output, into the rounding slack after it -
// inside the cudaMalloc region, so only the annotations can make memcheck
// report that write. tools/ci/gpu_check.sh sanitize runs this under
// compute-sanitizer and expects the report. Without a sanitizer the planted
// write is harmless (it lands in the region's slack).
TEST(CudaMemcheckTest, PoolAnnotationsBoundEachTensor) {
  SKIP_WITHOUT_GPU();
  auto created = CudaDevice::Create(0);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CudaDevice& device = **created;
  const int64_t n = 1000;  // 4000 bytes of output, in a 4096-byte block
  const size_t block = 4096;
  auto region = device.ReserveDeviceRegion(2 * block);
  ASSERT_TRUE(region.ok());
  float* x = static_cast<float*>(*region);
  float* y = reinterpret_cast<float*>(static_cast<char*>(*region) + block);
  device.AnnotateAllocation(x, (n + 1) * sizeof(float));
  device.AnnotateAllocation(y, n * sizeof(float));
  device.MemsetAsync(x, 0, (n + 1) * sizeof(float), device.compute_queue());
  const char* plant = std::getenv("SPILL_MEMCHECK_PLANT");
  const bool planted = plant != nullptr && std::string(plant) == "1";
  if (planted) {
    std::printf("planting a write of one float past a %ld-float tensor (pool annotations %s)\n",
                static_cast<long>(n), cuda::MemcheckAnnotationsEnabled() ? "on" : "off");
  }
  cuda::LaunchReluForward(n + (planted ? 1 : 0), x, y, 0.0f, device.compute_stream());
  device.compute_queue().Synchronize();
  device.AnnotateFree(y);
  device.AnnotateFree(x);
  device.ReleaseDeviceRegion(*region);
}

// The version rules, on synthetic versions: no GPU needed.
CudaLibraryVersions Matching() {
  CudaLibraryVersions v;
  v.driver = {13, 0, 0};
  v.runtime = v.runtime_built = {13, 0, 0};
  v.cudnn = v.cudnn_built = {9, 19, 0};
  v.cudnn_cuda = {13, 0, 0};
  v.cublas = v.cublas_built = {13, 1, 0};
  return v;
}

TEST(CudaVersionsTest, MatchingAndNewerMinorVersionsPass) {
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckCudaLibraries(Matching(), &warnings).ok());
  EXPECT_TRUE(warnings.empty());
  CudaLibraryVersions newer = Matching();
  newer.cudnn = {9, 20, 1};
  newer.cublas = {13, 2, 0};
  newer.driver = {13, 1, 0};
  EXPECT_TRUE(CheckCudaLibraries(newer, &warnings).ok());
  EXPECT_TRUE(warnings.empty());
}

TEST(CudaVersionsTest, OlderMinorVersionsWarn) {
  CudaLibraryVersions v = Matching();
  v.cudnn = {9, 13, 0};
  v.runtime = {13, 0, 0};
  v.driver = {13, 0, 0};
  v.runtime_built = {13, 0, 0};
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckCudaLibraries(v, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cuDNN 9.13.0"), std::string::npos) << warnings[0];
}

TEST(CudaVersionsTest, MajorMismatchesAreErrors) {
  CudaLibraryVersions v = Matching();
  v.cudnn = {8, 9, 7};
  Status status = CheckCudaLibraries(v, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cuDNN 8.9.7 is loaded, but spill was built with 9.19.0"),
            std::string::npos)
      << status.message();
  v = Matching();
  v.cudnn_cuda = {12, 9, 0};  // a cuDNN wheel for CUDA 12 beside the CUDA 13 runtime
  status = CheckCudaLibraries(v, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("made for CUDA 12"), std::string::npos) << status.message();
  v = Matching();
  v.driver = {12, 8, 0};
  status = CheckCudaLibraries(v, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("update the driver"), std::string::npos) << status.message();
  v = Matching();
  v.cublas = {12, 9, 1};
  status = CheckCudaLibraries(v, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cuBLAS 12.9.1"), std::string::npos) << status.message();
  // Every line of the report names all four.
  for (const char* name : {"driver", "runtime", "cuDNN", "cuBLAS"}) {
    EXPECT_NE(status.message().find(name), std::string::npos) << name;
  }
}

// The libraries this binary loaded report versions, GPU or not, and they are
// the ones it was built for (as on any machine set up correctly).
TEST(CudaVersionsTest, LoadedLibrariesReportTheirVersions) {
  const CudaLibraryVersions v = ReadCudaLibraryVersions();
  std::printf("%s\n", DescribeCudaLibraries(v).c_str());
  EXPECT_EQ(v.runtime.major, v.runtime_built.major);
  EXPECT_EQ(v.cudnn.major, v.cudnn_built.major);
  EXPECT_EQ(v.cublas.major, v.cublas_built.major);
  EXPECT_EQ(v.cudnn_cuda.major, v.runtime.major);
}

// Trains `spec` as `gpu` on the GPU and as the same run on the CPU (with the
// CPU's own workspace policy): every loss within `tol` of the CPU's, and
// every weight within `tol` of its tensor's largest magnitude (no less than
// `floor`).
void ExpectGpuFollowsCpu(const NetSpec& spec, const testing::SyntheticRun& gpu, double tol,
                         double floor) {
  testing::SyntheticRun cpu = gpu;
  cpu.device = "cpu";
  cpu.use_device = nullptr;
  cpu.memory.workspace = *ParseWorkspacePolicy("dynamic");
  auto on_gpu = testing::TrainSynthetic(spec, gpu);
  auto on_cpu = testing::TrainSynthetic(spec, cpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().ToString();
  for (size_t i = 0; i < on_cpu->losses.size(); ++i) {
    ASSERT_TRUE(std::isfinite(on_gpu->losses[i])) << "step " << i;
    EXPECT_NEAR(on_gpu->losses[i], on_cpu->losses[i], tol * std::fabs(on_cpu->losses[i]))
        << "step " << i;
  }
  ASSERT_EQ(on_gpu->params.size(), on_cpu->params.size());
  for (size_t p = 0; p < on_cpu->params.size(); ++p) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < on_cpu->params[p].size(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(on_cpu->params[p][i])));
      worst = std::max(worst,
                       std::fabs(static_cast<double>(on_gpu->params[p][i]) - on_cpu->params[p][i]));
    }
    EXPECT_LE(worst, tol * std::max(scale, floor)) << "parameter " << p;
  }
}

class CudaModeTest : public ::testing::TestWithParam<testing::Network> {};

TEST_P(CudaModeTest, EveryModeTrainsBitIdenticallyToBaseline) {
  SKIP_WITHOUT_GPU();
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto baseline = testing::TrainSynthetic(spec, GpuRun("baseline"));
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  for (const std::string& mode : Modes()) {
    for (bool tight : {false, true}) {
      testing::SyntheticRun run = GpuRun(mode);
      if (tight) run.memory.device_budget = SmallestBudget(spec, run);
      auto trace = testing::TrainSynthetic(spec, run);
      const std::string what = mode + (tight ? " at its smallest budget" : "");
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      ASSERT_EQ(trace->losses.size(), baseline->losses.size());
      for (size_t i = 0; i < trace->losses.size(); ++i) {
        EXPECT_EQ(trace->losses[i], baseline->losses[i]) << what << ", step " << i;
      }
      EXPECT_TRUE(testing::BitEqual(trace->params, baseline->params)) << what;
    }
  }
}

// The plan, made from shapes alone, equals the peak the GPU run measures.
TEST_P(CudaModeTest, PlannedPeakEqualsMeasuredPeak) {
  SKIP_WITHOUT_GPU();
  NetSpec spec = testing::MustParse(GetParam().yaml);
  for (const std::string& mode : Modes()) {
    testing::SyntheticRun run = GpuRun(mode);
    run.memory.device_budget = SmallestBudget(spec, run);
    auto measured = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(measured.ok()) << mode << ": " << measured.status().ToString();
    auto net = testing::BuildTrainingNet(spec, run.batch, DeviceType::kCuda);
    ASSERT_TRUE(net.ok());
    auto plan = Plan((*net)->view(), run.memory);
    ASSERT_TRUE(plan.ok() && plan->fits) << mode;
    EXPECT_EQ(plan->peak, measured->log.peak) << mode;
    ASSERT_EQ(plan->log.steps.size(), measured->log.steps.size());
    for (size_t s = 0; s < plan->log.steps.size(); ++s) {
      EXPECT_EQ(plan->log.steps[s].in_use, measured->log.steps[s].in_use)
          << mode << " step " << s + 1;
    }
  }
}

// The same network, weights and batches on GPU and CPU give the same losses
// and weights up to float32 rounding in a different summation order. A
// parameter whose gradient vanishes in exact arithmetic (a bias before batch
// norm) moves by rounding alone, so the bound has a floor: 1e-4 of 1e-4.
TEST_P(CudaModeTest, GpuTrainingFollowsCpuTraining) {
  SKIP_WITHOUT_GPU();
  NetSpec spec = testing::MustParse(GetParam().yaml);
  ExpectGpuFollowsCpu(spec, GpuRun("superneurons"), 1e-4, 1e-4);
}

// Layer norm, the elementwise activations, space-to-depth and dropout
// between convolutions, for the 16-bit checks below.
constexpr char kNormsAndActivations[] = R"(
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: conv1, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: ln, type: layer_norm}
  - {name: gelu, type: gelu}
  - {name: conv2, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: s2d, type: space_to_depth}
  - {name: silu, type: silu}
  - {name: hard_swish, type: hard_swish}
  - {name: pool, type: global_avg_pool}
  - {name: drop, type: dropout, ratio: 0.25}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// Patches as tokens with positions, attention between layer norm and
// projections, and a residual add, for the 16-bit checks below.
constexpr char kAttention[] = R"(
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: patches, type: convolution, filters: 8, kernel: 4, stride: 4}
  - {name: tokens, type: tokens}
  - {name: pos, type: positions, length: 4}
  - {name: ln, type: layer_norm}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: attn, type: attention, heads: 2}
  - {name: proj, type: convolution, filters: 8, kernel: 1}
  - {name: add, type: add, inputs: [proj, pos]}
  - {name: pool, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// Shifted window attention over a 4x4 map, for the 16-bit checks below.
constexpr char kWindowAttention[] = R"(
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, type: convolution, filters: 4, kernel: 2, stride: 2}
  - {name: qkv, type: convolution, filters: 12, kernel: 1}
  - {name: attn, type: window_attention, heads: 2, window: 2, shift: 1}
  - {name: proj, type: convolution, filters: 4, kernel: 1}
  - {name: pool, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// In bf16 and fp16 a convolution between 16-bit tensors hands them to cuDNN
// as they are: no float32 copies of its activations in its workspace, only
// its 16-bit weights and gradients beside cuDNN's own. A network's first
// convolution rounds the float32 image into a 16-bit copy of its own (the
// image, not its far larger output). Fully connected layers (cuBLAS), batch
// and layer norm, the activations, dropout, addition, concatenation,
// pooling, tokens, positions and attention take 16-bit tensors as they are
// too. Shapes alone: it holds without a GPU.
TEST(CudaPrecisionTest, LayersComputeOnTheirSixteenBitTensors) {
  const std::set<std::string> sixteen_bit_types = {"convolution",
                                                   "fully_connected",
                                                   "batch_norm",
                                                   "layer_norm",
                                                   "relu",
                                                   "gelu",
                                                   "silu",
                                                   "hard_swish",
                                                   "dropout",
                                                   "add",
                                                   "concat",
                                                   "max_pool",
                                                   "avg_pool",
                                                   "global_avg_pool",
                                                   "attention",
                                                   "tokens",
                                                   "positions",
                                                   "space_to_depth",
                                                   "window_attention"};
  for (Precision precision : {Precision::kBf16, Precision::kFp16}) {
    SCOPED_TRACE(PrecisionName(precision));
    std::map<std::string, int> sixteen;
    int on_image = 0;
    for (const char* yaml : {testing::kResNet, testing::kInception, kNormsAndActivations,
                             kAttention, kWindowAttention}) {
      auto net = testing::BuildTrainingNet(testing::MustParse(yaml), 4, DeviceType::kCuda,
                                           /*blocked_layouts=*/false, precision);
      ASSERT_TRUE(net.ok()) << net.status().ToString();
      for (int id = 0; id < (*net)->num_layers(); ++id) {
        const Layer& layer = (*net)->layer(id);
        const std::string type = layer.type();
        if (!sixteen_bit_types.count(type)) continue;
        bool in_16 = true;
        const int inputs = static_cast<int>((*net)->schedule().layers[id].inputs.size());
        for (int i = 0; i < inputs; ++i) {
          in_16 = in_16 && layer.input_dtype(i) == ActivationType(precision);
        }
        ASSERT_EQ(layer.output_dtype(0), ActivationType(precision)) << layer.name();
        const bool image = type == "convolution" && !in_16;
        EXPECT_EQ(layer.computes_16_bit(Pass::kForward), in_16 || image) << layer.name();
        EXPECT_EQ(layer.computes_16_bit(Pass::kBackward), in_16 || image) << layer.name();
        if (!in_16 && !image) continue;
        sixteen[type]++;
        EXPECT_EQ((*net)->ConversionBytes(id, Pass::kForward, 4), 0u) << layer.name();
        EXPECT_EQ((*net)->ConversionBytes(id, Pass::kBackward, 4), 0u) << layer.name();
        if (type != "convolution") continue;
        const auto& g = static_cast<const ConvolutionLayer&>(layer).geometry();
        const size_t weights = static_cast<size_t>(g.filters * g.col_rows());
        const size_t input = image ? static_cast<size_t>(4 * g.channels * g.in_plane()) : 0;
        on_image += image;
        EXPECT_GE(layer.workspace_bytes(Pass::kForward), (weights + input) * 2) << layer.name();
        // Backward: the 16-bit weights and input, the staged and the widened gradient.
        EXPECT_GE(layer.workspace_bytes(Pass::kBackward), weights * 8 + input * 2) << layer.name();
      }
    }
    for (const std::string& type : sixteen_bit_types) {
      if (type != "max_pool") EXPECT_GT(sixteen[type], 0) << type;
    }
    EXPECT_EQ(on_image, 5);  // the first of each network
  }
}

// The same network, weights and batches in bf16 on the GPU (cuDNN's 16-bit
// convolutions, the 16-bit kernels, the rest on converted copies) and on
// the CPU: the losses
// and weights agree within bfloat16 rounding (8 bits of mantissa, 0.4 %),
// which a wrong or missing gradient would exceed by far.
class CudaPrecisionNetworkTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaPrecisionNetworkTest, Bf16GpuTrainingFollowsCpuBf16Training) {
  SKIP_WITHOUT_GPU();
  const NetSpec spec = testing::MustParse(GetParam());
  testing::SyntheticRun gpu = GpuRun("baseline");
  gpu.precision = Precision::kBf16;
  ExpectGpuFollowsCpu(spec, gpu, 3e-2, 1e-2);
}

std::string PrecisionNetworkName(const ::testing::TestParamInfo<const char*>& info) {
  const char* names[] = {"resnet", "inception", "norms_and_activations", "attention",
                         "window_attention"};
  return names[info.index];
}

INSTANTIATE_TEST_SUITE_P(Networks, CudaPrecisionNetworkTest,
                         ::testing::Values(testing::kResNet, testing::kInception,
                                           kNormsAndActivations, kAttention, kWindowAttention),
                         PrecisionNetworkName);

// Every variant, in every mode at a roomy budget and at the smallest that
// runs, trains bit-identically to the pinned baseline (first fit, whole
// batch) and as planned, event by event and offset by offset. One network
// with forks and joins keeps the GPU check's test part within its time.
class CudaVariantTest : public ::testing::TestWithParam<GpuVariant> {};

TEST_P(CudaVariantTest, EveryModeTrainsBitIdenticallyAndAsPlanned) {
  SKIP_WITHOUT_GPU();
  const GpuVariant& variant = GetParam();
  NetSpec spec = testing::MustParse(testing::kResNet);
  GpuVariant reference = kFirstFit;
  reference.precision = variant.precision;
  auto baseline = testing::TrainSynthetic(spec, PinnedRun("baseline", reference));
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  for (const std::string& mode : Modes()) {
    for (bool tight : {false, true}) {
      const std::string what = std::string(variant.name) + ", " + mode + (tight ? " tight" : "");
      testing::SyntheticRun run = PinnedRun(mode, variant);
      if (tight) run.memory.device_budget = SmallestBudget(spec, run);
      auto trace = testing::TrainSynthetic(spec, run);
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      testing::ExpectBitIdentical(*baseline, *trace, what);
      testing::ExpectRunAsPlanned(spec, run, *trace, what, DeviceType::kCuda);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CudaVariantTest, ::testing::ValuesIn(kGpuVariants),
                         [](const ::testing::TestParamInfo<GpuVariant>& i) {
                           return std::string(i.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(Networks, CudaModeTest, ::testing::ValuesIn(testing::CudaNetworks()),
                         [](const ::testing::TestParamInfo<testing::Network>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace spill
