#include "layers/cpu/conv_layouts.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "layers/cpu/blocked.h"

namespace spill {
namespace cpu {
namespace {

// Copies start at multiples of this many bytes from the workspace's start.
constexpr size_t kAlignment = 64;

size_t Aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

Shape InputShape(const ConvGeometry& g) { return Shape(g.batch, g.channels, g.height, g.width); }
Shape OutputShape(const ConvGeometry& g) {
  return Shape(g.batch, g.filters, g.out_height, g.out_width);
}

// The geometry the algorithm sees: plain unless it computes blocked.
ConvGeometry Inner(const ConvAlgorithm& a, const ConvGeometry& g) {
  if (a.computes_blocked()) return g;
  ConvGeometry plain = g;
  plain.input_layout = plain.output_layout = Layout::kPlain;
  return plain;
}

// Where an operation's plain copies go, from the workspace's start; the
// algorithm's own workspace follows them.
struct CopyPlan {
  bool input = false, output = false;  // copies of x or dx, of y or dy
  size_t output_offset = 0, rest_offset = 0;
};

CopyPlan PlanCopies(const ConvAlgorithm& a, const ConvGeometry& g) {
  CopyPlan l;
  l.input = !a.computes_blocked() && g.input_layout == Layout::kBlocked16;
  l.output = !a.computes_blocked() && g.output_layout == Layout::kBlocked16;
  l.output_offset = l.input ? Aligned(InputShape(g).bytes()) : 0;
  l.rest_offset = l.output_offset + (l.output ? Aligned(OutputShape(g).bytes()) : 0);
  return l;
}

// The copies' addresses in a workspace (null where there is none).
struct Copies {
  float* input = nullptr;
  float* output = nullptr;
  void* rest = nullptr;
};

Copies Place(const ConvAlgorithm& a, const ConvGeometry& g, void* workspace) {
  const CopyPlan l = PlanCopies(a, g);
  char* base = static_cast<char*>(workspace);
  Copies c;
  if (l.input) c.input = reinterpret_cast<float*>(base);
  if (l.output) c.output = reinterpret_cast<float*>(base + l.output_offset);
  c.rest = l.rest_offset == 0 ? workspace : base + l.rest_offset;
  return c;
}

}  // namespace

bool BlockedLayoutsPay() {
  static const bool pays = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  return pays;
}

size_t ConvWorkspaceBytes(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op) {
  return PlanCopies(a, g).rest_offset + a.WorkspaceBytes(Inner(a, g), op);
}

void ConvForward(const ConvAlgorithm& a, const ConvGeometry& g, const float* x, const float* w,
                 const float* bias, float* y, void* workspace) {
  const Copies c = Place(a, g, workspace);
  if (c.input) BlockedToPlain(x, InputShape(g), c.input);
  a.Forward(Inner(a, g), c.input ? c.input : x, w, bias, c.output ? c.output : y, c.rest);
  if (c.output) PlainToBlocked(c.output, OutputShape(g), y);
}

// An accumulating call adds into a plain copy of dx, so that the sum rounds
// as it does on plain tensors.
void ConvBackwardData(const ConvAlgorithm& a, const ConvGeometry& g, const float* dy,
                      const float* w, float* dx, bool accumulate, void* workspace) {
  const Copies c = Place(a, g, workspace);
  if (c.output) BlockedToPlain(dy, OutputShape(g), c.output);
  if (c.input && accumulate) BlockedToPlain(dx, InputShape(g), c.input);
  a.BackwardData(Inner(a, g), c.output ? c.output : dy, w, c.input ? c.input : dx, accumulate,
                 c.rest);
  if (c.input) PlainToBlocked(c.input, InputShape(g), dx);
}

void ConvBackwardFilter(const ConvAlgorithm& a, const ConvGeometry& g, const float* x,
                        const float* dy, float* dw, float* db, bool accumulate, double* bias_sums,
                        void* workspace) {
  const Copies c = Place(a, g, workspace);
  if (c.input) BlockedToPlain(x, InputShape(g), c.input);
  if (c.output) BlockedToPlain(dy, OutputShape(g), c.output);
  a.BackwardFilter(Inner(a, g), c.input ? c.input : x, c.output ? c.output : dy, dw, db, accumulate,
                   bias_sums, c.rest);
}

}  // namespace cpu
}  // namespace spill
