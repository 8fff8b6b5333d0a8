// The transfer plan: what the memory runtime does around each step besides
// placing the step's own tensors - one action list every scheduler emits
// and the runtime executes.
//
// Per step s, two ordered lists:
//   before[s]  runs once s's own tensors are in place, before s computes
//              (prefetches, which then overlap s's computation);
//   after[s]   runs once s has computed.
// Actions, each applied only when the tensor is in the state it names and
// skipped otherwise (a scheduler may list an action that an earlier one, or
// the tensor cache, has made moot):
//   kBeginOffload   device -> offloading: the copy to host starts, ordered
//                   after the compute that wrote the tensor
//   kFinishOffload  offloading -> host: wait for that copy, free the device
//                   block (the "wait-then-free" of the window scheduler)
//   kFinishOffloadLazily  offloading, past its last forward use: the device
//                   block is given back only when an allocation does not fit
//                   (oldest such offload first, before any eviction) or at a
//                   later kFinishOffload (Dymem's lazy release)
//   kCancelOffload  offloading -> device: keep the device copy after all
//                   (its host copy stays valid until the tensor is written)
//   kPrefetch       host -> prefetching, when it fits without evicting (with
//                   prefetch_in_order, one that does not fit holds back the
//                   prefetches after it in the same list)
//   kDrop           device -> dropped: rebuilt by recomputation when read
//   kRebuild        dropped -> device: recompute now rather than at first read
//   kRelease        the tensor's last use: give everything back (deferred
//                   while a dropped tensor still needs it to be rebuilt)
//   kUpdate         the solver step of a parameter that lives in host memory,
//                   once its layer's backward is done: on the device (then its
//                   gradient goes) or in host memory after the gradient's copy
//
// Plans are plain data, produced by pure functions of the schedule, the
// sizes and the options (memory/schedulers/), one per phase - or by hand, or
// by a planner that searches, and scored with Plan(view, options, plans)
// (memory/planning/planner.h). A plan made elsewhere needs only the action lists: one
// `before` and one `after` list per step of its phase (2 x layers for
// training, layers for evaluation); its lifetimes default to the schedule's
// (AnalyzeLiveness) and nothing is droppable by the tensor cache
// (CompletePlans). The runtime itself places every tensor a step reads or
// writes, brings back what is on the host and rebuilds what is dropped, so a
// plan lists only what it wants moved ahead, dropped or released: e.g.
// [drop conv1 after step 3], [rebuild conv1 before step 9], [release X
// after its last use]. A tensor never released stays until the iteration
// ends, which the runtime reports as an error when liveness is on. The runtime
// waits for a copy only at a kFinishOffload, at a first read, or when it
// needs the memory, all fixed points of the schedule: so a plan executed
// without a device makes exactly the decisions of a run.
#ifndef SPILL_MEMORY_TRANSFER_PLAN_H_
#define SPILL_MEMORY_TRANSFER_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/liveness.h"
#include "memory/recompute_policy.h"

namespace spill {

enum class TransferOp {
  kBeginOffload,
  kFinishOffload,
  kFinishOffloadLazily,
  kCancelOffload,
  kPrefetch,
  kDrop,
  kRebuild,
  kRelease,
  kUpdate,
  // A sharded parameter (memory.params_gathered): its gather from the ranks
  // begins (before a step, ahead of the step that reads it); the step makes
  // room for it and waits for its values.
  kGather,
  // Data parallelism: the gradient, complete after its layer's backward,
  // goes to its reduction (the reducer sends each rank its piece: what this
  // rank sends is in the event); after a step.
  kReduceScatter,
};
const char* TransferOpName(TransferOp op);

struct TransferAction {
  TransferOp op;
  TensorId tensor;

  bool operator==(const TransferAction& o) const { return op == o.op && tensor == o.tensor; }
};

// A step the plan streams through host memory (memory/runtime/staging.h):
// its batch in slices of `images`, `buffers` slices per staging block (1 or
// 2). images 0: the runtime's own choice at the step (memory.chunk).
struct StreamedStep {
  int64_t images = 0;
  int buffers = 0;
};

// TransferPlan::late_parameters: which visits of a parameter come late.
constexpr uint8_t kLateForward = 1;
constexpr uint8_t kLateBackward = 2;

struct TransferPlan {
  Phase phase = Phase::kTrain;
  std::vector<std::vector<TransferAction>> before;  // per step
  std::vector<std::vector<TransferAction>> after;   // per step
  // The lifetimes the plan's releases follow (a recomputation plan keeps a
  // dropped tensor's sources alive until it is dropped).
  Liveness liveness;
  // Which tensors may be dropped and rebuilt, and how (segments).
  RecomputePlan recompute;
  // The tensor cache evicts on demand when an allocation does not fit.
  bool evict_on_demand = false;
  // A prefetch that does not fit stops the scan of its list: the tensors
  // after it are needed later and wait for the next step's list.
  bool prefetch_in_order = false;
  // Per step, or empty: the steps the plan streams, with the slice and the
  // buffers it gives them. The runtime streams them as told, neither
  // shrinking the slice nor dropping a buffer; a step it cannot stream that
  // way is an error.
  std::vector<StreamedStep> streamed;
  // Per step, or empty: the algorithm of each of the step's operations, as
  // an index into its candidates (the backend's list, AlgorithmRegistry),
  // and so its workspace. The runtime runs them as given (a recomputation
  // reruns its forward's); a step with none listed gets what its workspace
  // policy picks under the free memory (memory.workspace).
  std::vector<std::vector<int>> algorithms;
  // Per tensor, or empty: parameters living in host memory whose prefetch
  // one step ahead the plan leaves out, for their forward step
  // (kLateForward), their backward step (kLateBackward) or both. Such a step
  // brings them in when it reads them: the step before keeps their room, the
  // step waits for their copy.
  std::vector<uint8_t> late_parameters;

  int num_steps() const { return static_cast<int>(before.size()); }
  // The plan's streaming of `step`, or null where it leaves it to the runtime.
  const StreamedStep* StreamedAt(int step) const {
    if (step < 0 || step >= static_cast<int>(streamed.size())) return nullptr;
    return streamed[step].images > 0 ? &streamed[step] : nullptr;
  }
  // The algorithms the plan gives `step`, or null where it leaves them to the
  // workspace policy.
  const std::vector<int>* AlgorithmsAt(int step) const {
    if (step < 0 || step >= static_cast<int>(algorithms.size())) return nullptr;
    return algorithms[step].empty() ? nullptr : &algorithms[step];
  }
  // The visits of parameter `id` whose prefetch the plan leaves out.
  uint8_t LateAt(TensorId id) const {
    return id >= 0 && id < static_cast<TensorId>(late_parameters.size()) ? late_parameters[id] : 0;
  }
  void Resize(int steps);
  // Counts of each action (for reports and tests).
  int Count(TransferOp op) const;
  // One line per step with actions: "12 after: begin_offload conv1, ...".
  std::string ToString(const Schedule& schedule) const;
};

// The plans of both phases: what a scheduler makes (memory/scheduler_registry.h)
// and the runtime executes.
struct PhasePlans {
  TransferPlan train;
  TransferPlan eval;
};

}  // namespace spill

#endif  // SPILL_MEMORY_TRANSFER_PLAN_H_
