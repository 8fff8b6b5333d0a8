// lstm and gru: recurrent layers over sequences, fused over time, with
// PyTorch's equations, gate order and parameter names (nn.LSTM, nn.GRU), so
// that weights move between the two unchanged.
//
// A sequence batch is N x features x 1 x T: time runs along the width, as a
// one-dimensional convolution sees it. The output is N x (directions *
// hidden) x 1 x T: at every step the hidden state of the top layer, the
// forward direction's units first. Initial states are zero unless
// `initial: input` or `carry: true` gives them.
//
//   - {name: rnn, type: lstm, hidden: 256, layers: 2, dropout: 0.2}
//   - {name: enc, type: gru, hidden: 128, bidirectional: true}
//   bias: true; carry: false; initial: zeros; final: false
//
// Layer l's direction d has weight_ih_l<l> (gates*hidden x inputs),
// weight_hh_l<l> (gates*hidden x hidden), bias_ih_l<l> and bias_hh_l<l>
// (gates*hidden), the reverse direction's names ending in _reverse; LSTM
// gates are input, forget, cell, output (4), GRU gates reset, update, new
// (3). Every parameter starts uniform in +-1/sqrt(hidden). `dropout` zeroes
// each input of the layers above the first with that probability in
// training and scales the rest (the mask is saved, so a recomputation gives
// the same output).
//
// What backward needs is saved in one aux tensor, `reserve` (cuDNN's name),
// batch-major so the memory policies see and move it like any tensor: per
// image, for each layer, per direction the activated gates of every step
// (LSTM also the cell state, GRU also the hidden half of the new gate,
// W_hn h + b_hn), the layer's hidden states, and the dropout mask and masked
// input of the layer above. The input is read again by backward; the output
// is not.
//
// With `carry: true` the final states of a batch are the initial states of
// the next (truncated back-propagation through time: a text dataset with
// data.streams continues row r of a batch in row r of the next). They live
// in a non-trainable parameter, `state` (batch x (layers * directions *
// hidden, and as much again for the LSTM's cell states, + 1)), checkpointed
// with the weights; a batch saves the states it started from in an aux
// tensor, `initial`, so a recomputation and backward use them after the
// parameter moved on. No gradient flows into them. The last float of each
// image's state says in which phase it was written: the first batch of a
// phase other than the last one's (evaluation after training, training
// after evaluation) starts from zero states.
//
// States as values (PyTorch's `out, (h_n, c_n) = lstm(x, (h_0, c_0))`):
// an image's states are S floats, the hidden states of every layer and
// direction (layers * directions * hidden: layer by layer, the forward
// direction first), then for the LSTM their cell states in the same order
// (as many again). Hidden block k = layer * directions + direction of image
// i is PyTorch's h_0[k, i] (c_0[k, i] for the cell block). With
// `initial: input` the layer starts from a second input, N x S x 1 x 1, and
// backward gives its gradient. With `final: true` the layer has a second
// output, N x S x 1 x 1, its final states (h_n, c_n): each direction's
// states after its last step (the reverse direction's at t = 0), whose
// gradient flows back through the sequence. An encoder hands its final
// states to a decoder of the same cell, layers, directions and hidden size:
//
//   - {name: enc, type: lstm, hidden: 128, final: true}
//   - {name: dec, type: lstm, hidden: 128, inputs: [dec_in, enc:1], initial: input}
//
// `initial: input` and `carry: true` exclude each other. All three run on
// the CPU device; the CUDA layer refuses them.
#ifndef SPILL_LAYERS_RECURRENT_LAYERS_H_
#define SPILL_LAYERS_RECURRENT_LAYERS_H_

#include <string>

#include "framework/graph/layer.h"

namespace spill {

enum class RecurrentCell { kLstm, kGru };

class RecurrentLayer : public Layer {
 public:
  RecurrentLayer(LayerParams& params, RecurrentCell cell);

