// dnnl: oneDNN's convolution primitives: forward (with the bias), backward
// data, and backward weights (with the bias gradient).
// dnnl_winograd: the same with oneDNN's Winograd F(4x4, 3x3) kernels (3x3
// kernels at stride 1 on AVX-512): about half the multiplications of the
// direct method for wide layers, at the price of larger rounding errors
// (still those of float32 training; cuDNN picks Winograd kernels the same
// way) and slower than direct for narrow ones; the timings choose.
// oneDNN picks the memory formats it computes fastest in (format_tag::any),
// and tensors are reordered between those and the framework's layouts (x and
// y plain NCHW, blocked nChw16c or channels-last NHWC, as the geometry says;
// weights (G)OIHW) through copies in the workspace. Blocked activations are
// what oneDNN picks in float32 on AVX-512, channels-last what it picks in
// bfloat16 on AMX, so between layers in those only the small weights are
// reordered. 1x1 kernels between plain tensors compute in the plain layouts:
// there the reorders would cost as much as the convolution.
// Workspace: a copy of every operand whose format is not plain, a buffer for
// backward data's result (which an accumulating call adds into dx with a
// summing reorder, since the primitive overwrites), and one scratch region
// that the primitives' scratchpads (scratchpad_mode::user) share in turn.
//
// dnnl_bf16: the direct method in bfloat16 arithmetic (oneDNN's jit_bf16
// kernels, float32 sums): x, dx, y and dy as the network stores them - 16
// bits, or float32 where it keeps a tensor exact (the image) - and the
// float32 weights rounded into a 16-bit copy per call; the filter and bias
// gradients are float32. About twice dnnl's speed where the processor has
// AVX-512 BF16; elsewhere oneDNN would emulate it, and it is not offered.
//
// Primitives are built once per geometry and cached. A call allocates only
// oneDNN's small memory objects around the caller's and the workspace's
// buffers. oneDNN's CPU primitives are deterministic for a fixed thread count
// (given a zeroed scratchpad on AMX processors: see Plan::clear_scratch).
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/base/check.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_layouts.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/dnnl_conv_common.h"

