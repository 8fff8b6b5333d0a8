// Cost-aware recomputation (SuperNeurons §3.4): which tensors are dropped
// after forward and rebuilt in backward, and how.
//
// Droppable tensors are the outputs of cheap layers (pooling, activation,
// BatchNorm, LRN, dropout, concat, add) that backward needs; rebuilding one
// reruns its layer's forward from its inputs, rebuilding dropped inputs first
// (dropout reuses its saved mask, BatchNorm its saved statistics). Dropped
// tensors that rebuild from one another form a segment, which ends at
// checkpoint tensors. Per segment:
//   * speed-centric: a rebuilt tensor stays until its last use, so each is
//     recomputed once; it costs the segment's bytes at once;
//   * memory-centric: tensors rebuilt only to rebuild another are dropped
//     again right after, so each backward step recomputes its chain;
//   * cost-aware (the default) chooses speed-centric when the segment's
//     memory (its tensors plus the largest backward step among its layers)
//     stays within l_peak, the largest single step's memory, and
//     memory-centric otherwise.
// A memory-centric segment of L tensors would rerun its chain for every
// backward step: L(L+1)/2 recomputations. One longer than 64 tensors (a
// chain of cheap layers) is cut instead into runs of ceil(sqrt(L)) tensors,
// the last of each kept as a checkpoint and every run rebuilt speed-centric:
// L recomputations and about 2 sqrt(L) of its tensors live at once.
// A pure function of the schedule and sizes.
#ifndef SPILL_MEMORY_RECOMPUTE_POLICY_H_
#define SPILL_MEMORY_RECOMPUTE_POLICY_H_

#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/schedule/declarations.h"
#include "framework/schedule/schedule.h"
#include "memory/liveness.h"

namespace spill {

enum class RecomputeStrategy { kCostAware, kSpeed, kMemory };
const char* RecomputeStrategyName(RecomputeStrategy s);
StatusOr<RecomputeStrategy> ParseRecomputeStrategy(const std::string& text);

struct RecomputePlan {
  std::vector<bool> droppable;  // per tensor
  // Per tensor: the last step it must stay for - its own last use, or later
  // when a dropped tensor is rebuilt from it. Only for eager plans.
  std::vector<int> keep_until;
  std::vector<std::vector<TensorId>> drop_after;  // per step: dropped after it (eager)
  std::vector<int> segment;                       // per tensor: segment id, -1 if none
  std::vector<bool> keep;                         // per segment: speed-centric
  std::vector<size_t> segment_bytes;              // per segment: its tensors plus largest step
  size_t l_peak = 0;                              // largest single step's bytes
};

// `is_loss` marks loss layers, whose output is read right away in backward
// and never worth dropping. `eager` false: nothing is dropped on a schedule
// (the tensor cache drops droppable tensors when it needs room).
//
// A rebuild needs the producer's inputs and saved tensors (its sources). The
// runtime keeps a source for as long as a dropped tensor depends on it; for
// that, the source must outlive the moment its dependent is dropped, so
// `eager` plans say in `keep_until` how far each source's life extends.
// Pure: `liveness` is read, never changed.
RecomputePlan PlanRecompute(const Schedule& schedule, const Liveness& liveness,
                            const std::vector<LayerCost>& costs, const std::vector<bool>& is_loss,
                            RecomputeStrategy strategy, bool eager);

// `liveness` with every tensor's last use moved to `plan.keep_until` (the
// identity when the plan has none).
Liveness ExtendLiveness(const Liveness& liveness, const RecomputePlan& plan);

// The distinct inputs and saved tensors of the layer that produced `id`.
std::vector<TensorId> RebuildSources(const Schedule& schedule, TensorId id);

// Bytes step `s` needs on the device at once: what it reads and writes, and
// its workspace, each rounded to pool blocks (the paper's l_i).
size_t StepBytes(const Schedule& schedule, int s);

}  // namespace spill

#endif  // SPILL_MEMORY_RECOMPUTE_POLICY_H_