  // The sequence, and with `initial: input` the initial states.
  int min_inputs() const override { return initial_input_ ? 2 : 1; }
  int max_inputs() const override { return min_inputs(); }
  // The sequence of hidden states, and with `final: true` the final states.
  int num_outputs() const override { return final_ ? 2 : 1; }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  std::vector<AuxSpec> aux() const override;
  // Backward reads the sequence and the initial states it was given.
  BackwardNeeds backward_needs() const override {
    return {std::vector<bool>(min_inputs(), true), false};
  }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  size_t workspace_bytes(Pass pass) const override;
  // One way to compute each pass, listed so that a step computed over
  // slices of the batch (a streamed step) gets the workspace of its slices:
  // it holds a slice's rows and gate gradients, in proportion to its images.
  // Its time is left to the roofline (seconds 0: no other candidate to
  // compare with).
  int num_algorithm_ops(Pass pass) const override { return 1; }
  std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op,
                                                       int64_t images) const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  // ---- The reserve of one image, in floats (see the header comment) ----
  int64_t gates() const { return cell_ == RecurrentCell::kLstm ? 4 : 3; }
  // Floats saved per step and direction: the gates and the cell state (LSTM),
  // or the gates and W_hn h + b_hn (GRU).
  int64_t step_width() const { return (gates() + 1) * hidden_; }
  int64_t directions() const { return bidirectional_ ? 2 : 1; }
  int64_t layer_inputs(int64_t layer) const {
    return layer == 0 ? features_ : directions() * hidden_;
  }
  bool masks(int64_t layer) const { return dropout_ > 0 && layer + 1 < layers_; }
  int64_t GatesOffset(int64_t layer, int64_t direction) const;
  int64_t HiddenOffset(int64_t layer) const;  // T x directions*hidden
  int64_t MaskOffset(int64_t layer) const;    // T x directions*hidden, when masks(layer)
  int64_t MaskedOffset(int64_t layer) const;  // the masked hidden states, when masks(layer)
  int64_t reserve_per_image() const { return LayerBlock() * layers_; }

  // ---- States: carried (carry: true), an input (initial: input), an
  // output (final: true) ----
  bool carries() const { return carry_; }
  bool takes_initial_states() const { return initial_input_; }
  bool gives_final_states() const { return final_; }
  // Floats of one image's states: the hidden states of every layer and
  // direction, then (LSTM) their cell states.
  int64_t states_per_image() const {
    return (cell_ == RecurrentCell::kLstm ? 2 : 1) * layers_ * directions() * hidden_;
  }
  int64_t InitialHiddenOffset(int64_t layer, int64_t direction) const {
    return (layer * directions() + direction) * hidden_;
  }
  int64_t InitialCellOffset(int64_t layer, int64_t direction) const {
    return layers_ * directions() * hidden_ + InitialHiddenOffset(layer, direction);
  }

 protected:
  // The first parameter (weight_ih) of layer l, direction d; weight_hh,
  // bias_ih and bias_hh follow.
  int64_t ParamIndex(int64_t l, int64_t d) const {
    return (l * directions() + d) * (bias_ ? 4 : 2);
  }
  // Image i's input rows of layer l (T x layer_inputs(l)): `rows`, the
  // layer's input as rows of time steps, for l = 0, else the hidden states
  // below in `reserve`, masked in training.
  const float* InputRows(const float* reserve, const float* rows, int64_t l, int64_t i,
                         bool train) const {
    if (l == 0) return rows + i * steps_ * features_;
    const int64_t offset = train && masks(l - 1) ? MaskedOffset(l - 1) : HiddenOffset(l - 1);
    return reserve + i * reserve_per_image() + offset;
  }

  // The floats of one layer's block of the reserve.
  int64_t LayerBlock() const;
  // Floats of the forward and backward workspaces for `images` images.
  int64_t ForwardWorkspace(int64_t images) const;
  int64_t BackwardWorkspace(int64_t images) const;

  RecurrentCell cell_;
  int64_t hidden_ = 0;
  int64_t layers_ = 1;
  bool bidirectional_ = false;
  float dropout_ = 0;
  bool bias_ = true;
  bool carry_ = false;
  bool initial_input_ = false;  // initial: input
  bool final_ = false;
  int64_t batch_size_ = 0;
  int64_t features_ = 0;
  int64_t steps_ = 0;  // T
};

// A device's recurrent layer with its cell fixed: what a device registers as
// `lstm` and as `gru`.
template <typename DeviceLayer, RecurrentCell kCell>
class RecurrentCellLayer : public DeviceLayer {
 public:
  explicit RecurrentCellLayer(LayerParams& params) : DeviceLayer(params, kCell) {}
};

}  // namespace spill

#endif  // SPILL_LAYERS_RECURRENT_LAYERS_H_