namespace spill {
namespace cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// The primitives a geometry needs: forward and backward-filter come with and
// without the bias.
enum Variant { kForward, kForwardBias, kBackwardData, kBackwardFilter, kBackwardFilterBias };
constexpr int kNumVariants = 5;

// Workspace buffers start at multiples of this many bytes from its start.
constexpr size_t kAlignment = 64;

size_t Aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

using Type = memory::data_type;

memory::desc Desc(const memory::dims& dims, Type type, Tag tag) {
  return memory::desc(dims, type, tag);
}

// A geometry in oneDNN's terms.
struct Shapes {
  memory::dims src, weights, bias, dst, strides, dilates, padding;
  Tag src_tag = Tag::nchw, dst_tag = Tag::nchw;  // the framework's layouts of x and y
  Tag weights_tag = Tag::oihw;
  Type src_type = Type::f32, dst_type = Type::f32;  // the framework's types of x and y
  Type compute = Type::f32;                         // of the primitives' x, y, weights
  bool plain = false;  // compute in the plain layouts rather than oneDNN's choice
};

Shapes MakeShapes(const ConvGeometry& g, Type compute) {
  Shapes s;
  s.src_type = DnnlType(g.input_dtype);
  s.dst_type = DnnlType(g.output_dtype);
  s.compute = compute;
  s.src = {g.batch, g.channels, g.height, g.width};
  s.dst = {g.batch, g.filters, g.out_height, g.out_width};
  if (g.groups == 1) {
    s.weights = {g.filters, g.channels, g.kernel[0], g.kernel[1]};
  } else {
    s.weights = {g.groups, g.filters_per_group(), g.channels_per_group(), g.kernel[0], g.kernel[1]};
    s.weights_tag = Tag::goihw;
  }
  s.bias = {g.filters};
  s.strides = {g.stride[0], g.stride[1]};
  s.dilates = {g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN counts the gaps
  // Also the bottom/right padding: oneDNN checks it against the output size,
  // and padding that no output reaches is never read.
  s.padding = {g.pad[0], g.pad[1]};
  s.src_tag = DnnlTag(g.input_layout);
  s.dst_tag = DnnlTag(g.output_layout);
  s.plain =
      g.kernel[0] == 1 && g.kernel[1] == 1 && s.src_tag == Tag::nchw && s.dst_tag == Tag::nchw;
  return s;
}

// A tensor argument of a primitive. When the primitive's format is not the
// caller's plain one, the tensor passes through a copy in the workspace.
struct Operand {
  int arg = 0;  // DNNL_ARG_*
  memory::desc user, inner;
  bool reordered = false;
  size_t offset = 0;      // of the copy
  dnnl::reorder reorder;  // user -> inner for inputs, inner -> user for outputs
  memory::desc reorder_scratch;
};

// Everything one call runs, and where in the workspace.
struct Plan {
  dnnl::primitive conv;
  memory::desc conv_scratch;
  // oneDNN 2.6's AMX kernels can read scratchpad bytes they have not
  // written: the filter gradient of groups narrower than a channel block
  // then adds what the workspace held before (wrong by far more than
  // rounding). The AMX kernels get a zeroed scratchpad.
  bool clear_scratch = false;
  std::vector<Operand> inputs;
  Operand output;
  // BackwardData: adds the result, computed in the workspace, into dx.
  dnnl::reorder add_output;
  memory::desc add_scratch;
  int bias_arg = 0;  // DNNL_ARG_BIAS or DNNL_ARG_DIFF_BIAS; 0 without a bias
  memory::desc bias;
  size_t scratch_offset = 0;  // the region the scratchpads share
  size_t bytes = 0;           // the workspace in all
};

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Lays out a plan's workspace: the copies first, then the scratch region.
class PlanBuilder {
 public:
  explicit PlanBuilder(const dnnl::engine& engine) : engine_(engine) {}

  Operand Input(int arg, const memory::desc& user, const memory::desc& inner) {
    Operand op = Make(arg, user, inner, false);
    if (op.reordered) op.reorder = Reorder(user, inner, false, &op.reorder_scratch);
    return op;
  }

  // `buffered`: give the output a workspace buffer even in the plain format.
  Operand Output(int arg, const memory::desc& user, const memory::desc& inner, bool buffered) {
    Operand op = Make(arg, user, inner, buffered);
    if (op.reordered) op.reorder = Reorder(inner, user, false, &op.reorder_scratch);
    return op;
  }

  dnnl::reorder Reorder(const memory::desc& from, const memory::desc& to, bool sum,
                        memory::desc* scratch) {
    dnnl::primitive_attr attr = UserScratchpad();
    if (sum) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::reorder::primitive_desc pd(engine_, from, engine_, to, attr);
    *scratch = pd.scratchpad_desc();
    scratch_bytes_ = std::max(scratch_bytes_, scratch->get_size());
    return dnnl::reorder(pd);
  }

  void Finish(const dnnl::primitive_desc_base& pd, Plan* plan) {
    const memory::desc conv_scratch = pd.scratchpad_desc();
    plan->conv_scratch = conv_scratch;
    plan->clear_scratch = std::string(pd.impl_info_str()).find("amx") != std::string::npos;
    scratch_bytes_ = std::max(scratch_bytes_, conv_scratch.get_size());
    plan->scratch_offset = bytes_;
    plan->bytes = bytes_ + Aligned(scratch_bytes_);
  }

 private:
  Operand Make(int arg, const memory::desc& user, const memory::desc& inner, bool buffered) {
    Operand op;
    op.arg = arg;
    op.user = user;
    op.inner = inner;
    op.reordered = inner != user;
    if (op.reordered || buffered) {
      op.offset = bytes_;
      bytes_ += Aligned(inner.get_size());
    }
    return op;
  }

  const dnnl::engine& engine_;
  size_t bytes_ = 0, scratch_bytes_ = 0;
};

class Dnnl : public ConvAlgorithm {
 public:
  Dnnl(std::string name, dnnl::algorithm algorithm, Type compute = Type::f32)
      : name_(std::move(name)),
        algorithm_(algorithm),
        compute_(compute),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {}

  std::string name() const override { return name_; }
  bool computes_blocked() const override { return true; }
  bool takes(DType dtype) const override {
    return dtype == DType::kF32 || (computes_16_bit() && dtype == DType::kBF16);
  }
  bool computes_16_bit() const override { return compute_ == Type::bf16; }

  bool Supports(const ConvGeometry& g) const override {
    if (!computes_16_bit()) return Find(g).supported;
    if (!Bf16Arithmetic()) return false;
    // Asked about float32 tensors (a layer asks every algorithm before it
    // knows the network's precision), the bfloat16 arithmetic answers for
    // the 16-bit result it computes in a bfloat16 network: oneDNN 2.6 can
    // read out of bounds creating some AMX convolutions with a float32
    // result (a 2x2 stride-2 one with 8 input channels, seen under
    // AddressSanitizer), built then only where the algorithm is pinned.
    ConvGeometry h = g;
    if (h.input_dtype == DType::kF32 && h.output_dtype == DType::kF32) {
      h.output_dtype = DType::kBF16;
    }
    return Find(h).supported;
  }

  size_t WorkspaceBytes(const ConvGeometry& g, ConvOp op) const override {
    const Entry& e = Find(g);
    if (!e.supported) return 0;
    switch (op) {
      case ConvOp::kForward:
        return std::max(e.plans[kForward].bytes, e.plans[kForwardBias].bytes);
      case ConvOp::kBackwardData:
        return e.plans[kBackwardData].bytes;
      case ConvOp::kBackwardFilter:
        return std::max(e.plans[kBackwardFilter].bytes, e.plans[kBackwardFilterBias].bytes);
    }
    return 0;
  }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void* workspace) const override {
    const Plan& p = Supported(g).plans[bias ? kForwardBias : kForward];
    Run(p, {x, w}, const_cast<float*>(bias), y, false, workspace);
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void* workspace) const override {
    Run(Supported(g).plans[kBackwardData], {dy, w}, nullptr, dx, accumulate, workspace);
  }

  // A later slice of the batch (accumulate) computes its own filter gradient
  // beside dw and adds it: oneDNN's weight gradient has no sum post-op. The
  // bias gradient comes from the carried double sums, as every algorithm's.
  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void* workspace) const override {
    const Plan& p = Supported(g).plans[kBackwardFilter];
    if (!accumulate) {
      Run(p, {x, dy}, nullptr, dw, false, workspace);
    } else {
      const int64_t count = g.filters * g.col_rows();
      std::vector<float> slice(static_cast<size_t>(count));
      Run(p, {x, dy}, nullptr, slice.data(), false, workspace);
      Add(slice.data(), dw, count);
    }
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }

