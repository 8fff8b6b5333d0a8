#include "memory/recompute_policy.h"

#include <algorithm>
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

RecomputePlan PlanRecompute(const Schedule& schedule, const Liveness& liveness,
                            const std::vector<LayerCost>& costs, const std::vector<bool>& is_loss,
                            RecomputeStrategy strategy, bool eager) {
  const int n = schedule.num_layers();
  const size_t count = schedule.tensors.size();
  RecomputePlan plan;
  plan.droppable.assign(count, false);
  plan.drop_after.resize(2 * n);
  plan.segment.assign(count, -1);
  for (int s = 0; s < 2 * n; ++s) plan.l_peak = std::max(plan.l_peak, StepBytes(schedule, s));
  std::vector<int> last_forward_use(count, -1);
  for (int s = 0; s < n; ++s) {
    for (TensorId t : schedule.steps[s].reads) last_forward_use[t] = s;
    for (TensorId t : schedule.steps[s].writes)
      last_forward_use[t] = std::max(last_forward_use[t], s);
  }
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    plan.droppable[t] = Droppable(schedule, liveness, costs, is_loss, t);
  }
  if (eager) {
    plan.keep_until = KeepUntil(schedule, plan.droppable, &last_forward_use, liveness);
    // Dependents before their sources within a step: a dropped tensor's
    // sources are then still held when they are scheduled to die.
    for (TensorId t = static_cast<TensorId>(count) - 1; t >= 0; --t) {
      if (plan.droppable[t]) plan.drop_after[last_forward_use[t]].push_back(t);
    }
  }
  // Segments: droppable tensors joined to the droppable inputs they are rebuilt from.
  std::vector<int> parent(count);
  std::iota(parent.begin(), parent.end(), 0);
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    if (!plan.droppable[t]) continue;
    for (TensorId in : schedule.layers[schedule.tensors[t].layer].inputs) {
      if (plan.droppable[in]) parent[Find(parent, t)] = Find(parent, in);
    }
  }
  std::vector<int> ids(count, -1);
  std::vector<size_t> largest_step;
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    if (!plan.droppable[t]) continue;
    int root = Find(parent, t);
    if (ids[root] < 0) {
      ids[root] = static_cast<int>(plan.segment_bytes.size());
      plan.segment_bytes.push_back(0);
      largest_step.push_back(0);
    }
    const int seg = plan.segment[t] = ids[root];
    plan.segment_bytes[seg] += RoundToBlocks(schedule.tensors[t].bytes);
    const int layer = schedule.tensors[t].layer;
    largest_step[seg] =
        std::max(largest_step[seg], StepBytes(schedule, schedule.backward_step[layer]));
  }
  for (size_t seg = 0; seg < plan.segment_bytes.size(); ++seg) {
    plan.segment_bytes[seg] += largest_step[seg];
    const bool keep =
        strategy == RecomputeStrategy::kSpeed ||
        (strategy == RecomputeStrategy::kCostAware && plan.segment_bytes[seg] <= plan.l_peak);
    plan.keep.push_back(keep);
  }
  return plan;
}

}  // namespace spill
