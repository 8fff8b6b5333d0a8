// gemm_bf16: the convolution as one matrix product over the batch in
// bfloat16 arithmetic (oneDNN's matmul: AMX tiles or AVX-512 BF16, float32
// sums). Rows are the output pixels (image, row, column), columns the
// kernel taps (kernel row, kernel column, channel):
//
//   forward          y[M, F]     = cols[M, T] x w[T, F]    (+ bias)
//   backward data    dcols[M, T] = dy[M, F] x w[F, T], then summed into dx
//   backward filter  dw[F, T]    = dy[M, F]^T x cols[M, T]
//
// with M = batch x output plane, T = kernel taps x channels, F = filters.
// oneDNN 2.6's direct bfloat16 kernels (dnnl_bf16) lose their speed on small
// planes - the deep layers of a network, where a 3x3 kernel on a 4x4 or 8x8
// plane is mostly padding and their backward kernels are not yet the
// brgemm-based ones - while a matrix product of the same FLOPs keeps its
// rate there; the timings choose per operation and geometry.
//
// Operands in any layout and in bfloat16 or float32 (the image): x and dy
// are copied into channels-last bfloat16 (unless they lie so already),
// x's column matrix is gathered from that copy (a 1x1 kernel at stride 1
// without padding reads the copy itself), and results pass through
// channels-last buffers to the caller's layout. The weights are rounded
// into a 16-bit copy per call, the filter gradient is float32; backward
// data sums the taps in float32 and rounds once (adding into dx first when
// accumulating, as a float32 tensor would). Groups are not supported.
//
// Workspace, each buffer 64-byte aligned: the copies, the column matrix
// (bfloat16; float32 in backward data, with a float32 channels-last dx
// beside it), the 16-bit weights or the float32 filter gradient, and one
// scratch region the primitives' scratchpads share in turn.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>

#include "framework/base/check.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_layouts.h"
#include "layers/cpu/dnnl_conv_common.h"

namespace spill {
namespace cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

constexpr size_t kAlignment = 64;
size_t Aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// A 1x1 kernel at stride 1 without padding: the column matrix is the
// channels-last input itself.
bool Pointwise(const ConvGeometry& g) {
  return g.kernel[0] == 1 && g.kernel[1] == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
         g.pad[0] == 0 && g.pad[1] == 0;
}

// The matrix sizes of a geometry.
struct Sizes {
  int64_t rows = 0;     // M: output pixels of the batch
  int64_t taps = 0;     // T: kernel taps x channels
  int64_t filters = 0;  // F
};

Sizes SizesOf(const ConvGeometry& g) {
  return {g.batch * g.out_plane(), g.kernel[0] * g.kernel[1] * g.channels, g.filters};
}

// A workspace buffer, and the reorder that fills or empties it.
struct Copy {
  bool used = false;
  size_t offset = 0;
  dnnl::reorder reorder;
  memory::desc from, to, scratch;
};

// Everything one operation runs, and where in the workspace.
struct Plan {
  Copy input;    // x (forward, filter) or dy (data) into channels-last bfloat16
  Copy dy;       // filter: dy into channels-last bfloat16
  Copy weights;  // forward, data: w into a bfloat16 matrix
  size_t cols = 0;
  bool gather = false;  // cols holds a gathered column matrix (else: the input copy)
  dnnl::matmul product;
  memory::desc a, b, c, bias, product_scratch;
  bool clear_scratch = false;
  size_t result = 0;   // the product's result, unless it is written in place
  size_t summed = 0;   // data: the float32 channels-last dx the taps sum into
  Copy output;         // the result into the caller's tensor (and layout)
  Copy add_output;     // the same, adding (accumulating calls)
  size_t scratch = 0;  // the region the scratchpads share
  size_t bytes = 0;
};

dnnl::primitive_attr UserScratchpad(bool sum = false) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (sum) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// Lays out a plan's workspace: buffers first, then the scratch region.
class Layouter {
 public:
  explicit Layouter(const dnnl::engine& engine) : engine_(engine) {}

