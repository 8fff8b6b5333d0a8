#include "memory/planners/dqn/op_graph.h"

#include <algorithm>
#include <cmath>

namespace spill {
namespace {

constexpr float kOffloadAction = 0.5f, kDropAction = 1.0f;

struct Op {
  TensorId tensor;
  int step;
  bool write;
};

}  // namespace

OpGraph BuildOpGraph(const EvalModel& m, size_t limit) {
  const Schedule& schedule = *m.schedule;
  std::vector<Op> ops = {{kNoTensor, -1, false}};  // node 0: do nothing
  for (int s = 0; s < m.num_steps(); ++s) {
    for (bool write : {false, true}) {
      for (TensorId t : write ? schedule.steps[s].writes : schedule.steps[s].reads) {
        if (IsTransient(schedule.tensors[t].kind)) ops.push_back({t, s, write});
      }
    }
  }
  OpGraph g;
  g.num_nodes = static_cast<int>(ops.size());
  // Times: the iteration with every tensor kept.
  Evaluator evaluator(m);
  const Evaluation base = evaluator.Run(KeepAll(m));
  const double seconds = std::max(base.seconds, 1e-12);
  auto time = [&](int node) { return ops[node].step < 0 ? 0.0 : base.step_end[ops[node].step]; };
  const LinkProfile& link = m.profile.link;
  std::vector<std::vector<int>> adjacent(g.num_nodes);
  std::vector<int> previous(schedule.tensors.size(), -1);
  std::vector<int> next(g.num_nodes, -1);
  for (int v = 1; v < g.num_nodes; ++v) {
    if (v > 1) {
      adjacent[v].push_back(v - 1);
      adjacent[v - 1].push_back(v);
    }
    const TensorId t = ops[v].tensor;
    if (previous[t] >= 0 && previous[t] != v - 1) {
      adjacent[v].push_back(previous[t]);
      adjacent[previous[t]].push_back(v);
    }
    if (previous[t] >= 0) next[previous[t]] = v;
    previous[t] = v;
  }
  g.features.assign(static_cast<size_t>(g.num_nodes) * kStaticFeatures, 0.0f);
  g.weight_sum.assign(g.num_nodes, 0.0f);
  g.neighbor_start.push_back(0);
  for (int v = 0; v < g.num_nodes; ++v) {
    g.neighbors.push_back(v);
    for (int u : adjacent[v]) {
      g.neighbors.push_back(u);
      g.weight_sum[v] += static_cast<float>(std::fabs(time(u) - time(v)) / seconds);
    }
    g.neighbor_start.push_back(static_cast<int>(g.neighbors.size()));
    if (v == kNothingNode) continue;
    const TensorId t = ops[v].tensor;
    const double bytes = static_cast<double>(schedule.tensors[t].bytes);
    float* x = &g.features[static_cast<size_t>(v) * kStaticFeatures];
    x[0] = static_cast<float>(bytes / std::max<double>(limit, 1));
    x[1] = static_cast<float>(
        (link.latency_seconds + bytes / std::max(link.d2h_bytes_per_second, 1.0)) / seconds);
    if (m.droppable[t]) {
      x[2] = static_cast<float>(m.costs.recompute_seconds[schedule.tensors[t].layer] / seconds);
    }
    if (next[v] >= 0) x[3] = static_cast<float>((time(next[v]) - time(v)) / seconds);
  }
  // Action nodes of each candidate.
  std::vector<int> first_write(schedule.tensors.size(), -1),
      last_forward_read(schedule.tensors.size(), -1),
      first_backward_read(schedule.tensors.size(), -1);
  for (int v = 1; v < g.num_nodes; ++v) {
    const Op& op = ops[v];
    if (op.write && first_write[op.tensor] < 0) first_write[op.tensor] = v;
    if (!op.write && op.step < m.num_layers) last_forward_read[op.tensor] = v;
    if (!op.write && op.step >= m.num_layers && first_backward_read[op.tensor] < 0) {
      first_backward_read[op.tensor] = v;
    }
  }
  for (TensorId t : m.candidates) {
    const int write = first_write[t];
    int offload = -1, drop = -1;
    if (m.droppable[t]) drop = write;
    if (m.offloadable[t]) {
      offload = last_forward_read[t] >= 0 && last_forward_read[t] != drop ? last_forward_read[t]
                : drop != write                                           ? write
                                                                          : first_backward_read[t];
    }
    if (drop >= 0) g.features[static_cast<size_t>(drop) * kStaticFeatures + 4] = kDropAction;
    if (offload >= 0) {
      g.features[static_cast<size_t>(offload) * kStaticFeatures + 4] = kOffloadAction;
    }
    g.offload_node.push_back(offload);
    g.drop_node.push_back(drop);
    g.current_node.push_back(write);
  }
  return g;
}

}  // namespace spill
