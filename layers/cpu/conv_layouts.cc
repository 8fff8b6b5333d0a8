#include "layers/cpu/conv_layouts.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "framework/device/convert.h"
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

// The geometry the algorithm sees: plain unless it computes blocked, float32
// unless it takes the dtype.
ConvGeometry Inner(const ConvAlgorithm& a, const ConvGeometry& g) {
  ConvGeometry inner = g;
  if (!a.computes_blocked()) inner.input_layout = inner.output_layout = Layout::kPlain;
  if (!a.takes(g.input_dtype)) inner.input_dtype = DType::kF32;
  if (!a.takes(g.output_dtype)) inner.output_dtype = DType::kF32;
  return inner;
}

// Where an operation's copies go, from the workspace's start; the
// algorithm's own workspace follows them.
struct CopyPlan {
  bool input = false, output = false;  // copies of x or dx, of y or dy
  size_t output_offset = 0, rest_offset = 0;
};

CopyPlan PlanCopies(const ConvAlgorithm& a, const ConvGeometry& g) {
  const ConvGeometry inner = Inner(a, g);
  CopyPlan l;
  l.input = inner.input_layout != g.input_layout || inner.input_dtype != g.input_dtype;
  l.output = inner.output_layout != g.output_layout || inner.output_dtype != g.output_dtype;
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

// `copy` = the operand `t` (of `shape`, in `layout` and `dtype`) as float32,
// in `inner`: its own layout, or plain.
void ToCopy(const void* t, DType dtype, Layout layout, Layout inner, const Shape& shape,
            float* copy) {
  if (layout == inner) {
    ConvertToFloat(t, dtype, copy, shape.numel());
  } else {
    ToPlain(t, dtype, layout, shape, copy);
  }
}

// The way back: `t` = `copy`, rounded to `dtype`.
void FromCopy(const float* copy, Layout inner, const Shape& shape, void* t, DType dtype,
              Layout layout) {
  if (layout == inner) {
    ConvertFromFloat(copy, t, dtype, shape.numel());
  } else {
    FromPlain(copy, shape, t, dtype, layout);
  }
}

// oneDNN's ISA values are sets of feature bits: one ISA includes another
// when it has all of its bits.
bool HasIsa(dnnl::cpu_isa wanted) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

}  // namespace

bool BlockedLayoutsPay() {
  static const bool pays = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  return pays;
}

bool Bf16Arithmetic() {
  static const bool has = HasIsa(dnnl::cpu_isa::avx512_core_bf16);
  return has;
}

bool Bf16Tiles() {
  static const bool has = HasIsa(dnnl::cpu_isa::avx512_core_amx);
  return has;
}

size_t ConvWorkspaceBytes(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op) {
  return PlanCopies(a, g).rest_offset + a.WorkspaceBytes(Inner(a, g), op);
}

void ConvForward(const ConvAlgorithm& a, const ConvGeometry& g, const void* x, const float* w,
                 const float* bias, void* y, void* workspace) {
  const Copies c = Place(a, g, workspace);
  const ConvGeometry inner = Inner(a, g);
  if (c.input) {
    ToCopy(x, g.input_dtype, g.input_layout, inner.input_layout, InputShape(g), c.input);
  }
  a.Forward(inner, c.input ? c.input : static_cast<const float*>(x), w, bias,
            c.output ? c.output : static_cast<float*>(y), c.rest);
  if (c.output) {
    FromCopy(c.output, inner.output_layout, OutputShape(g), y, g.output_dtype, g.output_layout);
  }
}

// An accumulating call adds into a float32 copy of dx, so that the sum
// rounds as it does on plain float32 tensors.
void ConvBackwardData(const ConvAlgorithm& a, const ConvGeometry& g, const void* dy, const float* w,
                      void* dx, bool accumulate, void* workspace) {
  const Copies c = Place(a, g, workspace);
  const ConvGeometry inner = Inner(a, g);
  if (c.output) {
    ToCopy(dy, g.output_dtype, g.output_layout, inner.output_layout, OutputShape(g), c.output);
  }
  if (c.input && accumulate) {
    ToCopy(dx, g.input_dtype, g.input_layout, inner.input_layout, InputShape(g), c.input);
  }
  a.BackwardData(inner, c.output ? c.output : static_cast<const float*>(dy), w,
                 c.input ? c.input : static_cast<float*>(dx), accumulate, c.rest);
  if (c.input) {
    FromCopy(c.input, inner.input_layout, InputShape(g), dx, g.input_dtype, g.input_layout);
  }
}

void ConvBackwardFilter(const ConvAlgorithm& a, const ConvGeometry& g, const void* x,
                        const void* dy, float* dw, float* db, bool accumulate, double* bias_sums,
                        void* workspace) {
  const Copies c = Place(a, g, workspace);
  const ConvGeometry inner = Inner(a, g);
  if (c.input) {
    ToCopy(x, g.input_dtype, g.input_layout, inner.input_layout, InputShape(g), c.input);
  }
  if (c.output) {
    ToCopy(dy, g.output_dtype, g.output_layout, inner.output_layout, OutputShape(g), c.output);
  }
  a.BackwardFilter(inner, c.input ? c.input : static_cast<const float*>(x),
                   c.output ? c.output : static_cast<const float*>(dy), dw, db, accumulate,
                   bias_sums, c.rest);
}

}  // namespace cpu
}  // namespace spill
