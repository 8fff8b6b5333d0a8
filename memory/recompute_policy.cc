#include "memory/recompute_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "memory/heap_pool.h"

namespace spill {
namespace {

int Find(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

const char* RecomputeStrategyName(RecomputeStrategy s) {
  switch (s) {
    case RecomputeStrategy::kCostAware:
      return "cost_aware";
    case RecomputeStrategy::kSpeed:
      return "speed";
    case RecomputeStrategy::kMemory:
      return "memory";
  }
  return "?";
}

StatusOr<RecomputeStrategy> ParseRecomputeStrategy(const std::string& text) {
  if (text == "cost_aware") return RecomputeStrategy::kCostAware;
  if (text == "speed") return RecomputeStrategy::kSpeed;
  if (text == "memory") return RecomputeStrategy::kMemory;
  return InvalidArgument("unknown recomputation strategy '" + text +
                         "'; expected cost_aware, speed or memory");
}

size_t StepBytes(const Schedule& schedule, int s) {
  const Step& step = schedule.steps[s];
  size_t bytes = RoundToBlocks(step.workspace_bytes);
  auto add = [&](const std::vector<TensorId>& ids, const std::vector<TensorId>& skip) {
    for (TensorId t : ids) {
      if (!IsTransient(schedule.tensors[t].kind)) continue;
      if (std::find(skip.begin(), skip.end(), t) != skip.end()) continue;
      bytes += RoundToBlocks(schedule.tensors[t].bytes);
    }
  };
  add(step.reads, {});
  add(step.writes, step.reads);
  return bytes;
}

namespace {

bool Droppable(const Schedule& schedule, const Liveness& liveness,
               const std::vector<LayerCost>& costs, const std::vector<bool>& is_loss, TensorId t) {
  const TensorInfo& info = schedule.tensors[t];
  return info.kind == TensorKind::kActivation && costs[info.layer] == LayerCost::kCheap &&
         !is_loss[info.layer] && liveness.last_use[t] >= schedule.num_layers();
}

}  // namespace

std::vector<TensorId> RebuildSources(const Schedule& schedule, TensorId id) {
  const LayerTensors& lt = schedule.layers[schedule.tensors[id].layer];
  std::vector<TensorId> sources;
  for (const std::vector<TensorId>* group : {&lt.inputs, &lt.aux}) {
    for (TensorId x : *group) {
      if (std::find(sources.begin(), sources.end(), x) == sources.end()) sources.push_back(x);
    }
  }
  return sources;
}

namespace {

// Drops happen after a tensor's last forward use; a source must live until
// then. Later tensors first: a source's own drop moves with its dependents.
std::vector<int> KeepUntil(const Schedule& schedule, const std::vector<bool>& droppable,
                           std::vector<int>* drop_step, const Liveness& liveness) {
  std::vector<int> keep = liveness.last_use;
  for (TensorId d = static_cast<TensorId>(droppable.size()) - 1; d >= 0; --d) {
    if (!droppable[d]) continue;
    for (TensorId x : RebuildSources(schedule, d)) {
      if (droppable[x]) (*drop_step)[x] = std::max((*drop_step)[x], (*drop_step)[d]);
      keep[x] = std::max(keep[x], (*drop_step)[d]);
    }
  }
  return keep;
}

}  // namespace

Liveness ExtendLiveness(const Liveness& liveness, const RecomputePlan& plan) {
  if (plan.keep_until.empty()) return liveness;
  Liveness extended = liveness;
  extended.last_use = plan.keep_until;
  for (auto& list : extended.dies_after) list.clear();
  for (TensorId t = 0; t < static_cast<TensorId>(extended.last_use.size()); ++t) {
    if (extended.last_use[t] >= 0) extended.dies_after[extended.last_use[t]].push_back(t);
  }
  return extended;
}

namespace {

// Segments: droppable tensors joined to the droppable inputs they are
// rebuilt from, numbered in the order of their first tensor; per segment its
// tensors' bytes plus its largest backward step.
void FindSegments(const Schedule& schedule, RecomputePlan* plan) {
  const size_t count = schedule.tensors.size();
  std::vector<int> parent(count);
  std::iota(parent.begin(), parent.end(), 0);
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    if (!plan->droppable[t]) continue;
    for (TensorId in : schedule.layers[schedule.tensors[t].layer].inputs) {
      if (plan->droppable[in]) parent[Find(parent, t)] = Find(parent, in);
    }
  }
  plan->segment.assign(count, -1);
  plan->segment_bytes.clear();
  std::vector<int> ids(count, -1);
  std::vector<size_t> largest_step;
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    if (!plan->droppable[t]) continue;
    int root = Find(parent, t);
    if (ids[root] < 0) {
      ids[root] = static_cast<int>(plan->segment_bytes.size());
      plan->segment_bytes.push_back(0);
      largest_step.push_back(0);
    }
    const int seg = plan->segment[t] = ids[root];
    plan->segment_bytes[seg] += RoundToBlocks(schedule.tensors[t].bytes);
    const int layer = schedule.tensors[t].layer;
    largest_step[seg] =
        std::max(largest_step[seg], StepBytes(schedule, schedule.backward_step[layer]));
  }
  for (size_t seg = 0; seg < plan->segment_bytes.size(); ++seg) {
    plan->segment_bytes[seg] += largest_step[seg];
  }
}

// A memory-centric segment of L tensors reruns its chain for every backward
// step that reads one: up to L(L+1)/2 recomputations, quadratic in depth (18
// million for a chain of 6,000 cheap layers). Past kMaxMemoryCentricTensors
// it is cut into runs of ceil(sqrt(L)) tensors, in the order they are
// computed; the last tensor of each run is kept (a checkpoint, no longer
// droppable) and every run is rebuilt speed-centric - each tensor recomputed
// once, and about 2 sqrt(L) of the segment's tensors live at once (the kept
// ones and one run): Chen et al.'s sqrt(n) checkpointing. Returns, per
// tensor, whether it belonged to a cut segment.
constexpr size_t kMaxMemoryCentricTensors = 64;

std::vector<bool> CutLongSegments(const std::vector<bool>& memory_centric, RecomputePlan* plan) {
  std::vector<std::vector<TensorId>> members(memory_centric.size());
  for (TensorId t = 0; t < static_cast<TensorId>(plan->segment.size()); ++t) {
    const int seg = plan->segment[t];
    if (seg >= 0 && memory_centric[seg]) members[seg].push_back(t);
  }
  std::vector<bool> cut(plan->segment.size(), false);
  for (const std::vector<TensorId>& tensors : members) {
    if (tensors.size() <= kMaxMemoryCentricTensors) continue;
    const size_t run =
        static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(tensors.size()))));
    for (size_t i = 0; i < tensors.size(); ++i) {
      cut[tensors[i]] = true;
      if ((i + 1) % run == 0) plan->droppable[tensors[i]] = false;
    }
  }
  return cut;
}

