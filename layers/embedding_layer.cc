#include "layers/embedding_layer.h"

#include <algorithm>

#include "framework/config/layer_params.h"
#include "framework/graph/net.h"

namespace spill {

EmbeddingLayer::EmbeddingLayer(LayerParams& params)
    : vocabulary_(params.RequiredInt("vocabulary", 1, kMaxLayerExtent)),
      size_(params.RequiredInt("size", 1, kMaxLayerExtent)) {}

Status EmbeddingLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& ids = inputs[0];
  if (ids.c() != 1 || ids.h() != 1) {
    return InvalidArgument("embedding takes ids N x 1 x 1 x T (a sequence along the width), got " +
                           ids.ToString());
  }
  steps_ = ids.w();
  *outputs = {Shape(ids.n(), size_, 1, steps_)};
  return Status::Ok();
}

std::vector<ParamSpec> EmbeddingLayer::params() const {
  return {{"weight", Shape(vocabulary_, size_, 1, 1), Initializer::Normal(1.0f)}};
}

// A gather forward; backward adds each position's gradient into its row.
LayerWork EmbeddingLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  const double out = TotalElements(outputs);
  LayerWork w;
  w.flops = pass == Pass::kForward ? 0 : out;
  w.bytes = sizeof(float) * (TotalElements(inputs) + 2 * out);
  return w;
}

namespace {

// Whether `layer` reads the network's input, directly or through channel
// slices of it (a packed input: a sequence pair's source and decoder input
// in two channels).
bool ReadsNetworkInput(const Net& net, int layer) {
  for (int hops = 0; hops < net.num_layers(); ++hops) {
    const std::vector<LayerDecl::Input>& inputs = net.decl(layer).inputs;
    if (inputs.empty()) return false;
    if (net.decl(inputs[0].layer).is_input) return true;
    if (net.layer(inputs[0].layer).type() != "slice") return false;
    layer = inputs[0].layer;
  }
  return false;
}

}  // namespace

int64_t InputVocabulary(const Net& net) {
  int64_t vocabulary = 0;
  for (int id = 0; id < net.num_layers(); ++id) {
    const auto* embedding = dynamic_cast<const EmbeddingLayer*>(&net.layer(id));
    if (embedding == nullptr || !ReadsNetworkInput(net, id)) continue;
    vocabulary =
        vocabulary == 0 ? embedding->vocabulary() : std::min(vocabulary, embedding->vocabulary());
  }
  return vocabulary;
}

}  // namespace spill
