#include "framework/graph/route.h"

#include <algorithm>
#include <string>

namespace spill {

void RouteGraph::Resize(int n) {
  prev.resize(n);
  next.resize(n);
}

void RouteGraph::AddEdge(int producer, int consumer) {
  auto& out = next[producer];
  if (std::find(out.begin(), out.end(), consumer) != out.end()) return;
  out.push_back(consumer);
  prev[consumer].push_back(producer);
}

std::vector<int> FindCycle(const RouteGraph& graph) {
  enum Color { kWhite, kGray, kBlack };
  const int n = graph.size();
  std::vector<Color> color(n, kWhite);
  std::vector<int> parent(n, -1);
  for (int root = 0; root < n; ++root) {
    if (color[root] != kWhite) continue;
    // Explicit stack of (layer, next child index).
    std::vector<std::pair<int, size_t>> stack = {{root, 0}};
    color[root] = kGray;
    while (!stack.empty()) {
      auto& [layer, child] = stack.back();
      if (child == graph.next[layer].size()) {
        color[layer] = kBlack;
        stack.pop_back();
        continue;
      }
      int next = graph.next[layer][child++];
      if (color[next] == kGray) {
        std::vector<int> cycle = {next};
        for (int at = layer; at != next; at = parent[at]) cycle.push_back(at);
        std::reverse(cycle.begin() + 1, cycle.end());
        cycle.push_back(next);
        return cycle;
      }
      if (color[next] == kWhite) {
        color[next] = kGray;
        parent[next] = layer;
        stack.push_back({next, 0});
      }
    }
  }
  return {};
}

StatusOr<std::vector<int>> ConstructRoute(const RouteGraph& graph,
                                          const std::vector<std::string>& names) {
  const int n = graph.size();
  std::vector<int> cycle = FindCycle(graph);
  if (!cycle.empty()) {
    std::string path;
    for (int layer : cycle) path += (path.empty() ? "" : " -> ") + names[layer];
    return InvalidArgument("the network has a cycle: " + path);
  }
  std::vector<int> counter(n, 0);
  std::vector<int> route;
  route.reserve(n);
  std::vector<std::pair<int, size_t>> stack;  // (layer, next consumer to visit)
  // Entering a layer counts one finished producer; the layer runs once all
  // of its producers have run (Algorithm 1, lines 4-7).
  auto enter = [&](int layer) {
    if (++counter[layer] < static_cast<int>(graph.prev[layer].size())) return;
    route.push_back(layer);
    stack.push_back({layer, 0});
  };
  for (int root = 0; root < n; ++root) {
    if (!graph.prev[root].empty()) continue;
    enter(root);
    while (!stack.empty()) {
      auto& [layer, child] = stack.back();
      if (child == graph.next[layer].size()) {
        stack.pop_back();
        continue;
      }
      int next = graph.next[layer][child++];
      enter(next);
    }
  }
  if (static_cast<int>(route.size()) != n) {
    for (int i = 0; i < n; ++i) {
      if (counter[i] < static_cast<int>(graph.prev[i].size()) || graph.prev[i].empty()) {
        if (std::find(route.begin(), route.end(), i) == route.end()) {
          return InvalidArgument("layer '" + names[i] + "' cannot be reached from an input layer");
        }
      }
    }
    return Internal("route is incomplete");
  }
  return route;
}

}  // namespace spill
