// Timelines for the tools: device profiles by name (this CPU calibrated on
// first use and cached), measured step times (cached per network, shape and
// device, like convolution timings), predictions of a plan's iteration time
// under a profile, and the timeline of a real iteration (compute spans from
// the executor, copy spans from the CPU device's copy worker, the memory
// runtime's timestamped events).
//
// The cache files live beside the convolution timings (~/.cache/spill):
//   cpu_profile.tsv   this CPU's calibration (delete it to calibrate again)
//   step_times.tsv    per-step seconds: "signature layer pass algorithms s n"
#ifndef SPILL_TOOLS_COMMON_TIMELINE_TOOLS_H_
#define SPILL_TOOLS_COMMON_TIMELINE_TOOLS_H_

#include <string>
#include <vector>

#include "framework/device/device.h"
#include "framework/graph/executor.h"
#include "framework/graph/net.h"
#include "framework/solver/solver.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/device_profile.h"
#include "memory/sim/timeline.h"

namespace spill {

// This CPU's rates, measured once and cached (a second or two); `fresh`:
// measure again and replace the cached ones.
StatusOr<CpuCalibration> CalibrateCpu(bool fresh = false);
// A profile by name; "cpu" is this CPU as calibrated, its link throttled to
// `link_gbps` GB/s when positive (as `train --link-gbps` throttles it).
StatusOr<DeviceProfile> LoadDeviceProfile(const std::string& name, double link_gbps);
// Under memory.planner.profile: cpu, this CPU as calibrated (its link
// throttled as above) for the planners (MemoryOptions::measured_profile);
// nothing otherwise.
Status GiveMeasuredProfile(double link_gbps, MemoryOptions* options);
// "NAME (one line per known profile)" for --help texts.
std::string DeviceProfileHelp();

// The key of a network's step times on a device.
std::string StepTimesSignature(const NetworkView& view, DeviceType device);
// The cache file of step times ("" when there is no cache directory).
std::string DefaultStepTimesCache();
// Step times of `view` on `device` from the cache (empty when none).
StatusOr<StepTimes> LoadStepTimes(const NetworkView& view, DeviceType device);
// Merges `times` into the cache.
Status SaveStepTimes(const NetworkView& view, DeviceType device, const StepTimes& times);

// A plan's iteration under a profile.
struct Prediction {
  Timeline timeline;
  TimelineSummary summary;
  IterationCosts costs;
};
// `plan` must have been made with record_events. `measured` may be null.
Prediction Predict(const NetworkView& view, const MemoryPlan& plan, const DeviceProfile& profile,
                   const StepTimes* measured, const std::string& title);
// The roomy run to compare with: the baseline mode, unlimited budget.
StatusOr<Prediction> PredictRoomy(const NetworkView& view, const MemoryOptions& options,
                                  const DeviceProfile& profile, const StepTimes* measured);
// One line: time per iteration, images/s, share of the roomy run's
// throughput (when given), stalls, overlap, where the costs came from.
std::string DescribePrediction(const Prediction& p, int64_t batch, const Prediction* roomy);

// Predictions for a tool that plans modes of one network: the profile, the
// measured step times (cpu profile: from the cache, or measured now), and
// the roomy run to compare with.
class PlanPredictor {
 public:
  // `spec` non-null: with the cpu profile, measure every plan's steps on
  // this CPU before predicting it (and the roomy run's), caching them.
  // `network_gbps` > 0 replaces the profile's network between ranks.
  static StatusOr<std::unique_ptr<PlanPredictor>> Create(const std::string& profile,
                                                         double link_gbps, const Net& net,
                                                         const NetSpec* spec,
                                                         const MemoryOptions& options,
                                                         double network_gbps = 0);
  // `plan` made with record_events under `options`.
  StatusOr<Prediction> Predict(const MemoryPlan& plan, const MemoryOptions& options,
                               const std::string& title);
  const Prediction& roomy() const { return roomy_; }
  const DeviceProfile& profile() const { return profile_; }
  // The host's cost to map or unmap a chunk under va (plan --map-us).
  void set_map_seconds_per_chunk(double seconds) { profile_.map_seconds_per_chunk = seconds; }
  int64_t batch() const { return net_.batch(); }

