#include "framework/graph/layouts.h"

#include <numeric>

namespace spill {
namespace {

// Union-find over the activations that tied layers join.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int t) {
    while (parent_[t] != t) t = parent_[t] = parent_[parent_[t]];
    return t;
  }
  void Join(int a, int b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<int> parent_;
};

bool SinglePixel(const Shape& s) { return s.h() * s.w() == 1; }

}  // namespace

std::vector<Layout> ChooseLayouts(const std::vector<Shape>& activations,
                                  const std::vector<LayoutNode>& layers) {
  const int n = static_cast<int>(activations.size());
  Groups groups(n);
  for (const LayoutNode& layer : layers) {
    if (layer.rule != LayoutRule::kTied) continue;
    std::vector<int> tensors = layer.inputs;
    tensors.insert(tensors.end(), layer.outputs.begin(), layer.outputs.end());
    for (size_t i = 1; i < tensors.size(); ++i) groups.Join(tensors[0], tensors[i]);
  }
  std::vector<bool> open(n, true);
  for (int t = 0; t < n; ++t) {
    if (activations[t].c() % kChannelBlock != 0) open[groups.Find(t)] = false;
  }
  // Each group's layout: what the free layers around it prefer, plain where
  // they disagree or none touches it.
  std::vector<Layout> wanted(n, Layout::kPlain);
  std::vector<bool> asked(n, false);
  for (const LayoutNode& layer : layers) {
    for (const std::vector<int>* list : {&layer.inputs, &layer.outputs}) {
      for (int t : *list) {
        const int g = groups.Find(t);
        if (layer.rule == LayoutRule::kPlain) {
          if (!SinglePixel(activations[t])) open[g] = false;
          continue;
        }
        if (layer.rule != LayoutRule::kFree) continue;
        if (asked[g] && wanted[g] != layer.prefers) open[g] = false;
        asked[g] = true;
        wanted[g] = layer.prefers;
      }
    }
  }
  std::vector<Layout> layouts(n, Layout::kPlain);
  for (int t = 0; t < n; ++t) {
    const int g = groups.Find(t);
    if (open[g] && asked[g] && !SinglePixel(activations[t])) layouts[t] = wanted[g];
  }
  return layouts;
}

}  // namespace spill
