// Convolution on the CPU: delegates to one of the registered algorithms
// (layers/cpu/conv_algorithm.h). The layer's `algorithm` parameter pins one;
// by default the fastest available is used.
#include "framework/layer_registry.h"
#include "layers/convolution_layer.h"
#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace {

class CpuConvolutionLayer : public ConvolutionLayer {
 public:
  explicit CpuConvolutionLayer(LayerParams& params) : ConvolutionLayer(params) {
    std::string name = params.String("algorithm", "");
    if (name.empty()) name = FindDefault();
    algorithm_ = cpu::FindConvAlgorithm(name);
    if (algorithm_ == nullptr) {
      std::string known;
      for (const auto* a : cpu::ConvAlgorithms()) known += (known.empty() ? "" : ", ") + a->name();
      params.Fail("algorithm", "must be one of: " + known + " (got '" + name + "')");
    }
  }

  size_t workspace_bytes(Pass pass) const override {
    if (pass == Pass::kForward) return algorithm_->WorkspaceBytes(geom_, cpu::ConvOp::kForward);
    return std::max(algorithm_->WorkspaceBytes(geom_, cpu::ConvOp::kBackwardData),
                    algorithm_->WorkspaceBytes(geom_, cpu::ConvOp::kBackwardFilter));
  }

  void Forward(const ForwardArgs& args) const override {
    algorithm_->Forward(geom_, args.inputs[0].data(), args.params[0].data(),
                        bias_ ? args.params[1].data() : nullptr, args.outputs[0].data(),
                        args.workspace.data);
  }

  void Backward(const BackwardArgs& args) const override {
    if (args.param_grads[0].valid()) {
      float* db = bias_ && args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
      algorithm_->BackwardFilter(geom_, args.inputs[0].data(), args.output_grads[0].data(),
                                 args.param_grads[0].data(), db, args.workspace.data);
    }
    if (args.input_grads[0].valid()) {
      algorithm_->BackwardData(geom_, args.output_grads[0].data(), args.params[0].data(),
                               args.input_grads[0].data(), args.accumulate[0], args.workspace.data);
    }
  }

 private:
  static std::string FindDefault() {
    for (const char* preferred : {"dnnl", "im2col_image"}) {
      if (cpu::FindConvAlgorithm(preferred)) return preferred;
    }
    return cpu::ConvAlgorithms().front()->name();
  }

  const cpu::ConvAlgorithm* algorithm_ = nullptr;
};

}  // namespace

SPILL_REGISTER_LAYER(convolution, kCpu, CpuConvolutionLayer);

}  // namespace spill