// Speed- or memory-centric per segment (see the header), long memory-centric
// segments cut into speed-centric runs.
void ChooseStrategies(const Schedule& schedule, RecomputeStrategy strategy, RecomputePlan* plan) {
  auto memory_centric = [&](size_t seg) {
    return strategy == RecomputeStrategy::kMemory ||
           (strategy == RecomputeStrategy::kCostAware && plan->segment_bytes[seg] > plan->l_peak);
  };
  FindSegments(schedule, plan);
  std::vector<bool> centric(plan->segment_bytes.size());
  for (size_t seg = 0; seg < centric.size(); ++seg) centric[seg] = memory_centric(seg);
  const std::vector<bool> cut = CutLongSegments(centric, plan);
  FindSegments(schedule, plan);
  plan->keep.assign(plan->segment_bytes.size(), true);
  for (TensorId t = 0; t < static_cast<TensorId>(plan->segment.size()); ++t) {
    const int seg = plan->segment[t];
    if (seg >= 0 && !cut[t]) plan->keep[seg] = !memory_centric(seg);
  }
}

}  // namespace

RecomputePlan PlanRecompute(const Schedule& schedule, const Liveness& liveness,
                            const std::vector<LayerCost>& costs, const std::vector<bool>& is_loss,
                            RecomputeStrategy strategy, bool eager) {
  const int n = schedule.num_layers();
  const size_t count = schedule.tensors.size();
  RecomputePlan plan;
  plan.droppable.assign(count, false);
  plan.drop_after.resize(2 * n);
  for (int s = 0; s < 2 * n; ++s) plan.l_peak = std::max(plan.l_peak, StepBytes(schedule, s));
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    plan.droppable[t] = Droppable(schedule, liveness, costs, is_loss, t);
  }
  ChooseStrategies(schedule, strategy, &plan);
  if (!eager) return plan;
  std::vector<int> last_forward_use(count, -1);
  for (int s = 0; s < n; ++s) {
    for (TensorId t : schedule.steps[s].reads) last_forward_use[t] = s;
    for (TensorId t : schedule.steps[s].writes)
      last_forward_use[t] = std::max(last_forward_use[t], s);
  }
  plan.keep_until = KeepUntil(schedule, plan.droppable, &last_forward_use, liveness);
  // Dependents before their sources within a step: a dropped tensor's
  // sources are then still held when they are scheduled to die.
  for (TensorId t = static_cast<TensorId>(count) - 1; t >= 0; --t) {
    if (plan.droppable[t]) plan.drop_after[last_forward_use[t]].push_back(t);
  }
  return plan;
}

}  // namespace spill
