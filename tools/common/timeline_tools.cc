#include "tools/common/timeline_tools.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "framework/base/clock.h"
#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/device/device_registry.h"
#include "framework/graph/initializer.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_layouts.h"
#include "layers/cpu/conv_timer.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/matmul_dnnl.h"
#include "memory/planners/planner_settings.h"

namespace spill {
namespace {

constexpr int64_t kGemmSize = 1024;
constexpr size_t kCopyBufferBytes = size_t{128} << 20;
constexpr size_t kLatencyProbeBytes = 4096;
constexpr int kLatencyProbes = 100;
constexpr double kLatencyProbeLinkBytesPerSecond = 1e9;
constexpr int kCalibrationRuns = 3;

std::string CacheFile(const char* name) {
  const std::string conv = cpu::DefaultConvTimingCache();
  if (conv.empty()) return "";
  return (std::filesystem::path(conv).parent_path() / name).string();
}

// The shortest of a few runs of `run` (the first one warms caches up).
template <typename F>
double Fastest(F run) {
  double best = std::numeric_limits<double>::max();
  for (int i = 0; i <= kCalibrationRuns; ++i) {
    const double begin = MonotonicSeconds();
    run();
    if (i > 0) best = std::min(best, MonotonicSeconds() - begin);
  }
  return best;
}

double MeasureGemmFlops() {
  const int64_t n = kGemmSize;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  const double seconds = Fastest(
      [&] { cpu::Gemm(false, false, n, n, n, 1, a.data(), n, b.data(), n, 0, c.data(), n); });
  return 2.0 * n * n * n / seconds;
}

// A bf16 matrix product of the same size on every core (oneDNN), where the
// processor multiplies bf16; 0 elsewhere.
double MeasureBf16GemmFlops() {
  if (!cpu::Bf16Arithmetic()) return 0;
  const int64_t n = kGemmSize;
  constexpr uint16_t kHalf = 0x3f00, kQuarter = 0x3e80;  // 0.5 and 0.25 in bf16
  std::vector<uint16_t> a(n * n, kHalf), b(n * n, kQuarter);
  std::vector<float> c(n * n);
  const double seconds = Fastest([&] { cpu::MatmulBf16(n, n, n, a.data(), b.data(), c.data()); });
  return 2.0 * n * n * n / seconds;
}

// A large copy on every core: bytes read plus bytes written per second.
double MeasureMemoryBandwidth() {
  std::vector<char> src(kCopyBufferBytes, 1), dst(kCopyBufferBytes, 0);
  constexpr int64_t kChunks = 64;
  const size_t chunk = kCopyBufferBytes / kChunks;
  const double seconds = Fastest([&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < kChunks; ++i) std::memcpy(&dst[i * chunk], &src[i * chunk], chunk);
  });
  return 2.0 * kCopyBufferBytes / seconds;
}

// One thread's memcpy: what the CPU device's copy worker moves per second.
double MeasureMemcpy() {
  std::vector<char> src(kCopyBufferBytes, 1), dst(kCopyBufferBytes, 0);
  const double seconds = Fastest([&] { std::memcpy(dst.data(), src.data(), kCopyBufferBytes); });
  return kCopyBufferBytes / seconds;
}

// The fixed cost of a throttled copy through the copy worker: enqueue,
// wake-up, the sleep's overshoot and the event.
double MeasureCopyLatency() {
  CpuDeviceOptions options;
  options.link_bytes_per_second = kLatencyProbeLinkBytesPerSecond;
  CpuDevice device(options);
  std::vector<char> src(kLatencyProbeBytes, 1), dst(kLatencyProbeBytes, 0);
  const double begin = MonotonicSeconds();
  for (int i = 0; i < kLatencyProbes; ++i) {
    device.CopyAsync(dst.data(), src.data(), kLatencyProbeBytes, CopyKind::kHostToDevice,
                     device.host_to_device_queue());
    device.host_to_device_queue().Record()->Synchronize();
  }
  const double each = (MonotonicSeconds() - begin) / kLatencyProbes;
  return std::max(0.0, each - kLatencyProbeBytes / kLatencyProbeLinkBytesPerSecond);
}

bool ReadCalibration(const std::string& path, CpuCalibration* c) {
  std::ifstream in(path);
  std::map<std::string, double> values;
  std::string key;
  double value;
  while (in >> key >> value) values[key] = value;
  for (const char* k : {"gemm_flops", "memory_bytes_per_second", "memcpy_bytes_per_second",
                        "copy_latency_seconds"}) {
    if (!values.count(k) || values[k] <= 0) return false;
  }
  if (!values.count("bf16_gemm_flops")) return false;  // 0 where the CPU has no bf16 arithmetic
  c->gemm_flops = values["gemm_flops"];
  c->bf16_gemm_flops = values["bf16_gemm_flops"];
  c->memory_bytes_per_second = values["memory_bytes_per_second"];
  c->memcpy_bytes_per_second = values["memcpy_bytes_per_second"];
  c->copy_latency_seconds = values["copy_latency_seconds"];
  return true;
}

}  // namespace