 private:
  struct Entry {
    bool supported = false;
    std::array<Plan, kNumVariants> plans;
  };
  const Entry& Find(const ConvGeometry& g) const {
    return cache_.Find(g, [this](const ConvGeometry& h) { return Build(h); });
  }

  const Entry& Supported(const ConvGeometry& g) const {
    const Entry& e = Find(g);
    SPILL_CHECK(e.supported) << "oneDNN does not support this convolution";
    return e;
  }

  std::unique_ptr<Entry> Build(const ConvGeometry& g) const {
    auto e = std::make_unique<Entry>();
    try {
      const Shapes s = MakeShapes(g, compute_);
      e->plans[kForward] = BuildForward(s, false);
      e->plans[kForwardBias] = BuildForward(s, true);
      e->plans[kBackwardData] = BuildBackwardData(s);
      e->plans[kBackwardFilter] = BuildBackwardFilter(s, false);
      e->plans[kBackwardFilterBias] = BuildBackwardFilter(s, true);
      e->supported = true;
    } catch (const dnnl::error&) {
      e->supported = false;
    }
    return e;
  }

  // The primitive's format: oneDNN's choice, or the plain one.
  static memory::desc Inner(const Shapes& s, const memory::dims& dims, Type type, Tag plain) {
    return Desc(dims, type, s.plain ? plain : Tag::any);
  }
  static memory::desc Bias(const Shapes& s, bool bias) {
    return bias ? Desc(s.bias, Type::f32, Tag::a) : memory::desc();
  }
  // The primitives' types of x and dx, y and dy: in 16-bit arithmetic, the
  // results stay in the framework's type (oneDNN rounds once); float32
  // arithmetic computes in float32.
  static Type InnerSrc(const Shapes& s) { return s.compute == Type::f32 ? Type::f32 : s.src_type; }
  static Type InnerDst(const Shapes& s) { return s.compute == Type::f32 ? Type::f32 : s.dst_type; }
  // The framework's tensors.
  static memory::desc UserSrc(const Shapes& s) { return Desc(s.src, s.src_type, s.src_tag); }
  static memory::desc UserDst(const Shapes& s) { return Desc(s.dst, s.dst_type, s.dst_tag); }
  static memory::desc UserWeights(const Shapes& s) {
    return Desc(s.weights, Type::f32, s.weights_tag);
  }