  size_t Buffer(size_t bytes) {
    const size_t offset = bytes_;
    bytes_ += Aligned(bytes);
    return offset;
  }

  // A copy into a new buffer of `to`'s size.
  Copy Into(const memory::desc& from, const memory::desc& to) {
    Copy c = Between(from, to, false);
    c.offset = Buffer(to.get_size());
    return c;
  }

  // A copy between buffers placed elsewhere.
  Copy Between(const memory::desc& from, const memory::desc& to, bool sum) {
    Copy c;
    c.used = true;
    c.from = from;
    c.to = to;
    c.reorder = Reorder(from, to, sum, &c.scratch);
    return c;
  }

  void Scratch(const memory::desc& scratch) {
    scratch_bytes_ = std::max(scratch_bytes_, scratch.get_size());
  }

  void Finish(Plan* p) {
    p->scratch = bytes_;
    p->bytes = bytes_ + Aligned(scratch_bytes_);
  }

 private:
  dnnl::reorder Reorder(const memory::desc& from, const memory::desc& to, bool sum,
                        memory::desc* scratch) {
    dnnl::reorder::primitive_desc pd(engine_, from, engine_, to, UserScratchpad(sum));
    *scratch = pd.scratchpad_desc();
    Scratch(*scratch);
    return dnnl::reorder(pd);
  }

  const dnnl::engine& engine_;
  size_t bytes_ = 0, scratch_bytes_ = 0;
};

// Gathers the column matrix (rows: output pixels; columns: kernel row,
// kernel column, channel) from a channels-last bfloat16 input.
void Gather(const ConvGeometry& g, const uint16_t* x, uint16_t* cols) {
  const int64_t c = g.channels, taps = g.kernel[0] * g.kernel[1] * c;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.out_height; ++oh) {
      for (int64_t ow = 0; ow < g.out_width; ++ow) {
        uint16_t* row = cols + ((n * g.out_height + oh) * g.out_width + ow) * taps;
        for (int64_t r = 0; r < g.kernel[0]; ++r) {
          const int64_t ih = oh * g.stride[0] - g.pad[0] + r * g.dilation[0];
          for (int64_t s = 0; s < g.kernel[1]; ++s, row += c) {
            const int64_t iw = ow * g.stride[1] - g.pad[1] + s * g.dilation[1];
            if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) {
              std::memset(row, 0, c * sizeof(uint16_t));
            } else {
              std::memcpy(row, x + ((n * g.height + ih) * g.width + iw) * c, c * sizeof(uint16_t));
            }
          }
        }
      }
    }
  }
}

// Sums the column gradients into a float32 channels-last dx, image by image
// (each element's taps in one thread, in a fixed order).
void Scatter(const ConvGeometry& g, const float* dcols, float* dx) {
  const int64_t c = g.channels, taps = g.kernel[0] * g.kernel[1] * c;
  const int64_t image = g.height * g.width * c;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g.batch; ++n) {
    float* out = dx + n * image;
    std::fill(out, out + image, 0.0f);
    for (int64_t oh = 0; oh < g.out_height; ++oh) {
      for (int64_t ow = 0; ow < g.out_width; ++ow) {
        const float* row = dcols + ((n * g.out_height + oh) * g.out_width + ow) * taps;
        for (int64_t r = 0; r < g.kernel[0]; ++r) {
          const int64_t ih = oh * g.stride[0] - g.pad[0] + r * g.dilation[0];
          for (int64_t s = 0; s < g.kernel[1]; ++s, row += c) {
            const int64_t iw = ow * g.stride[1] - g.pad[1] + s * g.dilation[1];
            if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) continue;
            float* to = out + (ih * g.width + iw) * c;
            for (int64_t k = 0; k < c; ++k) to[k] += row[k];
          }
        }
      }
    }
  }
}