StatusOr<CpuCalibration> CalibrateCpu(bool fresh) {
  const std::string path = CacheFile("cpu_profile.tsv");
  CpuCalibration c;
  if (!fresh && !path.empty() && ReadCalibration(path, &c)) return c;
  c.gemm_flops = MeasureGemmFlops();
  c.bf16_gemm_flops = MeasureBf16GemmFlops();
  c.memory_bytes_per_second = MeasureMemoryBandwidth();
  c.memcpy_bytes_per_second = MeasureMemcpy();
  c.copy_latency_seconds = MeasureCopyLatency();
  if (!path.empty()) {
    std::ofstream out(path);
    out << std::setprecision(std::numeric_limits<double>::max_digits10) << "gemm_flops\t"
        << c.gemm_flops << "\nbf16_gemm_flops\t" << c.bf16_gemm_flops
        << "\nmemory_bytes_per_second\t" << c.memory_bytes_per_second
        << "\nmemcpy_bytes_per_second\t" << c.memcpy_bytes_per_second << "\ncopy_latency_seconds\t"
        << c.copy_latency_seconds << "\n";
    if (!out) return IoError("cannot write the CPU calibration '" + path + "'");
  }
  return c;
}

StatusOr<DeviceProfile> LoadDeviceProfile(const std::string& name, double link_gbps) {
  if (name != "cpu") {
    if (link_gbps > 0) {
      return InvalidArgument("--link-gbps sets the cpu profile's link; the '" + name +
                             "' profile has its own");
    }
    return FindDeviceProfile(name);
  }
  SPILL_ASSIGN_OR_RETURN(CpuCalibration calibration, CalibrateCpu());
  return CpuProfile(calibration, link_gbps * 1e9);
}

Status GiveMeasuredProfile(double link_gbps, MemoryOptions* options) {
  if (ReadPlannerSettings(options->settings).profile != kMeasuredProfile) return Status::Ok();
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, LoadDeviceProfile(kMeasuredProfile, link_gbps));
  options->measured_profile = std::make_shared<const DeviceProfile>(std::move(profile));
  return Status::Ok();
}

std::string DeviceProfileHelp() {
  std::string text;
  for (const std::string& name : DeviceProfileNames()) {
    if (name == "cpu") {
      text += "    cpu: this CPU, calibrated on first use (with --link-gbps: the throttled link)\n";
      continue;
    }
    text += "    " + DescribeDeviceProfile(*FindDeviceProfile(name)) + "\n";
  }
  return text;
}

std::string StepTimesSignature(const NetworkView& view, DeviceType device) {
  return NetworkSignature(view) + "/" + DeviceTypeName(device);
}

std::string DefaultStepTimesCache() { return CacheFile("step_times.tsv"); }

StatusOr<StepTimes> LoadStepTimes(const NetworkView& view, DeviceType device) {
  const std::string path = DefaultStepTimesCache();
  if (path.empty()) return StepTimes();
  return StepTimes::Load(path, StepTimesSignature(view, device));
}

Status SaveStepTimes(const NetworkView& view, DeviceType device, const StepTimes& times) {
  const std::string path = DefaultStepTimesCache();
  if (path.empty()) return Status::Ok();
  const std::string signature = StepTimesSignature(view, device);
  SPILL_ASSIGN_OR_RETURN(StepTimes merged, StepTimes::Load(path, signature));
  merged.Replace(times);
  return merged.Save(path, signature);
}

Prediction Predict(const NetworkView& view, const MemoryPlan& plan, const DeviceProfile& profile,
                   const StepTimes* measured, const std::string& title) {
  Prediction p;
  p.costs = ModelCosts(view, plan.log, profile, measured);
  p.timeline = SimulateIteration(view, plan.events, p.costs, profile,
                                 BaseDeviceBytes(plan.log, plan.events));
  p.timeline.title = title;
  p.summary = Summarize(p.timeline);
  return p;
}

StatusOr<Prediction> PredictRoomy(const NetworkView& view, const MemoryOptions& options,
                                  const DeviceProfile& profile, const StepTimes* measured) {
  MemoryOptions roomy = options;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode("baseline", &roomy));
  roomy.device_budget = kUnlimitedBudget;
  // The in-core reference maps nothing (under va it would map fresh ranges).
  roomy.allocator = "first_fit";
  roomy.record_events = true;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, roomy));
  if (!plan.fits) return Internal("the roomy plan does not fit: " + plan.failure);
  return Predict(view, plan, profile, measured, "baseline, unlimited budget");
}

