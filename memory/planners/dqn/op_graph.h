// The graph of one training iteration the DQN planner embeds (the paper's
// §4.2-4.4): one node per operation on a transient tensor - each step's
// reads, then its writes, in schedule order - plus node 0, which stands for
// "do nothing". Edges join consecutive operations and successive operations
// on the same tensor; an edge's weight is the time between the two
// operations (steps timed on the device profile with every tensor kept),
// over the iteration's time.
//
// Node features x_v (the paper's six), static but the last:
//   0  size of the tensor, over the memory limit
//   1  its copy time either way, over the iteration time
//   2  the time to rerun its layer (0 when it cannot be rebuilt)
//   3  the time until the next operation on it (0: none)
//   4  the action the node represents: 0 none, 0.5 offload, 1 drop
//   5  whether that action is open now: 1 open, 0.5 taken, 0 not (state)
// Action nodes, one action per node at most: dropping X is X's first
// write; offloading X its last forward read, or its first backward read
// when X has none distinct from that write.
#ifndef SPILL_MEMORY_PLANNERS_DQN_OP_GRAPH_H_
#define SPILL_MEMORY_PLANNERS_DQN_OP_GRAPH_H_

#include <vector>

#include "memory/evaluate.h"

namespace spill {

constexpr int kStaticFeatures = 5;  // features 0-4; feature 5 is the state's

struct OpGraph {
  int num_nodes = 0;
  // Static features, kStaticFeatures per node, node after node.
  std::vector<float> features;
  // Neighbors of each node (itself included), in CSR form.
  std::vector<int> neighbor_start, neighbors;
  // Per node: the sum of the weights of its edges.
  std::vector<float> weight_sum;
  // Per candidate (EvalModel::candidates order): its action nodes (-1: none)
  // and the node the agent stands at when deciding it (its first write).
  std::vector<int> offload_node, drop_node, current_node;
};

constexpr int kNothingNode = 0;

OpGraph BuildOpGraph(const EvalModel& model, size_t limit);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_DQN_OP_GRAPH_H_
