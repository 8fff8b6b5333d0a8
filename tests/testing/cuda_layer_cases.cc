// The layer configurations the CUDA tests run: every layer type, and the
// shapes and options where a kernel or cuDNN could go wrong.
#include "tests/testing/cuda_layer_harness.h"

namespace spill {
namespace testing {

const std::vector<LayerCase>& CudaLayerCases() {
  static const std::vector<LayerCase>* cases = new std::vector<LayerCase>{
      // Convolution: every cuDNN candidate of every operation is compared.
      LayerCase{"conv", "{type: convolution, filters: 4, kernel: 3, pad: 1}", {Shape(2, 3, 8, 8)}},
      LayerCase{"conv_asymmetric",
                "{type: convolution, filters: 6, kernel: [3, 5], stride: [2, 1], pad: [1, 2]}",
                {Shape(2, 4, 9, 11)}},
      LayerCase{"conv_dilation",
                "{type: convolution, filters: 4, kernel: 3, dilation: [2, 3], pad: 2}",
                {Shape(2, 3, 10, 12)}},
      LayerCase{"conv_groups",
                "{type: convolution, filters: 6, kernel: 3, groups: 3, pad: 1, bias: false}",
                {Shape(2, 6, 7, 7)}},
      LayerCase{"conv_depthwise",
                "{type: convolution, filters: 8, kernel: 3, groups: 8, stride: 2, pad: 1}",
                {Shape(2, 8, 9, 9)}},
      LayerCase{"conv_1x1", "{type: convolution, filters: 5, kernel: 1}", {Shape(3, 7, 6, 6)}},
      LayerCase{"conv_wide",
                "{type: convolution, filters: 16, kernel: 3, pad: 1}",
                {Shape(4, 16, 16, 16)}},
      LayerCase{"conv_5x5_stride",
                "{type: convolution, filters: 8, kernel: 5, stride: 2, pad: 2}",
                {Shape(2, 3, 20, 20)}},
      LayerCase{"conv_eval",
                "{type: convolution, filters: 4, kernel: 3}",
                {Shape(2, 2, 6, 6)},
                Phase::kEval},
      // Fully connected.
      LayerCase{"fc", "{type: fully_connected, outputs: 7}", {Shape(3, 4, 3, 2)}},
      LayerCase{
          "fc_no_bias", "{type: fully_connected, outputs: 5, bias: false}", {Shape(4, 9, 1, 1)}},
      LayerCase{"fc_wide", "{type: fully_connected, outputs: 300}", {Shape(5, 64, 2, 2)}},
      // ReLU.
      LayerCase{"relu", "{type: relu}", {Shape(2, 3, 5, 7)}},
      LayerCase{"leaky_relu", "{type: relu, negative_slope: 0.1}", {Shape(2, 3, 5, 7)}},
      // Pooling.
      LayerCase{"max_pool", "{type: max_pool, kernel: 3, stride: 2}", {Shape(2, 3, 9, 9)}},
      LayerCase{"max_pool_ceil_pad",
                "{type: max_pool, kernel: 3, stride: 2, pad: 1, ceil_mode: true}",
                {Shape(2, 3, 10, 10)}},
      LayerCase{"max_pool_ties",
                "{type: max_pool, kernel: 3, stride: 1, pad: 1}",
                {Shape(2, 2, 6, 6)},
                Phase::kTrain,
                true},
      LayerCase{"max_pool_asymmetric",
                "{type: max_pool, kernel: [2, 3], stride: [2, 1], pad: [1, 1]}",
                {Shape(2, 3, 7, 8)}},
      LayerCase{"avg_pool", "{type: avg_pool, kernel: 3, stride: 2, pad: 1}", {Shape(2, 3, 9, 9)}},
      LayerCase{"avg_pool_exclude_pad",
                "{type: avg_pool, kernel: 3, stride: 2, pad: 1, count_include_pad: false}",
                {Shape(2, 3, 9, 9)}},
      LayerCase{"avg_pool_ceil",
                "{type: avg_pool, kernel: 3, stride: 2, ceil_mode: true}",
                {Shape(2, 3, 10, 10)}},
      LayerCase{"avg_pool_ceil_pad_exclude",
                "{type: avg_pool, kernel: [3, 2], stride: [2, 2], pad: [1, 1], ceil_mode: true, "
                "count_include_pad: false}",
                {Shape(2, 3, 8, 9)}},
      LayerCase{"global_avg_pool", "{type: global_avg_pool}", {Shape(2, 5, 7, 6)}},
      // BatchNorm: many elements per channel (several per thread), few, and
      // evaluation with the running statistics.
      LayerCase{"batch_norm", "{type: batch_norm}", {Shape(4, 3, 17, 19)}},
      LayerCase{
          "batch_norm_small", "{type: batch_norm, momentum: 0.2, eps: 0.001}", {Shape(2, 4, 3, 3)}},
      LayerCase{"batch_norm_fc", "{type: batch_norm}", {Shape(8, 5, 1, 1)}},
      LayerCase{"batch_norm_eval", "{type: batch_norm}", {Shape(3, 4, 5, 5)}, Phase::kEval},
      // LRN: AlexNet's constants, and strong ones that exercise the formula.
      LayerCase{
          "lrn", "{type: lrn, size: 5, alpha: 0.0001, beta: 0.75, k: 1}", {Shape(2, 7, 4, 5)}},
      LayerCase{"lrn_strong",
                "{type: lrn, size: 3, alpha: 2.0, beta: 0.75, k: 1.5}",
                {Shape(2, 6, 3, 4)}},
      LayerCase{"lrn_wide_window",
                "{type: lrn, size: 7, alpha: 1.0, beta: 0.5, k: 2}",
                {Shape(2, 4, 3, 3)}},
      // Softmax with loss (labels as the second input).
      LayerCase{"softmax_loss",
                "{type: softmax_loss, weight: 0.5}",
                {Shape(3, 10, 1, 1), Shape(3, 1, 1, 1)}},
      LayerCase{
          "softmax_loss_many", "{type: softmax_loss}", {Shape(2, 1000, 1, 1), Shape(2, 1, 1, 1)}},
      // Dropout: the CUDA mask matches the CPU's bit for bit.
      LayerCase{"dropout", "{type: dropout, ratio: 0.3}", {Shape(2, 3, 5, 7)}},
      LayerCase{"dropout_eval", "{type: dropout, ratio: 0.3}", {Shape(2, 3, 5, 7)}, Phase::kEval},
      // Joins.
      LayerCase{
          "concat", "{type: concat}", {Shape(2, 3, 4, 5), Shape(2, 2, 4, 5), Shape(2, 1, 4, 5)}},
      LayerCase{"concat_one", "{type: concat}", {Shape(2, 3, 4, 5)}},
      LayerCase{"add", "{type: add}", {Shape(2, 3, 4, 5), Shape(2, 3, 4, 5), Shape(2, 3, 4, 5)}},
      LayerCase{"add_many", "{type: add}", std::vector<Shape>(11, Shape(2, 3, 2, 3))},
      // The layers of mobile and modern networks (layers/activation_layers.h
      // and the other vision layers).
      LayerCase{"relu6", "{type: relu6}", {Shape(2, 3, 5, 7)}},
      LayerCase{"clip", "{type: clip, min: -0.5, max: 0.25}", {Shape(2, 3, 5, 7)}},
      LayerCase{"hard_sigmoid", "{type: hard_sigmoid}", {Shape(2, 3, 5, 7)}},
      LayerCase{"hard_swish", "{type: hard_swish}", {Shape(2, 3, 5, 7)}},
      LayerCase{"sigmoid", "{type: sigmoid}", {Shape(2, 3, 5, 7)}},
      LayerCase{"silu", "{type: silu}", {Shape(2, 3, 5, 7)}},
      LayerCase{"tanh", "{type: tanh}", {Shape(2, 3, 5, 7)}},
      LayerCase{"matmul",
                "{type: matmul, transpose_a: true, alpha: 0.5}",
                {Shape(2, 3, 4, 5), Shape(2, 3, 4, 6)}},
      LayerCase{"matmul_transpose_b",
                "{type: matmul, transpose_b: true}",
                {Shape(2, 3, 5, 4), Shape(2, 3, 6, 4)}},
      LayerCase{"softmax_w", "{type: softmax}", {Shape(2, 3, 5, 7)}},
      LayerCase{"softmax_c", "{type: softmax, axis: c}", {Shape(2, 3, 5, 7)}},
      LayerCase{"reshape", "{type: reshape, shape: [5, 3, -1]}", {Shape(2, 3, 5, 7)}},
      LayerCase{"gelu", "{type: gelu}", {Shape(2, 3, 5, 7)}},
      LayerCase{"multiply", "{type: multiply}", {Shape(2, 3, 4, 5), Shape(2, 3, 4, 5)}},
      LayerCase{"multiply_se", "{type: multiply}", {Shape(2, 6, 9, 9), Shape(2, 6, 1, 1)}},
      LayerCase{"multiply_se_first", "{type: multiply}", {Shape(2, 4, 1, 1), Shape(2, 4, 7, 3)}},
      LayerCase{"broadcast_add", "{type: broadcast_add}", {Shape(2, 5, 6, 6), Shape(2, 5, 1, 1)}},
      LayerCase{"channel_shuffle", "{type: channel_shuffle, groups: 3}", {Shape(2, 12, 4, 5)}},
      LayerCase{"slice", "{type: slice, begin: 2, end: 5}", {Shape(2, 7, 3, 4)}},
      LayerCase{"layer_norm", "{type: layer_norm, eps: 1e-6}", {Shape(3, 8, 5, 6)}},
      LayerCase{"layer_norm_pooled", "{type: layer_norm}", {Shape(4, 16, 1, 1)}},
      LayerCase{"scale", "{type: scale, value: 0.5}", {Shape(2, 5, 6, 7)}},
      LayerCase{"scale_bias", "{type: scale, bias: true}", {Shape(3, 4, 5, 5)}},
      LayerCase{"upsample_nearest", "{type: upsample, factor: [2, 3]}", {Shape(2, 3, 5, 4)}},
      LayerCase{
          "upsample_bilinear", "{type: upsample, factor: 2, mode: bilinear}", {Shape(2, 3, 5, 6)}},
      LayerCase{"upsample_bilinear_corners",
                "{type: upsample, factor: 3, mode: bilinear, align_corners: true}",
                {Shape(2, 2, 4, 3)}},
      LayerCase{"pad", "{type: pad, pad: [1, 0, 2, 3], value: -2}", {Shape(2, 3, 4, 5)}},
      LayerCase{"pad_crop", "{type: pad, pad: [1, -2, -1, 2], value: -2}", {Shape(2, 3, 4, 5)}},
      LayerCase{"space_to_depth", "{type: space_to_depth}", {Shape(2, 3, 4, 6)}},
      LayerCase{"space_to_depth_3", "{type: space_to_depth, block_size: 3}", {Shape(2, 5, 6, 9)}},
      LayerCase{"transposed_convolution",
                "{type: transposed_convolution, filters: 6, kernel: 3, stride: 2, pad: 1, "
                "output_pad: 1}",
                {Shape(2, 4, 5, 5)}},
      LayerCase{"transposed_convolution_groups",
                "{type: transposed_convolution, filters: 4, kernel: [2, 3], stride: [2, 1], "
                "dilation: [1, 2], groups: 2, bias: false}",
                {Shape(2, 6, 4, 5)}},
      LayerCase{"transposed_convolution_unet",
                "{type: transposed_convolution, filters: 8, kernel: 2, stride: 2}",
                {Shape(2, 16, 6, 6)}},
      // The loss per pixel: scores N x classes x H x W and a class per pixel,
      // N x 1 x H x W (an input layer with labels: pixels).
      LayerCase{"softmax_loss_pixels",
                "{type: softmax_loss, weight: 0.5}",
                {Shape(2, 4, 3, 5), Shape(2, 1, 3, 5)}},
      // Recurrent layers: sequences N x features x 1 x T. Two layers in both
      // directions with dropout between them (its mask matches the CPU's),
      // in training and evaluation; one direction; a single step (no state
      // before it, so W_hh's gradient is zero); GRU in both directions and
      // stacked without biases.
      LayerCase{"lstm",
                "{type: lstm, hidden: 5, layers: 2, bidirectional: true, dropout: 0.3}",
                {Shape(3, 4, 1, 6)}},
      LayerCase{"lstm_eval",
                "{type: lstm, hidden: 5, layers: 2, bidirectional: true, dropout: 0.3}",
                {Shape(3, 4, 1, 6)},
                Phase::kEval},
      LayerCase{"lstm_one_direction", "{type: lstm, hidden: 8}", {Shape(2, 3, 1, 9)}},
      LayerCase{"lstm_one_step", "{type: lstm, hidden: 3, layers: 2}", {Shape(3, 2, 1, 1)}},
      LayerCase{"gru", "{type: gru, hidden: 6, bidirectional: true}", {Shape(3, 5, 1, 7)}},
      LayerCase{"gru_stacked_no_bias",
                "{type: gru, hidden: 4, layers: 3, dropout: 0.5, bias: false}",
                {Shape(2, 3, 1, 5)}},
      // Embedding: ids made whole numbers in range, repeated, with some that
      // have no row (FillInputs).
      LayerCase{"embedding", "{type: embedding, vocabulary: 9, size: 6}", {Shape(3, 1, 1, 8)}},
      // Sequence layers: causal attention both ways, a position table
      // longer than the sequence, an image read as a sequence.
      LayerCase{
          "attention_tiled", "{type: attention, heads: 2, causal: true}", {Shape(2, 12, 1, 7)}},
      LayerCase{
          "attention_naive", "{type: attention, heads: 3, algorithm: naive}", {Shape(2, 18, 1, 5)}},
      LayerCase{"positions", "{type: positions, length: 9}", {Shape(3, 4, 1, 7)}},
      LayerCase{"tokens", "{type: tokens}", {Shape(2, 3, 4, 5)}},
      LayerCase{"class_token", "{type: class_token}", {Shape(3, 4, 1, 5)}},
      LayerCase{"token", "{type: token, index: -2}", {Shape(3, 4, 1, 5)}},
      // Windows of an image: shifted (the roll and the mask), and a grid of
      // 2 x 3 windows unshifted.
      LayerCase{"window_attention_shifted",
                "{type: window_attention, heads: 2, window: 3, shift: 1}",
                {Shape(2, 12, 6, 6)}},
      LayerCase{"window_attention",
                "{type: window_attention, heads: 3, window: 2}",
                {Shape(2, 18, 4, 6)}},
      // Swin V2's cosine attention, shifted.
      LayerCase{"window_attention_cosine",
                "{type: window_attention, heads: 2, window: 3, shift: 1, cosine: true}",
                {Shape(2, 12, 6, 6)}}};
  return *cases;
}

}  // namespace testing
}  // namespace spill