class GemmBf16 : public ConvAlgorithm {
 public:
  GemmBf16() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  std::string name() const override { return "gemm_bf16"; }
  bool computes_blocked() const override { return true; }
  bool takes(DType dtype) const override { return dtype == DType::kF32 || dtype == DType::kBF16; }
  bool computes_16_bit() const override { return true; }

  // Decided from the geometry alone, without building anything: a layer asks
  // every algorithm while the network is built, in every precision, and
  // this one serves only bfloat16 networks. oneDNN's matmul and reorders
  // take every shape of one group.
  bool Supports(const ConvGeometry& g) const override { return Bf16Arithmetic() && g.groups == 1; }

  size_t WorkspaceBytes(const ConvGeometry& g, ConvOp op) const override {
    const Entry& e = Find(g);
    if (!e.supported) return 0;
    switch (op) {
      case ConvOp::kForward:
        return std::max(e.forward[0].bytes, e.forward[1].bytes);
      case ConvOp::kBackwardData:
        return e.data.bytes;
      case ConvOp::kBackwardFilter:
        return e.filter.bytes;
    }
    return 0;
  }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void* workspace) const override {
    const Plan& p = Supported(g).forward[bias ? 1 : 0];
    char* ws = static_cast<char*>(workspace);
    const void* rows = Columns(g, p, x, ws);
    Run(p, p.weights, w, ws + p.weights.offset, ws);
    void* result = p.output.used ? ws + p.result : static_cast<void*>(y);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, Mem(p.a, rows)},
                                            {DNNL_ARG_WEIGHTS, Mem(p.b, ws + p.weights.offset)},
                                            {DNNL_ARG_DST, Mem(p.c, result)}};
    if (bias) args[DNNL_ARG_BIAS] = Mem(p.bias, bias);
    Product(p, args, ws);
    if (p.output.used) Run(p, p.output, result, y, ws);
    stream_.wait();
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void* workspace) const override {
    const Plan& p = Supported(g).data;
    char* ws = static_cast<char*>(workspace);
    const void* rows = p.input.used ? ws + p.input.offset : static_cast<const void*>(dy);
    if (p.input.used) Run(p, p.input, dy, ws + p.input.offset, ws);
    Run(p, p.weights, w, ws + p.weights.offset, ws);
    Product(p,
            {{DNNL_ARG_SRC, Mem(p.a, rows)},
             {DNNL_ARG_WEIGHTS, Mem(p.b, ws + p.weights.offset)},
             {DNNL_ARG_DST, Mem(p.c, ws + p.result)}},
            ws);
    stream_.wait();
    float* summed = reinterpret_cast<float*>(ws + p.result);
    if (p.gather) {
      Scatter(g, summed, reinterpret_cast<float*>(ws + p.summed));
      summed = reinterpret_cast<float*>(ws + p.summed);
    }
    Run(p, accumulate ? p.add_output : p.output, summed, dx, ws);
    stream_.wait();
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void* workspace) const override {
    const Plan& p = Supported(g).filter;
    char* ws = static_cast<char*>(workspace);
    const void* cols = Columns(g, p, x, ws);
    const void* rows = p.dy.used ? ws + p.dy.offset : static_cast<const void*>(dy);
    if (p.dy.used) Run(p, p.dy, dy, ws + p.dy.offset, ws);
    Product(p,
            {{DNNL_ARG_SRC, Mem(p.a, rows)},
             {DNNL_ARG_WEIGHTS, Mem(p.b, cols)},
             {DNNL_ARG_DST, Mem(p.c, ws + p.result)}},
            ws);
    Run(p, accumulate ? p.add_output : p.output, ws + p.result, dw, ws);
    stream_.wait();
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }

 private:
  struct Entry {
    bool supported = false;
    std::array<Plan, 2> forward;  // without, with the bias
    Plan data, filter;
  };
  const Entry& Find(const ConvGeometry& g) const {
    return cache_.Find(g, [this](const ConvGeometry& h) { return Build(h); });
  }

  const Entry& Supported(const ConvGeometry& g) const {
    const Entry& e = Find(g);
    SPILL_CHECK(e.supported) << "gemm_bf16 does not support this convolution";
    return e;
  }

  std::unique_ptr<Entry> Build(const ConvGeometry& g) const {
    auto e = std::make_unique<Entry>();
    if (g.groups != 1) return e;
    try {
      e->forward[0] = BuildForward(g, false);
      e->forward[1] = BuildForward(g, true);
      e->data = BuildData(g);
      e->filter = BuildFilter(g);
      e->supported = true;
    } catch (const dnnl::error&) {
      e->supported = false;
    }
    return e;
  }

  // The caller's tensors, and their channels-last bfloat16 copies.
  static memory::desc UserX(const ConvGeometry& g) {
    return memory::desc({g.batch, g.channels, g.height, g.width}, DnnlType(g.input_dtype),
                        DnnlTag(g.input_layout));
  }
  static memory::desc UserY(const ConvGeometry& g) {
    return memory::desc({g.batch, g.filters, g.out_height, g.out_width}, DnnlType(g.output_dtype),
                        DnnlTag(g.output_layout));
  }
  static memory::desc Nhwc(const memory::desc& user, Type type) {
    return memory::desc(user.dims(), type, Tag::nhwc);
  }
  static memory::desc UserWeights(const ConvGeometry& g) {
    return memory::desc({g.filters, g.channels, g.kernel[0], g.kernel[1]}, Type::f32, Tag::oihw);
  }
  static memory::desc Matrix(int64_t rows, int64_t cols, Type type, Tag tag = Tag::ab) {
    return memory::desc({rows, cols}, type, tag);
  }

  // x's column matrix: a channels-last bfloat16 copy of x (none when x lies
  // so), gathered into columns unless the kernel is pointwise.
  void PlanColumns(const ConvGeometry& g, Layouter& l, Plan* p) const {
    const memory::desc x = UserX(g), copy = Nhwc(x, Type::bf16);
    if (x != copy) p->input = l.Into(x, copy);
    p->gather = !Pointwise(g);
    const Sizes z = SizesOf(g);
    if (p->gather) p->cols = l.Buffer(z.rows * z.taps * sizeof(uint16_t));
  }

  const void* Columns(const ConvGeometry& g, const Plan& p, const float* x, char* ws) const {
    const void* copy = x;
    if (p.input.used) {
      Run(p, p.input, x, ws + p.input.offset, ws);
      stream_.wait();
      copy = ws + p.input.offset;
    }
    if (!p.gather) return copy;
    Gather(g, static_cast<const uint16_t*>(copy), reinterpret_cast<uint16_t*>(ws + p.cols));
    return ws + p.cols;
  }

  void BuildProduct(Layouter& l, Plan* p) const {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p->a, p->b, p->bias, p->c), UserScratchpad(),
                                    engine_);
    p->product = dnnl::matmul(pd);
    p->product_scratch = pd.scratchpad_desc();
    p->clear_scratch = std::string(pd.impl_info_str()).find("amx") != std::string::npos;
    l.Scratch(p->product_scratch);
  }

  Plan BuildForward(const ConvGeometry& g, bool bias) const {
    Layouter l(engine_);
    Plan p;
    const Sizes z = SizesOf(g);
    PlanColumns(g, l, &p);
    p.weights = l.Into(UserWeights(g), memory::desc(UserWeights(g).dims(), Type::bf16, Tag::hwio));
    const memory::desc y = UserY(g), rows = Nhwc(y, y.data_type());
    if (y != rows) {
      p.output = l.Between(rows, y, false);
      p.result = l.Buffer(rows.get_size());
    }
    p.a = Matrix(z.rows, z.taps, Type::bf16);
    p.b = Matrix(z.taps, z.filters, Type::bf16);
    p.c = Matrix(z.rows, z.filters, y.data_type());
    if (bias) p.bias = Matrix(1, z.filters, Type::f32);
    BuildProduct(l, &p);
    l.Finish(&p);
    return p;
  }

  Plan BuildData(const ConvGeometry& g) const {
    Layouter l(engine_);
    Plan p;
    const Sizes z = SizesOf(g);
    const memory::desc dy = UserY(g), dy_copy = Nhwc(dy, Type::bf16);
    if (dy != dy_copy) p.input = l.Into(dy, dy_copy);
    p.weights = l.Into(UserWeights(g), memory::desc(UserWeights(g).dims(), Type::bf16, Tag::ohwi));
    p.gather = !Pointwise(g);
    p.result = l.Buffer(z.rows * z.taps * sizeof(float));
    const memory::desc dx = UserX(g), summed = Nhwc(dx, Type::f32);
    if (p.gather) p.summed = l.Buffer(summed.get_size());
    p.output = l.Between(summed, dx, false);
    p.add_output = l.Between(summed, dx, true);
    p.a = Matrix(z.rows, z.filters, Type::bf16);
    p.b = Matrix(z.filters, z.taps, Type::bf16);
    p.c = Matrix(z.rows, z.taps, Type::f32);
    BuildProduct(l, &p);
    l.Finish(&p);
    return p;
  }

  Plan BuildFilter(const ConvGeometry& g) const {
    Layouter l(engine_);
    Plan p;
    const Sizes z = SizesOf(g);
    PlanColumns(g, l, &p);
    const memory::desc dy = UserY(g), dy_copy = Nhwc(dy, Type::bf16);
    if (dy != dy_copy) p.dy = l.Into(dy, dy_copy);
    p.result = l.Buffer(z.filters * z.taps * sizeof(float));
    const memory::desc dw = memory::desc(UserWeights(g).dims(), Type::f32, Tag::ohwi);
    p.output = l.Between(dw, UserWeights(g), false);
    p.add_output = l.Between(dw, UserWeights(g), true);
    // dy's rows read as the columns of its transpose.
    p.a = Matrix(z.filters, z.rows, Type::bf16, Tag::ba);
    p.b = Matrix(z.rows, z.taps, Type::bf16);
    p.c = Matrix(z.filters, z.taps, Type::f32);
    BuildProduct(l, &p);
    l.Finish(&p);
    return p;
  }

  memory Mem(const memory::desc& d, const void* data) const {
    return memory(d, engine_, const_cast<void*>(data));
  }

  // Runs a copy from `from` to `to` with the shared scratch region.
  void Run(const Plan& p, const Copy& c, const void* from, void* to, char* ws) const {
    std::unordered_map<int, memory> args = {{DNNL_ARG_FROM, Mem(c.from, from)},
                                            {DNNL_ARG_TO, Mem(c.to, to)}};
    if (c.scratch.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = Mem(c.scratch, ws + p.scratch);
    c.reorder.execute(stream_, args);
  }

  void Product(const Plan& p, std::unordered_map<int, memory> args, char* ws) const {
    if (p.product_scratch.get_size() > 0) {
      char* scratch = ws + p.scratch;
      // oneDNN 2.6's AMX kernels may read scratchpad bytes they have not
      // written (see conv_dnnl.cc): they get a zeroed one.
      if (p.clear_scratch) std::memset(scratch, 0, p.product_scratch.get_size());
      args[DNNL_ARG_SCRATCHPAD] = Mem(p.product_scratch, scratch);
    }
    stream_.wait();
    p.product.execute(stream_, args);
  }

  const dnnl::engine engine_;
  mutable dnnl::stream stream_;
  GeometryCache<Entry> cache_;
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(GemmBf16);

}  // namespace cpu
}  // namespace spill
