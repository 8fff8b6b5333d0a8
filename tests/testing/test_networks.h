// Small networks of every shape the memory runtime must handle - linear
// (LeNet, AlexNet) and with fans and joins (ResNet, Inception, DenseNet), in
// plain and in blocked layouts - for the tests that train them in every
// memory mode, on each device.
#ifndef SPILL_TESTS_TESTING_TEST_NETWORKS_H_
#define SPILL_TESTS_TESTING_TEST_NETWORKS_H_

#include <cstring>
#include <vector>

namespace spill {
namespace testing {

// A block `unit`: a convolution of $filters filters and a residual add of
// its input ($in) - the block of the parser's tests and the fuzzer's
// fixtures, which put their own parameters and layers around it.
inline constexpr char kResidualUnitBlock[] = R"(blocks:
  unit:
    params: {filters: null}
    layers:
      - {name: conv, type: convolution, filters: $filters, kernel: 3, pad: 1}
      - {name: add, type: add, inputs: [conv, $in]}
)";

inline constexpr char kLeNet[] = R"(
layers:
  - {name: data, type: input, shape: [1, 12, 12]}
  - {name: conv1, type: convolution, filters: 4, kernel: 3}
  - {name: pool1, type: max_pool, kernel: 2}
  - {name: conv2, type: convolution, filters: 6, kernel: 3}
  - {name: fc1, type: fully_connected, outputs: 16}
  - {name: relu1, type: relu}
  - {name: drop, type: dropout, ratio: 0.3}
  - {name: fc2, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

inline constexpr char kResNet[] = R"(
include: [models/blocks/resnet.yaml]
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, block: cifar_stem, args: {width: 4}}
  - {name: stage1, block: basic, repeat: 2, args: {filters: 4}}
  - {name: stage2, block: basic_stage, args: {filters: 8, units: 2}}
  - {name: head, block: head, args: {classes: 5}}
)";

inline constexpr char kInception[] = R"(
blocks:
  unit:
    params: {width: 4}
    layers:
      - {name: pool, type: avg_pool, inputs: [$in], kernel: 3, stride: 1, pad: 1}
      - {name: b1, type: convolution, filters: $width, kernel: 1}
      - {name: b2, type: convolution, inputs: [$in], filters: $width, kernel: 1}
      - {name: b3_1, type: convolution, inputs: [$in], filters: $width, kernel: 1}
      - {name: b3_2, type: convolution, filters: $width, kernel: 3, pad: 1}
      - {name: b3_bn, type: batch_norm}
      - {name: b3_a, type: relu, inputs: [b3_bn]}
      - {name: b3_b, type: lrn, size: 3, inputs: [b3_bn]}
      - {name: concat, type: concat, inputs: [b1, b2, b3_a, b3_b]}
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: a, block: unit, repeat: 2, args: {width: 2}}
  - {name: pool, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

inline constexpr char kAlexNet[] = R"(
layers:
  - {name: data, type: input, shape: [3, 31, 31]}
  - {name: conv1, type: convolution, filters: 8, kernel: 5, stride: 2}
  - {name: relu1, type: relu}
  - {name: norm1, type: lrn, size: 5}
  - {name: pool1, type: max_pool, kernel: 3, stride: 2}
  - {name: conv2, type: convolution, filters: 8, kernel: 3, pad: 1, groups: 2}
  - {name: relu2, type: relu}
  - {name: pool2, type: max_pool, kernel: 3, stride: 2}
  - {name: fc6, type: fully_connected, outputs: 32}
  - {name: relu6, type: relu}
  - {name: drop6, type: dropout, ratio: 0.5}
  - {name: fc7, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

inline constexpr char kDenseNet[] = R"(
blocks:
  dense_layer:
    layers:
      - {name: bn, type: batch_norm}
      - {name: relu, type: relu}
      - {name: conv, type: convolution, filters: 3, kernel: 3, pad: 1, bias: false}
      - {name: concat, type: concat, inputs: [$in, conv]}
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: conv0, type: convolution, filters: 4, kernel: 3, pad: 1}
  - {name: block, block: dense_layer, repeat: 4}
  - {name: pool, type: avg_pool, kernel: 2}
  - {name: bn, type: batch_norm}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// Channels in whole blocks of 16: on CPUs where convolutions compute in
// blocked layouts, activations stay blocked from the first convolution to the
// classifier (framework/graph/layouts.h) through every layer type that can keep
// them - batch norm, ReLU, max pooling, a fan into an addition, a
// concatenation, global average pooling.
inline constexpr char kBlocked[] = R"(
include: [models/blocks/resnet.yaml]
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, block: cifar_stem, args: {width: 16}}
  - {name: pool, type: max_pool, kernel: 3, stride: 2, pad: 1}
  - {name: unit, block: basic, args: {filters: 16}}
  - {name: side, type: convolution, inputs: [unit], filters: 16, kernel: 1, bias: false}
  - {name: join, type: concat, inputs: [unit, side]}
  - {name: down, block: basic_down, args: {filters: 32}}
  - {name: head, block: head, args: {classes: 5}}
)";

