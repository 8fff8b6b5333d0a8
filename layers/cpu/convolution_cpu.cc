// Convolution on the CPU: one of the registered algorithms
// (layers/cpu/conv_algorithm.h) per operation. The memory runtime picks them
// per step from the candidates listed here; the layer's `algorithm`
// parameter pins one (and leaves the runtime no other choice). Tensors stored
// in 16 bits reach the algorithms as they are: those that compute in 16 bits
// take them, the others get float32 copies that their candidates' workspace
// counts (conv_layouts.h).
#include <algorithm>

#include "framework/base/check.h"
#include "framework/config/layer_params.h"
#include "framework/graph/layer_registry.h"
#include "layers/convolution_layer.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_choice.h"
#include "layers/cpu/conv_layouts.h"
#include "layers/cpu/conv_timer.h"

namespace spill {
namespace {

class CpuConvolutionLayer : public ConvolutionLayer {
 public:
  explicit CpuConvolutionLayer(LayerParams& params)
      : ConvolutionLayer(params), algorithms_(params) {}

  // oneDNN's first: usually the fastest, they are timed first, and the
  // others' timing stops early when they clearly lose (conv_timer.h).
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    SPILL_RETURN_IF_ERROR(ConvolutionLayer::Reshape(inputs, outputs));
    return algorithms_.Select(Geometry(), /*dnnl_first=*/true);
  }

  bool computes_16_bit(Pass) const override { return true; }

  // Converts between layouts: x and y may each be in any.
  LayoutRule layout_rule() const override {
    return cpu::BlockedLayoutsPay() ? LayoutRule::kFree : LayoutRule::kPlain;
  }

  // oneDNN's AMX kernels (dnnl_bf16, gemm_bf16) compute in channels-last:
  // bfloat16 activations lie so between them without a reorder.
  Layout preferred_layout(DType activations) const override {
    return activations == DType::kBF16 && cpu::Bf16Tiles() ? Layout::kChannelsLast
                                                           : Layout::kBlocked16;
  }

  int num_algorithm_ops(Pass pass) const override {
    return pass == Pass::kForward ? 1 : (propagate_down(0) ? 2 : 1);
  }

  std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op,
                                                       int64_t images) const override {
    const cpu::ConvOp conv_op = Op(pass, op);
    std::vector<AlgorithmCandidate> candidates;
    const ConvGeometry g = Geometry();
    ConvGeometry call = g;
    call.batch = images;
    for (const cpu::ConvAlgorithm* a : algorithms_.supported()) {
      candidates.push_back({a->name(), cpu::ConvSeconds(*a, g, conv_op),
                            cpu::ConvWorkspaceBytes(*a, call, conv_op)});
    }
    return candidates;
  }

  size_t workspace_bytes(Pass pass) const override {
    size_t bytes = 0;
    for (int op = 0; op < num_algorithm_ops(pass); ++op) {
      bytes = std::max(bytes,
                       cpu::ConvWorkspaceBytes(algorithms_.fallback(), Geometry(), Op(pass, op)));
    }
    return bytes;
  }

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward && bias_ ? static_cast<size_t>(geom_.filters) : 0;
  }

  void Forward(const ForwardArgs& args) const override {
    const ConvGeometry g = Slice(args.inputs[0]);
    cpu::ConvForward(*Choice(args.algorithms, 0), g, args.inputs[0].raw(), args.params[0].data(),
                     bias_ ? args.params[1].data() : nullptr, args.outputs[0].raw(),
                     args.workspace.data);
  }

  // The filter gradient of a later slice adds into the earlier ones'; the
  // bias gradient's double sums carry over in the slice's sums.
  void Backward(const BackwardArgs& args) const override {
    const ConvGeometry g = Slice(args.inputs[0]);
    if (args.param_grads[0].valid()) {
      float* db = bias_ && args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
      cpu::ConvBackwardFilter(*Choice(args.algorithms, 0), g, args.inputs[0].raw(),
                              args.output_grads[0].raw(), args.param_grads[0].data(), db,
                              !args.slice.first(), args.slice.sums, args.workspace.data);
    }
    if (args.input_grads[0].valid()) {
      cpu::ConvBackwardData(*Choice(args.algorithms, 1), g, args.output_grads[0].raw(),
                            args.params[0].data(), args.input_grads[0].raw(), args.accumulate[0],
                            args.workspace.data);
    }
  }

 protected:
  void DtypesChanged() override { algorithms_.SetDtypes(input_dtype(0), output_dtype(0)); }

 private:
  // The geometry in the network's layouts and storage types.
  ConvGeometry Geometry() const {
    ConvGeometry g = geom_;
    g.input_layout = input_layout(0);
    g.output_layout = output_layout(0);
    g.input_dtype = input_dtype(0);
    g.output_dtype = output_dtype(0);
    return g;
  }

  // The geometry of the images `input` holds (a slice of the batch, or all).
  ConvGeometry Slice(const Tensor& input) const {
    ConvGeometry g = Geometry();
    g.batch = input.shape().n();
    SPILL_CHECK(input.dtype() == g.input_dtype)
        << name() << ": input stored as " << DTypeName(input.dtype()) << ", planned as "
        << DTypeName(g.input_dtype);
    return g;
  }

  // Backward's operations: 0 the filter gradient, 1 the input gradient.
  static cpu::ConvOp Op(Pass pass, int op) {
    if (pass == Pass::kForward) return cpu::ConvOp::kForward;
    return op == 0 ? cpu::ConvOp::kBackwardFilter : cpu::ConvOp::kBackwardData;
  }

  const cpu::ConvAlgorithm* Choice(const std::vector<int>& algorithms, int op) const {
    return algorithms_.Chosen(algorithms, op);
  }

  cpu::ConvAlgorithmChoice algorithms_;
};

}  // namespace

SPILL_REGISTER_LAYER(convolution, kCpu, CpuConvolutionLayer);

}  // namespace spill
