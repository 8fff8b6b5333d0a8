// Trains a network for a few steps on synthetic data, with plain SGD applied
// on the host, and reports what a test needs to compare runs: the losses, the
// final parameters, and the memory log.
#ifndef SPILL_TESTS_TESTING_NET_HARNESS_H_
#define SPILL_TESTS_TESTING_NET_HARNESS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "framework/config/net_spec.h"
#include "framework/device/device.h"
#include "framework/graph/net.h"
#include "framework/schedule/tensor_store.h"
#include "memory/heap_pool.h"
#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace testing {

struct TrainTrace {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;  // every parameter after training
  std::vector<std::vector<float>> grads;   // every parameter gradient of the last step
  std::vector<std::vector<float>> scores;  // each step's scores (the loss layer's output)
  MemoryLog log;                           // of the last iteration
  int64_t recomputations = 0;
  int64_t dropped_branches = 0;  // stochastic depth, over the run
  size_t to_host = 0;
  size_t to_device = 0;
  size_t footprint = 0;             // the allocator's peak footprint
  int64_t mismatches = 0;           // requests served unlike their profile (static allocator)
  std::vector<MemoryEvent> events;  // of the last iteration, with memory.record_events
  PoolStats device_pool;            // at the end of the run
  PoolStats host_pool;
  // With SyntheticRun::lengths: every iteration's log and events, and the
  // plans the runtime made for lengths it had not seen (MemoryRuntime::replans).
  std::vector<MemoryLog> iteration_logs;
  std::vector<std::vector<MemoryEvent>> iteration_events;
  int64_t replans = 0;
};

struct SyntheticRun {
  int64_t batch = 2;
  int steps = 2;
  float learning_rate = 0.01f;
  uint64_t seed = 1;
  bool same_batch = false;                 // feed one batch every step instead of a new one
  double link_bytes_per_second = 0;        // throttle the CPU device's copies
  std::string device = "cpu";              // or "cuda" (--config=cuda builds)
  bool blocked_layouts = true;             // NetOptions::blocked_layouts
  std::optional<Layout> layout;            // NetOptions::layout
  Precision precision = Precision::kFp32;  // NetOptions::precision
  size_t slice_copies_from = SIZE_MAX;     // NetOptions::slice_copies_from
  Device* use_device = nullptr;            // this one instead of a new `device`
  bool inference = false;                  // forward passes only (Phase::kEval), no updates
  // Time the device's algorithm candidates first (CalibrateNet), as the
  // tools do; false keeps their estimates, which a plan made from shapes
  // alone also uses.
  bool calibrate = true;
  MemoryOptions memory;
  // Variable-length sequences: step i runs at sequence length
  // lengths[i % size] (Net::SetSequenceLength, then MemoryRuntime::Reshape);
  // empty: the network's own length throughout.
  std::vector<int64_t> lengths;
  // Plans to run instead of memory.scheduler's (GivenPlans).
  std::optional<PhasePlans> plans;
  // Sets parameters after the seeded initialization (e.g. imported weights).
  std::function<Status(const Net&, TensorStore&)> initialize;
};

StatusOr<TrainTrace> TrainSynthetic(const NetSpec& spec, const SyntheticRun& run);

// The network TrainSynthetic trains, with its solver's state (momentum) in
// the schedule: what a plan of the same run must be made from.
StatusOr<std::unique_ptr<Net>> BuildTrainingNet(const NetSpec& spec, int64_t batch,
                                                DeviceType device = DeviceType::kCpu,
                                                bool blocked_layouts = true,
                                                Precision precision = Precision::kFp32);
StatusOr<std::unique_ptr<Net>> BuildTrainingNet(const NetSpec& spec, const NetOptions& options);
// The options TrainSynthetic builds `run`'s network with on a `device`.
NetOptions NetOptionsOf(const SyntheticRun& run, DeviceType device);

// The memory tests' run: three steps of batch 3 under memory mode `mode`,
// 64 MiB of device memory and 16 MiB of host memory (page-locked as used
// on a GPU; these networks use far less), freed memory poisoned with NaN so
// that a read after free shows.
SyntheticRun SmallMemoryRun(const std::string& mode);

// Parses YAML text (label "test.yaml") or dies.
NetSpec MustParse(const std::string& yaml, const ParamOverrides& overrides = {});

// What parsing `yaml` (named `label` in messages) and building it at batch 2
// on the CPU says: OK, or the first error - the layer tests' bad keys and
// shapes.
Status BuildStatus(const std::string& yaml, const std::string& label);

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_NET_HARNESS_H_