// A sequence model: ids embedded, two LSTM layers with dropout between
// them, a bidirectional GRU, and a classifier at every step (a 1x1
// convolution) scored against a label per position, padding positions
// (label -1) left out.
inline constexpr char kSequence[] = R"(
layers:
  - {name: data, type: input, shape: [1, 1, 6], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 7, size: 4}
  - {name: lstm, type: lstm, hidden: 5, layers: 2, dropout: 0.3}
  - {name: gru, type: gru, hidden: 3, bidirectional: true}
  - {name: scores, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss, ignore_label: -1}
)";

// Residual units with stochastic depth (models/resnet110_sd.yaml's rule):
// each iteration draws which branches run, the plan holds them all. The
// third unit's branch survives with p = 0.5 around a projection shortcut.
inline constexpr char kStochasticDepth[] = R"(
include: [models/blocks/resnet.yaml]
blocks:
  unit:
    params: {filters: null, survival: null}
    layers:
      - {name: conv1, type: convolution, filters: $filters, kernel: 3, pad: 1, bias: false}
      - {name: bn1, type: batch_norm}
      - {name: relu1, type: relu}
      - {name: conv2, type: convolution, filters: $filters, kernel: 3, pad: 1, bias: false}
      - {name: add, type: add, inputs: [conv2, $in], survival: $survival}
      - {name: relu, type: relu}
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, block: cifar_stem, args: {width: 4}}
  - {name: stage1, block: unit, repeat: 2, args: {filters: 4, survival: "${1 - i * 0.25}"}}
  - {name: proj, type: convolution, inputs: [stage1], filters: 8, kernel: 1, stride: 2}
  - {name: down, type: convolution, inputs: [stage1], filters: 8, kernel: 3, stride: 2, pad: 1}
  - {name: sum, type: add, inputs: [down, proj], survival: 0.5}
  - {name: head, block: head, args: {classes: 5}}
)";

// An encoder-decoder (seq2seq): the input packs each pair's source ids and
// decoder input ids in two channels, sliced apart and embedded; the encoder
// LSTM hands its final states (enc:1) to the decoder's, whose every step is
// scored against a label, padding (-1) left out.
inline constexpr char kSeq2Seq[] = R"(
layers:
  - {name: data, type: input, shape: [2, 1, 6], labels: pixels}
  - {name: source, type: slice, begin: 0, end: 1, inputs: [data]}
  - {name: target, type: slice, begin: 1, end: 2, inputs: [data]}
  - {name: source_embed, type: embedding, vocabulary: 7, size: 4, inputs: [source]}
  - {name: encoder, type: lstm, hidden: 5, layers: 2, final: true}
  - {name: target_embed, type: embedding, vocabulary: 7, size: 4, inputs: [target]}
  - {name: decoder, type: lstm, hidden: 5, layers: 2, initial: input,
     inputs: [target_embed, encoder:1]}
  - {name: scores, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss, ignore_label: -1}
)";