 private:
  PlanPredictor(const Net& net) : net_(net) {}
  Status Measure(const MemoryOptions& options);
  const StepTimes* measured() const { return use_measured_ ? &measured_ : nullptr; }

  const Net& net_;
  const NetSpec* spec_ = nullptr;
  DeviceProfile profile_;
  bool use_measured_ = false;
  StepTimes measured_;
  Prediction roomy_;
};

// Records one real iteration: turns on the executor's compute spans, the
// CPU device's copy spans (other devices: no copy track) and timestamped
// memory events. The runtime must have been created with record_events.
class RunRecorder {
 public:
  RunRecorder(Executor& executor, MemoryRuntime& runtime, Device& device);
  ~RunRecorder();
  // Marks the start of the iteration to record.
  void Begin();
  // The solver's update ran from `begin` to `end` (MonotonicSeconds).
  void Update(double begin, double end);
  // The recorded iteration, once the runtime has finished it.
  Timeline Finish(const Net& net, const std::string& title);
  // Adds the recorded iteration's step, recomputation and update seconds.
  void AddStepTimes(const Net& net, StepTimes* times) const;

 private:
  Executor& executor_;
  MemoryRuntime& runtime_;
  Device& device_;
  double begin_ = 0;
  double update_begin_ = 0, update_end_ = 0;
  std::vector<Executor::ComputeSpan> spans_;
};

// Real training iterations of a network on synthetic data, each traced:
// `spec` built at `batch` for `device` with an SGD solver (momentum 0.9),
// under `memory`. Several can be alive at once, so that runs to compare
// can take turns (a loaded machine then slows them alike).
class TracedRun {
 public:
  static StatusOr<std::unique_ptr<TracedRun>> Create(const NetSpec& spec, int64_t batch,
                                                     Device& device, const MemoryOptions& memory);
  ~TracedRun();
  // Runs one iteration (steps and update). `keep`: add its step times and
  // its wall time to the totals (false for a warm-up).
  Status Iterate(bool keep);

  const Net& net() const { return *net_; }
  const MemoryRuntime& runtime() const { return *runtime_; }
  double last_loss() const { return last_loss_; }
  const StepTimes& steps() const { return steps_; }
  const Timeline& last() const { return last_; }  // the last iteration
  int kept() const { return kept_; }
  double mean_iteration_seconds() const { return kept_ ? iteration_seconds_ / kept_ : 0; }
  double mean_compute_seconds() const { return kept_ ? compute_seconds_ / kept_ : 0; }
  // Wall and compute seconds of every iteration run, warm-ups included.
  const std::vector<std::pair<double, double>>& history() const { return history_; }
  // Each kept iteration on its own: wall seconds and step times.
  struct Sample {
    double seconds = 0;
    StepTimes steps;
  };
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  TracedRun() = default;

  Device* device_ = nullptr;
  std::unique_ptr<Net> net_;
  std::unique_ptr<Solver> solver_;
  std::unique_ptr<MemoryRuntime> runtime_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<RunRecorder> recorder_;
  std::vector<float> images_, labels_;
  StepTimes steps_;
  Timeline last_;
  int iterations_ = 0, kept_ = 0;
  double last_loss_ = 0;
  double iteration_seconds_ = 0, compute_seconds_ = 0;
  std::vector<std::pair<double, double>> history_;
  std::vector<Sample> samples_;
};

// One untimed iteration, then `iterations` kept ones.
struct MeasuredRun {
  StepTimes steps;               // every step's seconds, every iteration a sample
  double iteration_seconds = 0;  // mean wall time per iteration (steps + update)
  double compute_seconds = 0;    // mean compute time per iteration (spans summed)
  Timeline last;                 // the last iteration
};
StatusOr<MeasuredRun> MeasureRun(const NetSpec& spec, int64_t batch, Device& device,
                                 const MemoryOptions& memory, int iterations);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_TIMELINE_TOOLS_H_
