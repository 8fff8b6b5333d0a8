// Transposed convolution on the CPU, through the convolution algorithms
// (layers/cpu/conv_algorithm.h) run backwards: forward is the convolution's
// data gradient, the data gradient its forward, the weight gradient its
// weight gradient with input and output exchanged. The runtime picks an
// algorithm per operation from the candidates; `algorithm` pins one.
#include <algorithm>

#include "framework/config/layer_params.h"
#include "framework/graph/layer_registry.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_choice.h"
#include "layers/cpu/conv_timer.h"
#include "layers/cpu/cpu_math.h"
#include "layers/transposed_convolution_layer.h"

namespace spill {
namespace {

class CpuTransposedConvolutionLayer : public TransposedConvolutionLayer {
 public:
  explicit CpuTransposedConvolutionLayer(LayerParams& params)
      : TransposedConvolutionLayer(params), algorithms_(params) {}

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    SPILL_RETURN_IF_ERROR(TransposedConvolutionLayer::Reshape(inputs, outputs));
    return algorithms_.Select(geom_, /*dnnl_first=*/false);
  }

  int num_algorithm_ops(Pass pass) const override {
    return pass == Pass::kForward ? 1 : (propagate_down(0) ? 2 : 1);
  }

  std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op,
                                                       int64_t images) const override {
    std::vector<AlgorithmCandidate> candidates;
    for (const cpu::ConvAlgorithm* a : algorithms_.supported()) {
      candidates.push_back(
          {a->name(), cpu::ConvSeconds(*a, geom_, Op(pass, op)), Workspace(*a, pass, op, images)});
    }
    return candidates;
  }

  size_t workspace_bytes(Pass pass) const override {
    size_t bytes = 0;
    for (int op = 0; op < num_algorithm_ops(pass); ++op) {
      bytes = std::max(bytes, Workspace(algorithms_.fallback(), pass, op, geom_.batch));
    }
    return bytes;
  }

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward && bias_ ? static_cast<size_t>(geom_.channels) : 0;
  }

  void Forward(const ForwardArgs& args) const override {
    const ConvGeometry g = Slice(args.inputs[0]);
    algorithms_.Chosen(args.algorithms, 0)
        ->BackwardData(g, args.inputs[0].data(), args.params[0].data(), args.outputs[0].data(),
                       false, args.workspace.data);
    if (bias_) cpu::AddConvBias(BiasGeometry(g), args.params[1].data(), args.outputs[0].data());
  }

  void Backward(const BackwardArgs& args) const override {
    const ConvGeometry g = Slice(args.inputs[0]);
    const float* dy = args.output_grads[0].data();
    if (args.param_grads[0].valid()) {
      algorithms_.Chosen(args.algorithms, 0)
          ->BackwardFilter(g, dy, args.inputs[0].data(), args.param_grads[0].data(), nullptr,
                           !args.slice.first(), nullptr, args.workspace.data);
    }
    if (bias_ && args.param_grads[1].valid()) {
      cpu::ConvBiasGradient(BiasGeometry(g), dy, args.param_grads[1].data(), args.slice.sums);
    }
    if (args.input_grads[0].valid()) DataGradient(args, g);
  }

 private:
  // dx = conv(dy): overwritten by the algorithm, or, when accumulating,
  // computed one image at a time into the end of the workspace and added.
  void DataGradient(const BackwardArgs& args, const ConvGeometry& g) const {
    const cpu::ConvAlgorithm* a = algorithms_.Chosen(args.algorithms, 1);
    const float* dy = args.output_grads[0].data();
    const float* w = args.params[0].data();
    float* dx = args.input_grads[0].data();
    if (!args.accumulate[0]) {
      a->Forward(g, dy, w, nullptr, dx, args.workspace.data);
      return;
    }
    ConvGeometry one = g;
    one.batch = 1;
    const size_t scratch = a->WorkspaceBytes(one, cpu::ConvOp::kForward);
    float* image =
        reinterpret_cast<float*>(static_cast<char*>(args.workspace.data) + AlignedBytes(scratch));
    const int64_t in_size = g.filters * g.out_plane(), out_size = g.channels * g.in_plane();
    for (int64_t n = 0; n < g.batch; ++n) {
      a->Forward(one, dy + n * out_size, w, nullptr, image, args.workspace.data);
      cpu::Add(image, dx + n * in_size, in_size);
    }
  }

  static size_t AlignedBytes(size_t bytes) {
    constexpr size_t kAlignment = 64;  // bytes: a cache line, for the image after the scratch
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  // Operation `op` of `pass` as the convolution sees it: forward is its data
  // gradient; backward's op 0 its weight gradient, op 1 its forward.
  static cpu::ConvOp Op(Pass pass, int op) {
    if (pass == Pass::kForward) return cpu::ConvOp::kBackwardData;
    return op == 0 ? cpu::ConvOp::kBackwardFilter : cpu::ConvOp::kForward;
  }

  // The data gradient also holds one image of the input gradient, to add
  // into one that accumulates. For calls of `images` images.
  size_t Workspace(const cpu::ConvAlgorithm& a, Pass pass, int op, int64_t images) const {
    ConvGeometry call = geom_;
    call.batch = images;
    const size_t bytes = a.WorkspaceBytes(call, Op(pass, op));
    if (pass == Pass::kForward || op == 0) return bytes;
    ConvGeometry one = geom_;
    one.batch = 1;
    const size_t image = static_cast<size_t>(geom_.filters * geom_.out_plane()) * sizeof(float);
    return std::max(bytes, AlignedBytes(a.WorkspaceBytes(one, cpu::ConvOp::kForward)) + image);
  }

  ConvGeometry Slice(const Tensor& input) const {
    ConvGeometry g = geom_;
    g.batch = input.shape().n();
    return g;
  }

  // The bias lies on the output: the convolution's input planes.
  static ConvGeometry BiasGeometry(const ConvGeometry& g) {
    ConvGeometry b = g;
    b.filters = g.channels;
    b.out_height = g.height;
    b.out_width = g.width;
    return b;
  }

  cpu::ConvAlgorithmChoice algorithms_;
};

}  // namespace

SPILL_REGISTER_LAYER(transposed_convolution, kCpu, CpuTransposedConvolutionLayer);

}  // namespace spill