// A GPT block (models/gpt.yaml's): a learned position embedding, causal
// two-head attention between pre-norm projections, a GELU MLP, two residual
// adds, and a classifier at every position. The first attention keeps the
// probabilities (naive), the second the row statistics (tiled).
inline constexpr char kGpt[] = R"(
layers:
  - {name: data, type: input, shape: [1, 1, 6], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 7, size: 8}
  - {name: pos, type: positions, length: 6}
  - {name: ln1, type: layer_norm}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: attn, type: attention, heads: 2, causal: true, algorithm: naive}
  - {name: proj, type: convolution, filters: 8, kernel: 1}
  - {name: add1, type: add, inputs: [proj, pos]}
  - {name: ln2, type: layer_norm}
  - {name: fc1, type: convolution, filters: 16, kernel: 1}
  - {name: gelu, type: gelu}
  - {name: fc2, type: convolution, filters: 8, kernel: 1}
  - {name: add2, type: add, inputs: [fc2, add1]}
  - {name: ln3, type: layer_norm}
  - {name: qkv2, type: convolution, filters: 24, kernel: 1}
  - {name: attn2, type: attention, heads: 4, causal: true}
  - {name: add3, type: add, inputs: [attn2, add2]}
  - {name: scores, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss}
)";

// A vision transformer (models/vit.yaml's, with torchvision's class token):
// 4x4 patches embedded by a strided convolution and read as tokens, a class
// token put first, a position table, a pre-norm block of two-head attention
// and a GELU MLP, and the class token's features classified.
inline constexpr char kVit[] = R"(
layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 8, kernel: 4, stride: 4}
  - {name: tokens, type: tokens}
  - {name: cls, type: class_token}
  - {name: pos, type: positions, length: 5}
  - {name: ln1, type: layer_norm}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: attn, type: attention, heads: 2}
  - {name: proj, type: convolution, filters: 8, kernel: 1}
  - {name: add1, type: add, inputs: [proj, pos]}
  - {name: ln2, type: layer_norm}
  - {name: fc1, type: convolution, filters: 16, kernel: 1}
  - {name: gelu, type: gelu}
  - {name: fc2, type: convolution, filters: 8, kernel: 1}
  - {name: add2, type: add, inputs: [fc2, add1]}
  - {name: ln3, type: layer_norm}
  - {name: first, type: token, index: 0}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// A Swin Transformer (torchvision's, as the ONNX import writes it): 2x2
// patches, a block of window attention and one of shifted cosine window
// attention (Swin V2's), each between pre-norm 1x1 projections with a
// residual add, MaxViT's grid attention scaled by C^-1/2, a patch merging
// (space_to_depth, layer norm, a linear reduction), and the pooled
// features classified after a tanh (MaxViT's head).
inline constexpr char kSwin[] = R"(
layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 8, kernel: 2, stride: 2}
  - {name: ln1, type: layer_norm}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: attn, type: window_attention, heads: 2, window: 2}
  - {name: proj, type: convolution, filters: 8, kernel: 1}
  - {name: add1, type: add, inputs: [proj, patches]}
  - {name: ln2, type: layer_norm}
  - {name: qkv2, type: convolution, filters: 24, kernel: 1}
  - {name: attn2, type: window_attention, heads: 2, window: 2, shift: 1, cosine: true}
  - {name: proj2, type: convolution, filters: 8, kernel: 1}
  - {name: add2, type: add, inputs: [proj2, add1]}
  - {name: ln_grid, type: layer_norm}
  - {name: qkv3, type: convolution, filters: 24, kernel: 1}
  - {name: attn3, type: window_attention, heads: 2, window: 2, grid: true, scale: 0.35355338}
  - {name: proj3, type: convolution, filters: 8, kernel: 1}
  - {name: add3, type: add, inputs: [proj3, add2]}
  - {name: merge, type: space_to_depth}
  - {name: ln3, type: layer_norm}
  - {name: reduce, type: convolution, filters: 16, kernel: 1, bias: false}
  - {name: pool, type: global_avg_pool}
  - {name: head, type: tanh}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// Attention written out with the matrix layers (layers/matrix_layers.h):
