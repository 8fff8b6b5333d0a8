// Which activations leave the plain layout (framework/device/tensor.h).
//
// Convolutions on the CPU compute in oneDNN's layouts: the blocked nChw16c
// (what its AVX-512 kernels compute in, the network's default) or
// channels-last NHWC (what its AMX bfloat16 kernels compute in: a network
// takes it where its convolutions prefer it, bfloat16 activations on a
// processor with AMX, or where NetOptions::layout says so). An activation that passes from
// one convolution to the next through layers that can work in that layout
// too (batch norm, ReLU, addition, concatenation, pooling) stays in it all
// the way, and no reorder runs around the convolutions. Each layer implementation declares how it
// handles layouts:
//   kPlain  every input and output plain (the default: a layer that says
//           nothing is never handed another layout)
//   kTied   one layout for all its inputs and outputs, any of them
//           (elementwise layers, batch norm, pooling, joins)
//   kFree   each input and output in any layout, independently: the layer
//           converts (convolution); `prefers` is the one it computes in
// Layers tied together share a layout; such a group takes the layout its
// free layers prefer when every tensor in it divides into whole blocks of 16
// channels (so no layout costs padding), no layer touching it needs plain,
// and its free layers agree. A tensor of 1x1 planes is the same bytes in
// every layout: it never forces its group plain, and is always labelled
// plain. A gradient takes its activation's layout.
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
  Layout prefers = Layout::kBlocked16;  // kFree: the layout it computes in
};

// The layout of every activation.
std::vector<Layout> ChooseLayouts(const std::vector<Shape>& activations,
                                  const std::vector<LayoutNode>& layers);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_LAYOUTS_H_