  dnnl::convolution_forward::primitive_desc ForwardPd(const Shapes& s, bool bias,
                                                      const dnnl::primitive_attr& attr) const {
    const dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, algorithm_, Inner(s, s.src, s.compute, Tag::nchw),
        Inner(s, s.weights, s.compute, s.weights_tag), Bias(s, bias),
        Inner(s, s.dst, InnerDst(s), Tag::nchw), s.strides, s.dilates, s.padding, s.padding);
    dnnl::convolution_forward::primitive_desc pd(d, attr, engine_);
    // oneDNN 2.6 reads out of bounds creating some of its AMX brgconv
    // kernels with a bias (2x2 stride-2 convolutions of a U-Net's transposed
    // convolutions, under AddressSanitizer): with a bias, the next
    // implementation it offers.
    while (bias && std::string(pd.impl_info_str()).find("brgconv") != std::string::npos) {
      if (!pd.next_impl()) {
        throw dnnl::error(dnnl_unimplemented, "no convolution with a bias but brgconv");
      }
    }
    return pd;
  }

  Plan BuildForward(const Shapes& s, bool bias) const {
    const auto pd = ForwardPd(s, bias, UserScratchpad());
    PlanBuilder b(engine_);
    Plan p;
    p.inputs = {b.Input(DNNL_ARG_SRC, UserSrc(s), pd.src_desc()),
                b.Input(DNNL_ARG_WEIGHTS, UserWeights(s), pd.weights_desc())};
    p.output = b.Output(DNNL_ARG_DST, UserDst(s), pd.dst_desc(), false);
    if (bias) {
      p.bias_arg = DNNL_ARG_BIAS;
      p.bias = pd.bias_desc();
    }
    p.conv = dnnl::convolution_forward(pd);
    b.Finish(pd, &p);
    return p;
  }

  Plan BuildBackwardData(const Shapes& s) const {
    const dnnl::convolution_backward_data::desc d(
        algorithm_, Inner(s, s.src, InnerSrc(s), Tag::nchw),
        Inner(s, s.weights, s.compute, s.weights_tag), Inner(s, s.dst, s.compute, Tag::nchw),
        s.strides, s.dilates, s.padding, s.padding);
    const dnnl::convolution_backward_data::primitive_desc pd(
        d, UserScratchpad(), engine_, ForwardPd(s, false, dnnl::primitive_attr()));
    PlanBuilder b(engine_);
    Plan p;
    p.inputs = {b.Input(DNNL_ARG_DIFF_DST, UserDst(s), pd.diff_dst_desc()),
                b.Input(DNNL_ARG_WEIGHTS, UserWeights(s), pd.weights_desc())};
    // Buffered even when plain: an accumulating call computes there.
    p.output = b.Output(DNNL_ARG_DIFF_SRC, UserSrc(s), pd.diff_src_desc(), true);
    p.add_output = b.Reorder(p.output.inner, p.output.user, true, &p.add_scratch);
    p.conv = dnnl::convolution_backward_data(pd);
    b.Finish(pd, &p);
    return p;
  }

  Plan BuildBackwardFilter(const Shapes& s, bool bias) const {
    const dnnl::convolution_backward_weights::desc d(
        algorithm_, Inner(s, s.src, s.compute, Tag::nchw),
        Inner(s, s.weights, Type::f32, s.weights_tag), Bias(s, bias),
        Inner(s, s.dst, s.compute, Tag::nchw), s.strides, s.dilates, s.padding, s.padding);
    const dnnl::convolution_backward_weights::primitive_desc pd(
        d, UserScratchpad(), engine_, ForwardPd(s, bias, dnnl::primitive_attr()));
    PlanBuilder b(engine_);
    Plan p;
    p.inputs = {b.Input(DNNL_ARG_SRC, UserSrc(s), pd.src_desc()),
                b.Input(DNNL_ARG_DIFF_DST, UserDst(s), pd.diff_dst_desc())};
    p.output = b.Output(DNNL_ARG_DIFF_WEIGHTS, UserWeights(s), pd.diff_weights_desc(), false);
    if (bias) {
      p.bias_arg = DNNL_ARG_DIFF_BIAS;
      p.bias = pd.diff_bias_desc();
    }
    p.conv = dnnl::convolution_backward_weights(pd);
    b.Finish(pd, &p);
    return p;
  }

  // Runs a reorder with the shared scratch region as its scratchpad.
  void Reorder(const dnnl::reorder& reorder, const memory::desc& scratch, const memory& from,
               const memory& to, char* scratch_region) const {
    std::unordered_map<int, memory> args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    if (scratch.get_size() > 0) {
      args[DNNL_ARG_SCRATCHPAD] = memory(scratch, engine_, scratch_region);
    }
    reorder.execute(stream_, args);
  }

  // Reorders the inputs in, runs the primitive, and reorders (or adds) the
  // output out.
  void Run(const Plan& p, std::array<const float*, 2> inputs, float* bias, float* output,
           bool accumulate, void* workspace) const {
    char* ws = static_cast<char*>(workspace);
    char* scratch = ws + p.scratch_offset;
    std::unordered_map<int, memory> args;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const Operand& in = p.inputs[i];
      memory user(in.user, engine_, const_cast<float*>(inputs[i]));
      if (!in.reordered) {
        args[in.arg] = user;
        continue;
      }
      memory inner(in.inner, engine_, ws + in.offset);
      Reorder(in.reorder, in.reorder_scratch, user, inner, scratch);
      args[in.arg] = inner;
    }
    if (p.bias_arg != 0) args[p.bias_arg] = memory(p.bias, engine_, bias);
    const Operand& out = p.output;
    memory user(out.user, engine_, output);
    const bool staged = out.reordered || accumulate;
    memory inner = staged ? memory(out.inner, engine_, ws + out.offset) : user;
    args[out.arg] = inner;
    if (p.conv_scratch.get_size() > 0) {
      args[DNNL_ARG_SCRATCHPAD] = memory(p.conv_scratch, engine_, scratch);
      if (p.clear_scratch) std::memset(scratch, 0, p.conv_scratch.get_size());
    }
    p.conv.execute(stream_, args);
    if (accumulate) {
      Reorder(p.add_output, p.add_scratch, inner, user, scratch);
    } else if (out.reordered) {
      Reorder(out.reorder, out.reorder_scratch, inner, user, scratch);
    }
    stream_.wait();
  }

  const std::string name_;
  const dnnl::algorithm algorithm_;
  const Type compute_;
  const dnnl::engine engine_;
  mutable dnnl::stream stream_;
  GeometryCache<Entry> cache_;
};

class DnnlDirect : public Dnnl {
 public:
  DnnlDirect() : Dnnl("dnnl", dnnl::algorithm::convolution_direct) {}
};

class DnnlWinograd : public Dnnl {
 public:
  DnnlWinograd() : Dnnl("dnnl_winograd", dnnl::algorithm::convolution_winograd) {}
};

class DnnlBf16 : public Dnnl {
 public:
  DnnlBf16() : Dnnl("dnnl_bf16", dnnl::algorithm::convolution_direct, Type::bf16) {}
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(DnnlDirect);
SPILL_REGISTER_CONV_ALGORITHM(DnnlWinograd);
SPILL_REGISTER_CONV_ALGORITHM(DnnlBf16);

}  // namespace cpu
}  // namespace spill