// a ViT's tokens, Q, K and V sliced from one projection and reshaped to
// heads x d x T, S = Q^T K / sqrt(d), a softmax over the keys, O = V P^T,
// the heads merged back, a residual add, the tokens pooled and classified.
inline constexpr char kMatrices[] = R"(
layers:
  - {name: data, type: input, shape: [1, 16, 16]}
  - {name: patches, type: convolution, filters: 8, kernel: 4, stride: 4}
  - {name: tokens, type: tokens}
  - {name: pos, type: positions, length: 16}
  - {name: ln1, type: layer_norm}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: q, type: slice, inputs: [qkv], begin: 0, end: 8}
  - {name: k, type: slice, inputs: [qkv], begin: 8, end: 16}
  - {name: v, type: slice, inputs: [qkv], begin: 16, end: 24}
  - {name: qh, type: reshape, inputs: [q], shape: [2, 4, -1]}
  - {name: kh, type: reshape, inputs: [k], shape: [2, 4, -1]}
  - {name: vh, type: reshape, inputs: [v], shape: [2, 4, -1]}
  - {name: scores, type: matmul, inputs: [qh, kh], transpose_a: true, alpha: 0.5}
  - {name: probs, type: softmax, axis: w}
  - {name: heads, type: matmul, inputs: [vh, probs], transpose_b: true}
  - {name: merged, type: reshape, shape: [8, 1, -1]}
  - {name: proj, type: convolution, filters: 8, kernel: 1}
  - {name: add1, type: add, inputs: [proj, pos]}
  - {name: pool, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

struct Network {
  const char* name;
  const char* yaml;
  bool on_cuda = true;  // false: a layer's option runs on the CPU device only
};
inline constexpr Network kNetworks[] = {{"lenet", kLeNet},
                                        {"resnet", kResNet},
                                        {"inception", kInception},
                                        {"alexnet", kAlexNet},
                                        {"densenet", kDenseNet},
                                        {"blocked", kBlocked},
                                        {"sequence", kSequence},
                                        {"depth", kStochasticDepth},
                                        {"seq2seq", kSeq2Seq, false},
                                        {"gpt", kGpt, false},
                                        {"vit", kVit, false},
                                        {"swin", kSwin, false},
                                        {"matrices", kMatrices, false}};

// The networks whose every layer option runs on CUDA too.
inline std::vector<Network> CudaNetworks() {
  std::vector<Network> networks;
  for (const Network& network : kNetworks) {
    if (network.on_cuda) networks.push_back(network);
  }
  return networks;
}

// The models of models/ that mobile and modern networks brought, at a
// fraction of their width, depth and size: the same blocks and layers, in
// networks small enough to train in every mode and allocator.
struct SmallModel {
  const char* name;
  const char* file;
  const char* params;  // a YAML map of the model's parameters to override
};
inline constexpr SmallModel kSmallModels[] = {
    {"mobilenet_v2", "models/mobilenet_v2.yaml", "{width: 25, depth: 25, size: 16, classes: 5}"},
    {"mobilenet_v3_small", "models/mobilenet_v3_small.yaml",
     "{width: 25, residuals: 0, size: 16, classes: 5}"},
    {"efficientnet_b0", "models/efficientnet_b0.yaml",
     "{width: 25, depth: 25, size: 16, classes: 5}"},
    {"shufflenet_v2", "models/shufflenet_v2.yaml",
     "{c1: 8, c2: 16, c3: 16, c4: 32, c5: 32, r2: 2, r3: 1, r4: 1, size: 16, classes: 5}"},
    {"regnet_y", "models/regnet_y_400mf.yaml",
     "{stem: 8, w1: 8, w2: 16, w3: 16, w4: 24, d1: 1, d2: 2, d3: 1, d4: 1, size: 16, classes: 5}"},
    {"convnext", "models/convnext_tiny.yaml",
     "{dim: 8, d1: 1, d2: 2, d3: 1, d4: 1, size: 32, classes: 5, layer_scale: 0.5}"},
    {"unet", "models/unet.yaml", "{width: 2, size: 16, classes: 3}"},
    {"unet_bilinear", "models/unet.yaml", "{width: 2, size: 16, classes: 3, up: bilinear}"},
};

inline bool BitEqual(const std::vector<std::vector<float>>& a,
                     const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_TEST_NETWORKS_H_
