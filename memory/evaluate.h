// The fast evaluator: a pure, exact score of a candidate memory plan, for
// planners that search over plans (memory/planners/).
//
// A plan is given as one decision per tensor:
//   keep      the tensor lives from its first write to its last use;
//   offload   its copy to host memory begins after the step that writes it,
//             its device block is freed after step `out`, and it is
//             prefetched before step `in` computes (in == its first
//             backward use: it comes back when that step reads it); an
//             activation gradient goes likewise between its first write
//             and its next use; an activation read by two backward steps
//             far apart may leave again between them (again_out, again_in:
//             no copy out, its host copy is current);
//   drop      its device block is freed after step `out`; it is rebuilt by
//             rerunning its layer's forward before step `in` computes (in ==
//             its first backward use: when that step reads it). Inputs of the
//             layer that backward does not need otherwise (forward-only
//             activations of layers that can be rerun) are dropped with it,
//             at the end of their extended lives; every source lives at
//             least until its dependents are dropped.
// From it the evaluator gives the device bytes of every step under the
// `ideal` allocator's accounting (no fragmentation), the iteration's time on
// a device profile with the timeline simulator's waits, and the
// TransferPlan the decisions stand for.
//
// It is a mirror of what the memory runtime does with that TransferPlan -
// allocations, frees, on-demand loads and rebuilds, the deferred release of
// a dropped tensor's sources - and of the simulator's clocks, over plain
// data and in O(steps + tensors + actions): no runtime, no event log, no
// strings. tests/evaluate_test.cc checks it against Plan() and
// SimulateIteration on random decisions. The plan is played to the end
// whatever the budget (a prefetch the runtime would skip for want of room is
// made all the same), so with a plan that fits its budget it is exact.
//
// Assumptions, stated where a plan departs from them: parameters, their
// gradients and solver state that live in host memory (memory.params: host
// or above:SIZE) are on the device over the steps the parameter transfers
// bring them in for (phase_plans.cc), and a rebuild's parameters from the
// rebuild to their layer's backward, and their copies are not timed; each step's
// algorithms are those its workspace policy picks with no memory pressure,
// and the plans name them, so that the run computes with exactly those.
#ifndef SPILL_MEMORY_EVALUATE_H_
#define SPILL_MEMORY_EVALUATE_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/device_profile.h"
#include "memory/transfer_plan.h"

namespace spill {

enum class TensorChoice : uint8_t { kKeep, kOffload, kDrop };
const char* TensorChoiceName(TensorChoice choice);

struct TensorDecision {
  TensorChoice choice = TensorChoice::kKeep;
  int out = -1;  // the step after which the device block goes
  int in = -1;   // the step before whose computation it is back
  // Offload only, -1 when unused: the tensor leaves again over its second
  // gap (EvalModel::again_after, again_needed_at), after step `again_out`,
  // and is back before step `again_in`. Its host copy is still current, so
  // it goes with no copy out; coming back is a copy in.
  int again_out = -1;
  int again_in = -1;
  // A parameter living in host memory (EvalModel::host_params): the visits
  // whose prefetch one step ahead the plan leaves out (kLateForward,
  // kLateBackward; TransferPlan::late_parameters). The step before then
  // holds less, and the step reads it in.
  uint8_t late = 0;
};
using Decisions = std::vector<TensorDecision>;  // per tensor id

// What the evaluator knows of a network: plain data built once.
struct EvalModel {
  const Schedule* schedule = nullptr;
  int num_layers = 0;     // N: steps 0..N-1 forward, N..2N-1 backward
  size_t persistent = 0;  // on the device all iteration
  // Per step: parameters, gradients and solver state living in host memory
  // that are on the device while the step runs (not in `persistent`).
  std::vector<size_t> visiting;
  // Per step: the gradients of such parameters its backward writes, placed
  // with the step's writes (after its reads and their rebuilds).
  std::vector<size_t> writing;
  // Per layer: its parameters that live in host memory. A rebuild brings
  // them in, and they stay until their layer's backward visit begins (at
  // step `visit_back[p]`, where `visiting` counts them), as the runtime keeps
  // them; `returning[s]`: the parameters whose backward visit begins at s.
  std::vector<std::vector<TensorId>> host_params;
  bool has_host_params = false;
  // Per step: the bytes of such parameters prefetched there for the next
  // step, which a plan may bring late instead (TensorDecision::late).
  std::vector<size_t> comes_ahead;
  std::vector<int> visit_back;
  std::vector<std::vector<TensorId>> returning;
  std::vector<size_t> bytes;      // per tensor, in pool blocks
  std::vector<size_t> workspace;  // per step, in pool blocks (0: none)
  // Per step: the algorithm of each operation, an index into its candidates
  // (empty: no choice to make), as the plans give them to the runtime.
  std::vector<std::vector<int>> algorithms;
  // Per step: the algorithms of least workspace (memory_optimal; under a
  // pinned policy the pinned ones) - what a planner may give a step instead,
  // trading time for memory - with their workspace and time. A forward
  // step's time is also its layer's recomputation time.
  struct Alternative {
    size_t workspace = 0;
    double seconds = 0;
    std::vector<int> algorithms;
  };
  std::vector<Alternative> lean;
  IterationCosts costs;
  DeviceProfile profile;
  Liveness liveness;  // training iteration
  // Per tensor, the gap in its uses a plan may move it out over (-1 when
  // none): it may leave after step `leaves_after` (a forward tensor's last
  // forward use; an activation gradient's first write) and is needed back
  // at step `needed_at` (its first backward use; a gradient's next use).
  std::vector<int> leaves_after;
  std::vector<int> needed_at;
  // Per tensor, a second gap (-1 when none): an activation read by two
  // backward steps with others between them (a unit's input, read by its
  // projection's backward and again by its first convolution's) may leave
  // after step `again_after` (a backward read) and is needed back at step
  // `again_needed_at` (the next). The longest such gap past `needed_at`.
  std::vector<int> again_after;
  std::vector<int> again_needed_at;
  // Written in forward and read in backward; or an activation gradient read
  // again two or more steps after it is written (a residual branch's
  // gradient, held while the other branch runs backward).
  std::vector<bool> offloadable;
  std::vector<bool> droppable;                 // and its layer can be rerun to rebuild it
  std::vector<bool> forward_only;              // a rerunnable activation backward never reads
  std::vector<std::vector<TensorId>> sources;  // per tensor: its layer's inputs and saved tensors
  // Tensors a planner decides on (offloadable or droppable and at least the
  // minimum size), by the step that writes them, then by id.
  std::vector<TensorId> candidates;
  std::vector<TensorId> by_need;        // tensors with a needed_at, by it, then by id
  std::vector<TensorId> by_again_need;  // tensors with a second gap, by again_needed_at, then id
  double base_seconds = 0;              // the iteration with every tensor kept
  size_t base_peak = 0;                 // and its peak (liveness's)
  std::vector<size_t> base_step_peak;   // and every step's

