// space_to_depth on the CPU: each output row gathers every b-th element of
// one input row; backward scatters the rows back (a permutation, so every
// input gradient element is written once).
#include "framework/graph/layer_registry.h"
#include "layers/space_to_depth_layer.h"

namespace spill {
namespace {

class CpuSpaceToDepthLayer : public SpaceToDepthLayer {
 public:
  using SpaceToDepthLayer::SpaceToDepthLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const SpaceToDepthShape s = Geometry(args.inputs[0].shape());
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t width = SpaceToDepthRowLength(s), rows = SpaceToDepthRows(s);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* from = x + SpaceToDepthRowStart(s, r);
      float* to = y + r * width;
      for (int64_t j = 0; j < width; ++j) to[j] = from[j * s.block];
    }
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const SpaceToDepthShape s = Geometry(args.input_grads[0].shape());
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t width = SpaceToDepthRowLength(s), rows = SpaceToDepthRows(s);
    const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* from = dy + r * width;
      float* to = dx + SpaceToDepthRowStart(s, r);
      for (int64_t j = 0; j < width; ++j) {
        float& v = to[j * s.block];
        v = accumulate ? v + from[j] : from[j];
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(space_to_depth, kCpu, CpuSpaceToDepthLayer);

}  // namespace spill
