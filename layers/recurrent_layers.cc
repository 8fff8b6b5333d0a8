#include "layers/recurrent_layers.h"

#include <cmath>

#include "framework/config/layer_params.h"

namespace spill {
namespace {

const char* CellName(RecurrentCell cell) { return cell == RecurrentCell::kLstm ? "lstm" : "gru"; }

}  // namespace

RecurrentLayer::RecurrentLayer(LayerParams& params, RecurrentCell cell)
    : cell_(cell),
      hidden_(params.RequiredInt("hidden", 1, kMaxLayerExtent)),
      layers_(params.Int("layers", 1, 1, 64)),
      bidirectional_(params.Bool("bidirectional", false)),
      dropout_(static_cast<float>(params.Float("dropout", 0.0, Bounds::FromBelow(0, 1)))),
      bias_(params.Bool("bias", true)),
      carry_(params.Bool("carry", false)),
      initial_input_(params.Choice("initial", {"zeros", "input"}, "zeros") == "input"),
      final_(params.Bool("final", false)) {
  if (carry_ && initial_input_) {
    params.Fail("initial",
                "input cannot go with carry: true (both give the initial states; use one)");
  }
}

Status RecurrentLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  if (x.h() != 1) {
    return InvalidArgument(std::string(CellName(cell_)) +
                           " takes sequences N x features x 1 x T (time along the width), got " +
                           x.ToString());
  }
  batch_size_ = x.n();
  features_ = x.c();
  steps_ = x.w();
  const Shape states(batch_size_, states_per_image(), 1, 1);
  if (initial_input_ && (inputs.size() < 2 || inputs[1] != states)) {
    return InvalidArgument(
        std::string(CellName(cell_)) +
        " with initial: input reads its initial states as its second input, N x S x 1 x 1 (S = " +
        (cell_ == RecurrentCell::kLstm ? "2 * " : "") + "layers * directions * hidden" +
        (cell_ == RecurrentCell::kLstm ? ": the hidden states, then the cell states" : "") +
        "): expected " + states.ToString() + ", got " +
        (inputs.size() < 2 ? std::string("no second input") : inputs[1].ToString()));
  }
  *outputs = {Shape(batch_size_, directions() * hidden_, 1, steps_)};
  if (final_) outputs->push_back(states);
  return Status::Ok();
}

std::vector<ParamSpec> RecurrentLayer::params() const {
  const Initializer init = Initializer::Uniform(1.0f / std::sqrt(static_cast<float>(hidden_)));
  const int64_t rows = gates() * hidden_;
  std::vector<ParamSpec> specs;
  for (int64_t l = 0; l < layers_; ++l) {
    for (int64_t d = 0; d < directions(); ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      specs.push_back({"weight_ih" + suffix, Shape(rows, layer_inputs(l), 1, 1), init});
      specs.push_back({"weight_hh" + suffix, Shape(rows, hidden_, 1, 1), init});
      if (!bias_) continue;
      for (const char* name : {"bias_ih", "bias_hh"}) {
        ParamSpec bias{std::string(name) + suffix, Shape(1, rows, 1, 1), init};
        bias.decay_mult = 0;
        specs.push_back(bias);
      }
    }
  }
  if (carry_) {  // the states the next batch starts from, and the phase that wrote them
    ParamSpec state{"state", Shape(batch_size_, states_per_image() + 1, 1, 1),
                    Initializer::Constant(0)};
    state.trainable = false;
    state.decay_mult = 0;
    specs.push_back(state);
  }
  return specs;
}

std::vector<AuxSpec> RecurrentLayer::aux() const {
  std::vector<AuxSpec> aux = {{"reserve", Shape(batch_size_, reserve_per_image(), 1, 1)}};
  if (carry_) aux.push_back({"initial", Shape(batch_size_, states_per_image(), 1, 1)});
  return aux;
}

int64_t RecurrentLayer::LayerBlock() const {
  const int64_t hidden_states = steps_ * directions() * hidden_;
  // Room for a mask and a masked input in every layer's block keeps the
  // blocks alike; the top layer's stays unused.
  return directions() * steps_ * step_width() + hidden_states * (dropout_ > 0 ? 3 : 1);
}

int64_t RecurrentLayer::GatesOffset(int64_t layer, int64_t direction) const {
  return layer * LayerBlock() + direction * steps_ * step_width();
}

int64_t RecurrentLayer::HiddenOffset(int64_t layer) const {
  return GatesOffset(layer, directions());
}

int64_t RecurrentLayer::MaskOffset(int64_t layer) const {
  return HiddenOffset(layer) + steps_ * directions() * hidden_;
}

int64_t RecurrentLayer::MaskedOffset(int64_t layer) const {
  return MaskOffset(layer) + steps_ * directions() * hidden_;
}

// Forward: the input as rows of time steps (N*T x features) and the
// recurrent product of one step (N x gates*hidden).
int64_t RecurrentLayer::ForwardWorkspace(int64_t images) const {
  return images * (steps_ * features_ + gates() * hidden_);
}

// Backward: the input rows and their gradient (2 x N*T x features), the
// gate gradients of one layer and direction (GRU: of the input and the
// hidden halves), the gradients of a layer's output and of the one below
// (2 x N*T x directions*hidden), and the carried gradients of the hidden and
// cell states (2 x N x hidden).
int64_t RecurrentLayer::BackwardWorkspace(int64_t images) const {
  const int64_t gate_grads = (cell_ == RecurrentCell::kGru ? 2 : 1) * steps_ * gates() * hidden_;
  return images *
         (2 * steps_ * features_ + gate_grads + 2 * steps_ * directions() * hidden_ + 2 * hidden_);
}

size_t RecurrentLayer::workspace_bytes(Pass pass) const {
  const int64_t floats =
      pass == Pass::kForward ? ForwardWorkspace(batch_size_) : BackwardWorkspace(batch_size_);
  return static_cast<size_t>(floats) * sizeof(float);
}

std::vector<AlgorithmCandidate> RecurrentLayer::algorithm_candidates(Pass pass, int op,
                                                                     int64_t images) const {
  const int64_t floats =
      pass == Pass::kForward ? ForwardWorkspace(images) : BackwardWorkspace(images);
  return {{"fused", 0.0, static_cast<size_t>(floats) * sizeof(float)}};
}

// Per layer and direction and step, two matrix products (input and
// recurrent) over the batch; backward twice that (the weight and the input
// gradients), plus the cell's elementwise work.
LayerWork RecurrentLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  double products = 0;
  for (int64_t l = 0; l < layers_; ++l) {
    products += 2.0 * static_cast<double>(directions()) * static_cast<double>(batch_size_) *
                static_cast<double>(steps_) * static_cast<double>(gates() * hidden_) *
                static_cast<double>(layer_inputs(l) + hidden_);
  }
  const double reserve =
      static_cast<double>(batch_size_) * static_cast<double>(reserve_per_image());
  double weights = 0;
  for (const ParamSpec& p : params()) weights += static_cast<double>(p.shape.numel());
  LayerWork w;
  const double elementwise = 10.0 * reserve;
  if (pass == Pass::kForward) {
    w.flops = products + elementwise;
    w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs) + reserve + weights);
  } else {
    w.flops = 2 * products + 2 * elementwise;
    w.bytes = sizeof(float) *
              (2 * TotalElements(inputs) + TotalElements(outputs) + reserve + 2 * weights);
  }
  return w;
}

}  // namespace spill
