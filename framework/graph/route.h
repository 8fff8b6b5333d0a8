// The execution route of a nonlinear network (SuperNeurons, Algorithm 1).
//
// A depth-first walk from the input layers, where a join (a layer with several
// producers) is entered only when its counter shows that every producer has
// run. The result is the forward order; backward runs it in reverse. The walk
// is iterative, so networks with tens of thousands of layers do not exhaust
// the stack.
#ifndef SPILL_FRAMEWORK_GRAPH_ROUTE_H_
#define SPILL_FRAMEWORK_GRAPH_ROUTE_H_

#include <vector>

#include "framework/base/status.h"

namespace spill {

// Layers are 0..n-1. prev[i]: distinct producers of layer i; next[i]:
// distinct consumers of layer i, in the order the walk should visit them
// (file order).
struct RouteGraph {
  std::vector<std::vector<int>> prev;
  std::vector<std::vector<int>> next;

  int size() const { return static_cast<int>(prev.size()); }
  // Adds the edge producer -> consumer, ignoring duplicates.
  void AddEdge(int producer, int consumer);
  void Resize(int n);
};

// Layers on a cycle, in order (the first repeated at the end), or empty.
std::vector<int> FindCycle(const RouteGraph& graph);

// The forward order. Fails when the graph has a cycle or a layer cannot be
// reached from a layer without producers; the message names the layers using
// `names`.
StatusOr<std::vector<int>> ConstructRoute(const RouteGraph& graph,
                                          const std::vector<std::string>& names);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_ROUTE_H_