StatusOr<std::unique_ptr<PlanPredictor>> PlanPredictor::Create(const std::string& profile,
                                                               double link_gbps, const Net& net,
                                                               const NetSpec* spec,
                                                               const MemoryOptions& options,
                                                               double network_gbps) {
  std::unique_ptr<PlanPredictor> p(new PlanPredictor(net));
  SPILL_ASSIGN_OR_RETURN(p->profile_, LoadDeviceProfile(profile, link_gbps));
  if (network_gbps > 0) p->profile_.network_bytes_per_second = network_gbps * 1e9;
  // Measured step times are this machine's: they stand for the cpu profile only.
  p->use_measured_ = p->profile_.name == "cpu";
  if (p->use_measured_) {
    SPILL_ASSIGN_OR_RETURN(p->measured_, LoadStepTimes(net.view(), DeviceType::kCpu));
    if (spec != nullptr) {
      p->spec_ = spec;
      MemoryOptions roomy = options;
      SPILL_RETURN_IF_ERROR(ApplyMemoryMode("liveness", &roomy));
      roomy.device_budget = kUnlimitedBudget;
      SPILL_RETURN_IF_ERROR(p->Measure(roomy));
    }
  }
  SPILL_ASSIGN_OR_RETURN(p->roomy_, PredictRoomy(net.view(), options, p->profile_, p->measured()));
  return p;
}

// Runs the plan's mode on this CPU and keeps its step times.
Status PlanPredictor::Measure(const MemoryOptions& options) {
  constexpr size_t kMeasureBudgetCap = size_t{64} << 30;  // address space, not memory
  constexpr int kMeasuredIterations = 2;
  MemoryOptions run = options;
  run.device_budget = std::min(run.device_budget, kMeasureBudgetCap);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice("cpu", {}));
  SPILL_ASSIGN_OR_RETURN(MeasuredRun measured,
                         MeasureRun(*spec_, net_.batch(), *device, run, kMeasuredIterations));
  measured_.Replace(measured.steps);
  return SaveStepTimes(net_.view(), DeviceType::kCpu, measured.steps);
}

StatusOr<Prediction> PlanPredictor::Predict(const MemoryPlan& plan, const MemoryOptions& options,
                                            const std::string& title) {
  if (use_measured_ && spec_ != nullptr) {
    SPILL_RETURN_IF_ERROR(Measure(options));
    // The roomy run from the same measurements.
    SPILL_ASSIGN_OR_RETURN(roomy_, PredictRoomy(net_.view(), options, profile_, measured()));
  }
  return spill::Predict(net_.view(), plan, profile_, measured(), title);
}

std::string DescribePrediction(const Prediction& p, int64_t batch, const Prediction* roomy) {
  const TimelineSummary& s = p.summary;
  char line[512];
  std::snprintf(line, sizeof(line), "%.1f ms per iteration (%.1f images/s",
                s.iteration_seconds * 1e3, batch / std::max(s.iteration_seconds, 1e-12));
  std::string text = line;
  if (roomy != nullptr) {
    std::snprintf(line, sizeof(line), ", %.1f%% of the roomy run's",
                  100 * roomy->summary.iteration_seconds / std::max(s.iteration_seconds, 1e-12));
    text += line;
  }
  std::snprintf(line, sizeof(line),
                "); compute %.1f ms, copies %.1f ms (%.1f to the device, %.1f to the host, %.1f "
                "both at once; %.0f%% hidden under compute), compute waits %.1f ms, host waits "
                "%.1f ms; step costs: %s",
                s.compute_seconds * 1e3, s.copy_seconds * 1e3, s.to_device_seconds * 1e3,
                s.to_host_seconds * 1e3, s.duplex_seconds * 1e3, 100 * s.overlap(),
                s.compute_wait_seconds * 1e3, s.host_wait_seconds * 1e3, p.costs.Source().c_str());
  text += line;
  if (s.map_seconds > 0) {
    std::snprintf(line, sizeof(line), "; mapping %.1f ms", s.map_seconds * 1e3);
    text += line;
  }
  if (s.network_seconds > 0) {
    std::snprintf(line, sizeof(line),
                  "; network between ranks %.1f ms, %.0f%% hidden under compute",
                  s.network_seconds * 1e3,
                  100 * s.hidden_network_seconds / std::max(s.network_seconds, 1e-12));
    text += line;
  }
  return text;
}

}  // namespace spill
