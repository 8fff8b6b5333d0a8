#include "layers/join_layers.h"

#include "framework/base/random.h"
#include "framework/config/layer_params.h"

namespace spill {

AddLayer::AddLayer(LayerParams& params)
    : survival_(static_cast<float>(params.Float("survival", 1.0, Bounds::AboveTo(0, 1)))) {}

int AddLayer::DroppedInput(Phase phase, uint64_t seed) const {
  if (phase != Phase::kTrain || survival_ >= 1) return -1;
  return UniformAt(seed, 0) < survival_ ? -1 : 0;
}

float AddLayer::BranchWeight(Phase phase, uint64_t seed) const {
  if (phase != Phase::kTrain) return survival_;
  return DroppedInput(phase, seed) == 0 ? 0.0f : 1.0f;
}

Status ConcatLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  inputs_ = inputs;
  Shape out = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Shape& s = inputs[i];
    if (s.n() != out.n() || s.h() != out.h() || s.w() != out.w()) {
      return InvalidArgument("inputs must agree in batch, height and width to be concatenated");
    }
    out.dims[1] += s.c();
  }
  *outputs = {out};
  return Status::Ok();
}

Status AddLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  num_inputs_ = inputs.size();
  for (const Shape& s : inputs) {
    if (s != inputs[0]) return InvalidArgument("input shapes differ");
  }
  *outputs = {inputs[0]};
  return Status::Ok();
}

// Copies: each input into its slice, and back for the gradients.
LayerWork ConcatLayer::work(Pass pass, const std::vector<Shape>& inputs,
                            const std::vector<Shape>& outputs) const {
  LayerWork w;
  w.bytes = sizeof(float) * 2 * TotalElements(outputs);
  return w;
}

// Forward sums the inputs; backward hands the gradient to each input.
LayerWork AddLayer::work(Pass pass, const std::vector<Shape>& inputs,
                         const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  LayerWork w;
  w.flops = pass == Pass::kForward ? in - out : 0;
  w.bytes = sizeof(float) * (in + out);
  return w;
}

}  // namespace spill