  int num_steps() const { return 2 * num_layers; }
};

// The model of `view` on `profile`: step times from the cost model (no
// measured times), workspaces as the workspace policy of `options` picks
// them without memory pressure, candidates of at least `min_bytes`.
StatusOr<EvalModel> BuildEvalModel(const NetworkView& view, const MemoryOptions& options,
                                   const DeviceProfile& profile, size_t min_bytes);

// Decisions that keep everything.
Decisions KeepAll(const EvalModel& model);
// A valid random decision for every candidate - keep, offload or drop, with
// random steps out and back - for checking evaluators and planners.
Decisions RandomDecisions(const EvalModel& model, std::mt19937_64& rng);
// "" when `d` is a plan the evaluator and the runtime can run; otherwise
// what is wrong, naming the tensor.
std::string CheckDecisions(const EvalModel& model, const Decisions& d);

struct Evaluation {
  std::vector<size_t> step_peak;   // per step: the most bytes in use while it ran
  std::vector<size_t> step_total;  // per step: bytes in use once its tensors were in place
  size_t peak = 0;
  int peak_step = -1;
  double seconds = 0;  // the iteration on the model's profile
  int64_t recomputations = 0;
  size_t to_host = 0, to_device = 0;
  std::vector<double> step_end;     // per step: when its computation ends
  std::vector<double> offload_end;  // per tensor: when its copy to host ends (0: none)
};

// The per-step action lists a decision vector stands for, in the order the
// runtime executes them.
struct CompactPlan {
  std::vector<TransferAction> before, after;   // every step's lists, one after another
  std::vector<int> before_start, after_start;  // per step + 1: where each step's list starts
  std::vector<int> keep_until;                 // per tensor: its last use, extended for rebuilds
  std::vector<int> drop_at;                    // per tensor: the step after which it is dropped
  // Parameters living in host memory that come late (TensorDecision::late):
  // per step, their bytes not on the device after all; per tensor, the step
  // its backward visit begins at (EvalModel::visit_back, or one later).
  std::vector<size_t> unvisited;
  std::vector<int> visit_back;
};
void BuildCompactPlan(const EvalModel& model, const Decisions& d, CompactPlan* plan);

// The first step whose actions a decision on `t` can change (the step that
// writes it, or the last use of one of its sources, whose life a drop
// extends): snapshots taken before it serve any decision on `t`.
int FirstAffectedStep(const EvalModel& model, TensorId t);

// The plans of both phases (evaluation: liveness releases only).
PhasePlans ToPhasePlans(const EvalModel& model, const Decisions& d);

// Evaluates decision vectors, reusing its buffers. Incremental along the
// schedule: a snapshot taken at a step replays only the steps after it, for
// decisions whose actions before that step are the snapshot's.
class Evaluator {
 public:
  explicit Evaluator(const EvalModel& model);

  // The state of the replay before a step: everything the rest depends on.
  struct Snapshot {
    int step = 0;
    std::vector<uint8_t> state;
    std::vector<int> refs;
    std::vector<uint8_t> flags;
    std::vector<double> pending;
    size_t total = 0;
    double host = 0, compute_end = 0, compute_ready = 0;
    CopyClocks copies{LinkProfile()};
    Evaluation partial;
  };

  // `d` must pass CheckDecisions.
  const Evaluation& Run(const Decisions& d);
  // Replays from `from` (null: the start); with `take`, also fills `*take`
  // with the state before step `take_at`.
  const Evaluation& Run(const Decisions& d, const Snapshot* from, int take_at, Snapshot* take);
  const CompactPlan& plan() const { return plan_; }

 private:
  class Replay;
  const EvalModel& model_;
  CompactPlan plan_;
  Evaluation result_;
  Snapshot scratch_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_EVALUATE_H_
