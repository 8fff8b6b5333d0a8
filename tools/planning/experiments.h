// "Going deeper" and "going wider" (SuperNeurons §4.2, Tables 4 and 5): the
// largest network depth, or batch, that trains under a device budget, found
// by planning (no memory is reserved, nothing is computed) and then, where
// this machine has the memory, confirmed by a real run of a few steps.
#ifndef SPILL_TOOLS_PLANNING_EXPERIMENTS_H_
#define SPILL_TOOLS_PLANNING_EXPERIMENTS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "framework/config/net_spec.h"
#include "framework/graph/precision.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "tools/common/memory_flags.h"

namespace spill {

struct Probe {
  bool fits = false;
  MemoryPlan plan;
  // The value of the scheduler's share of the budget the plan used
  // (memory.window_budget "0.95x"; empty when the scheduler has none).
  std::string share;
  // Where the network as configured did not fit, the leaner build that did
  // (tools/common/net_options.h): its note, whether its layouts are all
  // plain, its workspace policy and whether it computes large steps in
  // slices (16 bits). Empty note: as configured.
  std::string leaner;
  bool plain_layouts = false;
  WorkspacePolicy workspace;
  size_t slice_copies_from = SIZE_MAX;
  bool tiled_attention = false;  // NetOptions::tiled_attention
};

// Largest x in [low, limit] with fits(x), for a predicate that holds up to
// some point and fails beyond: doubling from `low`, then bisection. `low`
// must fit. Returns low - 1 when even `low` does not.
StatusOr<int64_t> LargestFitting(int64_t low, int64_t limit,
                                 const std::function<StatusOr<Probe>(int64_t)>& probe, int* probes);

// The options both experiments take: --config FILE --device NAME --batch B
// --size S --set KEY=VALUE --device-profile NAME --confirm STEPS, and the
// memory flags every planning tool shares (tools/common/memory_flags.h: --memory,
// --device-memory, --host-memory, --allocator, --compact, --window-budget,
// ...). Only these tools take "search" for a scheduler's share of the budget
// (a searchable setting: --window-budget search): the largest multiple, from
// 1x down in steps of 0.05x, with which the scheduler's plan fits - what the
// window paper's authors set by hand.
struct ExperimentOptions {
  std::string model;
  std::string device = "cpu";  // whose layers (and workspaces) are planned and run
  int64_t batch = 16;
  int64_t size = 224;   // given: the model's `size` parameter (in `sets`)
  int64_t confirm = 0;  // training steps to confirm the result; 0: plan only
  // The device profile the result's iteration time is predicted on (the
  // paper's experiments ran on a 12 GB K40).
  std::string device_profile = "k40-pcie3";
  std::string searched_share;  // the key given as "search" (window_budget), or empty
  ParamOverrides sets;
  MemoryFlags memory_flags;             // as given
  MemoryOptions memory;                 // the tool's defaults with the memory flags applied
  bool plain_layouts = false;           // build with every activation layout plain
  size_t slice_copies_from = SIZE_MAX;  // NetOptions::slice_copies_from
  bool tiled_attention = false;         // NetOptions::tiled_attention
  // One rank of a data-parallel run of `ranks` (its batch as given): with
  // `zero` 1 it holds its shard of the solver state, with 2 also each
  // gradient only around its layer's backward (distributed.zero).
  int64_t ranks = 1;
  int64_t zero = 0;
  // How activations and their gradients are stored (--precision).
  std::string precision_name = "fp32";
  Precision precision = Precision::kFp32;
  std::string Describe() const;
  // Takes the leaner build `probe` found, for the prediction and the
  // confirmation of its result.
  void Use(const Probe& probe);
};

// The start of both tools: declares and parses the options into `*options`
// and plans with modelled convolution times. Returns the exit code when the
// tool stops here (0 after --help, 2 after a bad flag); -1 when it goes on.
int StartExperiment(int argc, char** argv, const char* tool, const char* description,
                    const std::string& default_model, ExperimentOptions* options);

// Plans a training iteration of `spec` at `batch` with the options' device
// and memory options - and where that does not fit, with the leaner builds
// `train` tries (tools/common/net_options.h), so the largest batch or depth
// found is one `train` runs.
StatusOr<Probe> PlanProbe(const NetSpec& spec, int64_t batch, const ExperimentOptions& options);

// Prints the predicted iteration time of `spec` at `batch` under the
// options on their device profile, beside the roomy run's (a simulation:
// memory/sim/). Returns 0, or 1 after printing why it could not.
int ReportPrediction(const NetSpec& spec, int64_t batch, const ExperimentOptions& options);

// Trains `steps` steps on synthetic data for real; reports the peak device
// bytes and seconds per step. Fails with a clear message when this machine
// lacks the host memory for it.
struct Confirmation {
  bool ran = false;
  std::string reason;  // why it did not run
  size_t peak = 0;
  double seconds_per_step = 0;
  double loss = 0;
};
StatusOr<Confirmation> ConfirmByTraining(const NetSpec& spec, int64_t batch,
                                         const ExperimentOptions& options, const MemoryPlan& plan);
// Prints the outcome of ConfirmByTraining of what the search `found`
// ("depth 1,202 at batch 32"); returns the exit code: 0 only when it trained
// (a confirmation asked for and not made is a failure, the reason printed).
int ReportConfirmation(const StatusOr<Confirmation>& confirmation, int64_t steps,
                       const std::string& found);

}  // namespace spill

#endif  // SPILL_TOOLS_PLANNING_EXPERIMENTS_H_
