// convolution: 2-D convolution over NCHW with stride, padding, dilation,
// groups and an optional bias. A checkpoint layer.
//
//   - {name: conv1, type: convolution, filters: 64, kernel: 7, stride: 2, pad: 3}
//   kernel, stride, pad, dilation: an integer or [h, w]
//   groups: 1; bias: true; weight_init: he | xavier
//
// Backward needs the input (for the filter gradient), not the output.
#ifndef SPILL_LAYERS_CONVOLUTION_LAYER_H_
#define SPILL_LAYERS_CONVOLUTION_LAYER_H_

#include <array>
#include <string>
#include <vector>

#include "framework/graph/layer.h"

namespace spill {

// The geometry of one convolution, shared by every implementation.
struct ConvGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // input
  int64_t filters = 0, out_height = 0, out_width = 0;      // output
  std::array<int64_t, 2> kernel{}, stride{}, pad{}, dilation{};
  int64_t groups = 1;
  // How x and dx (input), y and dy (output) lie in memory; the weights are
  // always plain. Set by CPU layers from the network's layouts.
  Layout input_layout = Layout::kPlain, output_layout = Layout::kPlain;
  // The storage types of x and dx, of y and dy (the weights, the bias and
  // their gradients are always float32). Set by CPU layers from the
  // network's precision.
  DType input_dtype = DType::kF32, output_dtype = DType::kF32;

  int64_t channels_per_group() const { return channels / groups; }
  int64_t filters_per_group() const { return filters / groups; }
  // Rows of the im2col matrix of one group: C/G * kh * kw.
  int64_t col_rows() const { return channels_per_group() * kernel[0] * kernel[1]; }
  int64_t out_plane() const { return out_height * out_width; }
  int64_t in_plane() const { return height * width; }
};

// What a convolution and a transposed convolution (the convolution run
// backwards) share: the convolution's geometry, the weight, an optional bias,
// the parameters that shape the window, and the arithmetic of their work.
class ConvolutionBaseLayer : public Layer {
 public:
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }

  const ConvGeometry& geometry() const { return geom_; }
  bool has_bias() const { return bias_; }

 protected:
  // Reads kernel, stride and pad.
  void ReadWindow(LayerParams& params);
  // Reads dilation, groups, bias and weight_init.
  void ReadOptions(LayerParams& params);
  // The weight, filters x C/G x kh x kw, initialized for these fans, and the
  // bias over `bias_channels` where the layer has one.
  std::vector<ParamSpec> WeightAndBias(int64_t fan_in, int64_t fan_out,
                                       int64_t bias_channels) const;
  // The work of a pass with `products` flops of multiply-adds: forward reads
  // the input and weights and writes the output; backward computes the
  // weight gradient and, where one is wanted, the data gradient.
  LayerWork Work(Pass pass, double in, double out, double products) const;

  ConvGeometry geom_;
  bool bias_ = true;
  std::string weight_init_;
};

class ConvolutionLayer : public ConvolutionBaseLayer {
 public:
  explicit ConvolutionLayer(LayerParams& params);
  MemoryTraits memory_traits() const override { return MemoryTraits::Convolution(); }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;
};

}  // namespace spill

#endif  // SPILL_LAYERS_CONVOLUTION_LAYER_H_
