// Which activations are kept in a blocked layout (framework/device/tensor.h).
//
// Convolutions on the CPU compute in oneDNN's blocked layout; an activation
// that passes from one convolution to the next through layers that can work
// in that layout too (batch norm, ReLU, addition, pooling) stays blocked all
// the way, and no reorder runs around the convolutions. Each layer
// implementation declares how it handles layouts:
//   kPlain  every input and output plain (the default: a layer that says
//           nothing is never handed a blocked tensor)
//   kTied   one layout for all its inputs and outputs, either one
//           (elementwise layers, batch norm, pooling, joins)
//   kFree   each input and output in either layout, independently: the
//           layer converts (convolution)
// Layers tied together share a layout; such a group is blocked when every
// tensor in it divides into whole channel blocks (so blocked costs no
// padding) and no layer touching it needs plain. A tensor of 1x1 planes is
// the same bytes in both layouts: it never forces its group plain, and is
// always labelled plain. A gradient takes its activation's layout.
//
// A pure function of the wiring, shapes and rules: the planner, the run and
// every memory mode see the same layouts.
#ifndef SPILL_FRAMEWORK_GRAPH_LAYOUTS_H_
#define SPILL_FRAMEWORK_GRAPH_LAYOUTS_H_

#include <vector>

#include "framework/device/tensor.h"

namespace spill {

enum class LayoutRule { kPlain, kTied, kFree };

// One layer as the layout choice sees it: its rule and the activations it
// reads and writes (indices into the shapes).
struct LayoutNode {
  LayoutRule rule = LayoutRule::kPlain;
  std::vector<int> inputs;
  std::vector<int> outputs;
};

// The layout of every activation.
std::vector<Layout> ChooseLayouts(const std::vector<Shape>& activations,
                                  const std::vector<LayoutNode>& layers);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_LAYOUTS_H_
