// ONNX import against PyTorch, and its errors.
//
// The fixtures in tests/testdata/onnx were written by
// tests/testdata/onnx_fixtures.py: torch.onnx.export of a ResNet-18, a
// VGG-11, an Inception-style block, a dense block, and torchvision's
// MobileNetV2, MobileNetV3, EfficientNet, ShuffleNetV2, RegNet-Y and ConvNeXt
// at a few narrow stages with a dynamic batch axis (the chains PyTorch writes
// for ReLU6, hard swish, SiLU, squeeze-and-excitation, channel shuffle and
// split, layer norm over channels and GELU), and a graph padded as
// TensorFlow's converters pad (asymmetric pads, auto_pad SAME_UPPER and
// SAME_LOWER), and character models (an embedding, a two-layer LSTM, GRU or bidirectional LSTM,
// a per-step classifier; and an LSTM over float features), each with an input batch and
// PyTorch's scores for it. Imported, they give PyTorch's scores to 1e-5 of the largest score, and
// the imported ResNet-18 and bidirectional character model train bit-identically to their
// baselines in every memory mode. Exported
// networks (sequence networks among them) pass onnx::checker and import back with bit-identical
// scores. Broken files (truncated, unsupported operators, dynamic shapes, opsets out
// of range) are errors that name the file and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "framework/graph/initializer.h"
#include "framework/graph/net.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/onnx/onnx_model.h"
#include "tests/testing/data_files.h"
#include "tests/testing/onnx_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::LoadOnnxProto;
using testing::OnnxImportError;

const char* const kFixtures[] = {"resnet18",     "vgg11",           "inception",
                                 "dense_block",  "mobilenet_v2",    "mobilenet_v3",
                                 "efficientnet", "shufflenet_v2",   "regnet_y",
                                 "convnext",     "asymmetric_pads", "char_lstm",
                                 "char_gru",     "char_bilstm",     "seq_features",
                                 "vit",          "char_attention",  "pad_to_window",
                                 "swin",         "swin_v2",         "swin_padded",
                                 "maxvit"};

// The largest error relative to the largest PyTorch score.
double MaxRelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, error = 0;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  for (size_t i = 0; i < want.size(); ++i) {
    error = std::max(error, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return error / scale;
}

TEST(OnnxImportTest, ForwardEqualsPyTorch) {
  constexpr double kTolerance = 1e-5;  // relative to the largest score
  for (const char* name : kFixtures) {
    auto fixture = testing::LoadOnnxFixture(name);
    ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
    auto imported = ImportOnnxFile(fixture->onnx);
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    auto spec = ParseNetString(imported->yaml, name);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << imported->yaml;
    auto net = Net::Build(*spec, {1, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    EXPECT_TRUE(CheckImportedShapes(*imported, **net).ok()) << name;
    auto scores = testing::ForwardScores(*spec, imported->params, fixture->input, fixture->batch);
    ASSERT_TRUE(scores.ok()) << name << ": " << scores.status().ToString();
    ASSERT_EQ(scores->size(), fixture->output.size()) << name;
    const double error = MaxRelativeError(*scores, fixture->output);
    EXPECT_LE(error, kTolerance) << name;
    std::printf("%s: %zu scores, largest error %.2e of the largest score\n", name, scores->size(),
                error);
  }
}

// Layers holding weights are named after PyTorch's modules; every weight of
// the file lands in one parameter, batch norm statistics included.
TEST(OnnxImportTest, NamesLayersAfterModulesAndKeepsEveryWeight) {
  auto fixture = testing::LoadOnnxFixture("resnet18");
  ASSERT_TRUE(fixture.ok());
  auto imported = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_THAT(imported->yaml, HasSubstr("{name: \"layer1.0.conv1\", type: convolution"));
  EXPECT_THAT(imported->yaml, HasSubstr("{name: \"layer2.0.downsample.0\""));
  EXPECT_EQ(imported->params.count("params/layer4.1.bn2/running_var"), 1u);
  EXPECT_EQ(imported->params.count("params/fc/bias"), 1u);
  // 20 convolutions, 20 batch norms of four tensors each, the classifier's two.
  EXPECT_EQ(imported->params.size(), 20u + 20u * 4u + 2u);
  auto spec = ParseNetString(imported->yaml, "resnet18");
  ASSERT_TRUE(spec.ok());
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
}

// Pads larger at one end than the other become a pad layer of the excess
// ahead of a symmetrically padded window (below any value ahead of max
// pooling, so that the padding never wins); the scores above show that the
// sum computes ONNX's window.
TEST(OnnxImportTest, AsymmetricPadsBecomeAPadLayerAndASymmetricWindow) {
  auto fixture = testing::LoadOnnxFixture("asymmetric_pads");
  ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
  auto imported = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const std::string& yaml = imported->yaml;
  // Conv pads [0, 0, 1, 1]: the excess at the bottom and right, no pad left.
  EXPECT_THAT(yaml, HasSubstr("pad: [0, 0, 1, 1], value: 0}")) << yaml;
  // MaxPool pads [0, 0, 1, 1]: padded below any value.
  EXPECT_THAT(yaml, HasSubstr("pad: [0, 0, 1, 1], value: -3.4e+38}")) << yaml;
  // Conv auto_pad SAME_LOWER over a 2x4 kernel: [1, 2, 0, 1] is a pad of
  // [1, 1, 0, 0] and a window padded [0, 1].
  EXPECT_THAT(yaml, HasSubstr("pad: [1, 1, 0, 0], value: 0}")) << yaml;
  EXPECT_THAT(yaml, HasSubstr("kernel: [2, 4], stride: [1, 1], pad: [0, 1]")) << yaml;
  // Conv pads [2, 1, 1, 0]: a window padded [1, 0] behind the excess.
  EXPECT_THAT(yaml, HasSubstr("kernel: [3, 3], stride: [1, 1], pad: [1, 0]")) << yaml;
  size_t pad_layers = 0;
  for (size_t at = yaml.find("type: pad,"); at != std::string::npos;
       at = yaml.find("type: pad,", at + 1)) {
    ++pad_layers;
  }
  EXPECT_EQ(pad_layers, 6u) << yaml;  // every window of the fixture is asymmetric
}

// ---- Sequences ----

// PyTorch's character models come back as spill's own: an embedding, one
// recurrent layer of two levels for nn.LSTM(num_layers=2) (its ONNX node per
// level joined again), the per-step nn.Linear as a 1x1 convolution, a loss
// per step; every weight under PyTorch's name (gates reordered: the scores
// above show it).
TEST(OnnxImportTest, SequenceModelsBecomeRecurrentLayersUnderPyTorchNames) {
  struct Case {
    const char* fixture;
    const char* recurrent;  // the layer's entry after its name
    int64_t directions;
  };
  const Case cases[] = {
      {"char_lstm", "type: lstm, inputs: [\"embed\"], hidden: 5, layers: 2, bidirectional: false",
       1},
      {"char_gru", "type: gru, inputs: [\"embed\"], hidden: 5, layers: 2, bidirectional: false", 1},
      {"char_bilstm", "type: lstm, inputs: [\"embed\"], hidden: 5, layers: 2, bidirectional: true",
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fixture);
    auto fixture = testing::LoadOnnxFixture(c.fixture);
    ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
    auto imported = ImportOnnxFile(fixture->onnx);
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    const std::string& yaml = imported->yaml;
    EXPECT_THAT(yaml,
                HasSubstr("{name: \"input\", type: input, shape: [1, 1, 7], labels: pixels}"));
    EXPECT_THAT(yaml, HasSubstr("{name: \"embed\", type: embedding, inputs: [\"input\"], " +
                                std::string("vocabulary: 11, size: 6}")));
    EXPECT_THAT(yaml, HasSubstr("{name: \"lstm\", " + std::string(c.recurrent)));
    EXPECT_THAT(yaml, HasSubstr("{name: \"fc\", type: convolution, inputs: [\"lstm\"], filters: " +
                                std::string("11, kernel: 1, bias: true}")));
    const int64_t gates = std::string(c.fixture) == "char_gru" ? 3 : 4;
    for (const char* level : {"_l0", "_l1"}) {
      for (const char* direction : {"", "_reverse"}) {
        if (*direction && c.directions == 1) continue;
        for (const char* p : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
          const std::string key = std::string("params/lstm/") + p + level + direction;
          ASSERT_EQ(imported->params.count(key), 1u) << key;
          EXPECT_EQ(imported->params.at(key).shape[p[0] == 'w' ? 0 : 1], gates * 5) << key;
        }
      }
    }
    // The table, the recurrent layer's, the classifier's weight and bias.
    EXPECT_EQ(imported->params.size(), 1u + 2 * c.directions * 4 + 2);
  }
  auto fixture = testing::LoadOnnxFixture("seq_features");
  ASSERT_TRUE(fixture.ok());
  auto imported = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  EXPECT_THAT(imported->yaml, HasSubstr("shape: [4, 1, 7], labels: pixels}"));
  EXPECT_THAT(imported->yaml, HasSubstr("{name: \"lstm\", type: lstm, inputs: [\"input\"], " +
                                        std::string("hidden: 5, layers: 1")));
}

// The resnet18 fixture imported, and the network it became.
void ImportResNet18(ImportedNet* imported, NetSpec* spec) {
  auto fixture = testing::LoadOnnxFixture("resnet18");
  ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
  auto net = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto parsed = ParseNetString(net->yaml, "resnet18");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  *imported = std::move(*net);
  *spec = std::move(*parsed);
}

// Two steps at batch 2 in every memory mode, each at the smallest budget
// that runs and a roomy one: the losses and weights of the baseline, bit for
// bit, starting from the imported weights.
TEST(OnnxImportTest, ImportedResNet18TrainsBitIdenticallyInEveryMode) {
  ImportedNet imported;
  NetSpec spec;
  ASSERT_NO_FATAL_FAILURE(ImportResNet18(&imported, &spec));
  testing::ExpectEveryModeBitIdentical(spec, imported.params);
}

// The imported bidirectional character model trains as the ResNet-18 does:
// the baseline's losses and weights in every memory mode.
TEST(OnnxImportTest, ImportedCharModelTrainsBitIdenticallyInEveryMode) {
  auto fixture = testing::LoadOnnxFixture("char_bilstm");
  ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
  auto imported = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto spec = ParseNetString(imported->yaml, "char_bilstm");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  testing::ExpectEveryModeBitIdentical(*spec, imported->params);
}

// ---- Export ----

// Every layer type that exports, with batch norm statistics off their
// initial values.
constexpr char kEveryLayer[] = R"(
name: every_layer
layers:
  - {name: data, type: input, shape: [3, 12, 12]}
  - {name: conv1, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: bn1, type: batch_norm, eps: 1e-3, momentum: 0.2}
  - {name: relu1, type: relu}
  - {name: lrn1, type: lrn, size: 3, alpha: 0.001, beta: 0.75, k: 2}
  - {name: grouped, type: convolution, filters: 8, kernel: 3, pad: 2, dilation: 2, groups: 4}
  - {name: leaky, type: relu, negative_slope: 0.1}
  - {name: side, type: avg_pool, kernel: 3, stride: 1, pad: 1, count_include_pad: false, inputs: [lrn1]}
  - {name: sum, type: add, inputs: [leaky, side]}
  - {name: cat, type: concat, inputs: [sum, lrn1]}
  - {name: pool, type: max_pool, kernel: 3, stride: 2, ceil_mode: true}
  - {name: avg, type: avg_pool, kernel: [2, 3], stride: 1, pad: [1, 1]}
  - {name: fc1, type: fully_connected, outputs: 12}
  - {name: bn2, type: batch_norm}
  - {name: drop, type: dropout, ratio: 0.3}
  - {name: fc2, type: fully_connected, outputs: 5, bias: false}
  - {name: loss, type: softmax_loss}
)";

// The layers mobile and modern networks and encoder-decoders brought, with
// their options: activations, per-channel products and sums, channel
// shuffles and slices, layer norm over channels and over features, scales,
// upsampling of both modes, transposed convolution, padding, and a sum of
// four inputs (ONNX's Add takes two).
constexpr char kEveryNewLayer[] = R"(
name: every_new_layer
layers:
  - {name: data, type: input, shape: [4, 6, 6]}
  - {name: conv, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: relu6, type: relu6}
  - {name: clip, type: clip, min: -0.5, max: 2.5, inputs: [conv]}
  - {name: hsig, type: hard_sigmoid, alpha: 0.2, beta: 0.4}
  - {name: hswish, type: hard_swish, inputs: [conv]}
  - {name: silu, type: silu}
  - {name: gelu, type: gelu}
  - {name: pool, type: global_avg_pool, inputs: [relu6]}
  - {name: gate, type: sigmoid}
  - {name: excite, type: multiply, inputs: [gelu, gate]}
  - {name: shift, type: broadcast_add, inputs: [excite, pool]}
  - {name: both, type: add, inputs: [shift, hsig]}
  - {name: shuffle, type: channel_shuffle, groups: 4}
  - {name: left, type: slice, begin: 0, end: 3}
  - {name: right, type: slice, begin: 3, end: 8, inputs: [shuffle]}
  - {name: norm, type: layer_norm, eps: 1e-6, inputs: [right]}
  - {name: ls, type: scale, value: 0.5}
  - {name: affine, type: scale, bias: true}
  - {name: join, type: concat, inputs: [left, affine]}
  - {name: near, type: upsample, factor: [3, 2]}
  - {name: bilinear, type: upsample, factor: [3, 2], mode: bilinear, inputs: [join]}
  - {name: corners, type: upsample, size: [18, 12], mode: bilinear, align_corners: true, inputs: [join]}
  - {name: up, type: transposed_convolution, filters: 8, kernel: 3, stride: [3, 2], pad: 1,
     output_pad: [2, 1], groups: 2, inputs: [join]}
  - {name: sum, type: add, inputs: [near, bilinear, corners, up]}
  - {name: pad, type: pad, pad: [1, 0, 2, 3], value: -0.25}
  - {name: zeros, type: pad, pad: [1, 1]}
  - {name: smooth, type: avg_pool, kernel: 3, stride: 2}
  - {name: fc, type: fully_connected, outputs: 6}
  - {name: fc_norm, type: layer_norm}
  - {name: fc_scale, type: scale, bias: true}
  - {name: loss, type: softmax_loss}
)";

// Exports (checked by onnx::checker inside ExportOnnx), serializes, parses
// and imports again: the same scores, bit for bit, of `input` (`batch`
// samples; three spread over [-1, 1) when none is given). `back`, when
// given, receives the network imported back; `added` parameters come back
// besides the network's (constants ONNX carries as initializers).
void ExpectRoundTripBitIdentical(const NetSpec& spec, const NpzArchive& params,
                                 std::vector<float> input = {}, int64_t batch = 3,
                                 ImportedNet* back = nullptr, size_t added = 0) {
  auto net = Net::Build(spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto model = ExportOnnx(**net, params, "params.npz");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_TRUE(CheckOnnx(*model).ok());
  auto graph = ParseOnnxModel(model->SerializeAsString(), "exported.onnx");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto imported = ImportOnnx(**graph);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto spec2 = ParseNetString(imported->yaml, "exported.onnx");
  ASSERT_TRUE(spec2.ok()) << spec2.status().ToString() << "\n" << imported->yaml;
  if (input.empty()) input = testing::SomeImages(batch * (*net)->input_shape().sample_size());
  auto before = testing::ForwardScores(spec, params, input, batch);
  auto after = testing::ForwardScores(*spec2, imported->params, input, batch);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(before->size(), after->size());
  EXPECT_EQ(std::memcmp(before->data(), after->data(), before->size() * sizeof(float)), 0);
  EXPECT_EQ(imported->params.size(), params.size() + added);
  if (back != nullptr) *back = std::move(*imported);
}

// `spec` built at batch 1 with seeded weights, round-tripped.
void ExpectSeededRoundTrip(const StatusOr<NetSpec>& spec, size_t added = 0) {
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  ExpectRoundTripBitIdentical(*spec, testing::SeededParams(**net), {}, 3, nullptr, added);
}

TEST(OnnxExportTest, EveryLayerTypeRoundTripsBitIdentically) {
  ExpectSeededRoundTrip(ParseNetString(kEveryLayer, "every_layer.yaml"));
}

TEST(OnnxExportTest, EveryNewLayerTypeRoundTripsBitIdentically) {
  ExpectSeededRoundTrip(ParseNetString(kEveryNewLayer, "every_new_layer.yaml"));
}

// Stochastic depth exports the inference it computes: each branch scaled by
// its survival (a Mul before the Add), which comes back as a scale layer
// with its factor - one per unit of the network (three).
TEST(OnnxExportTest, StochasticDepthExportsItsScaledBranches) {
  ExpectSeededRoundTrip(ParseNetString(testing::kStochasticDepth, "depth.yaml"), 3);
}

// The small versions of models/ (MobileNetV2 and V3, EfficientNet,
// ShuffleNetV2, RegNet-Y, ConvNeXt, U-Net with transposed convolutions and
// with bilinear upsampling), weights drawn as training would start.
TEST(OnnxExportTest, SmallModelsRoundTripBitIdentically) {
  for (const testing::SmallModel& model : testing::kSmallModels) {
    SCOPED_TRACE(model.name);
    ParamOverrides overrides;
    for (const auto& item : YAML::Load(model.params)) overrides[item.first.Scalar()] = item.second;
    ExpectSeededRoundTrip(LoadNetFile(model.file, overrides));
  }
}

TEST(OnnxExportTest, ImportedResNet18RoundTripsBitIdentically) {
  ImportedNet imported;
  NetSpec spec;
  ASSERT_NO_FATAL_FAILURE(ImportResNet18(&imported, &spec));
  ExpectRoundTripBitIdentical(spec, imported.params);
}

// The layers of `a` and `b` have the same names, types, inputs, output
// shapes and parameters (an entry may spell its options differently).
void ExpectSameLayers(const NetSpec& a, const NetSpec& b) {
  auto net_a = Net::Build(a, {1, DeviceType::kCpu});
  auto net_b = Net::Build(b, {1, DeviceType::kCpu});
  ASSERT_TRUE(net_a.ok() && net_b.ok());
  const Schedule &sa = (*net_a)->schedule(), &sb = (*net_b)->schedule();
  ASSERT_EQ((*net_a)->num_layers(), (*net_b)->num_layers());
  auto names = [](const Schedule& s, const std::vector<TensorId>& ids) {
    std::vector<std::string> out;
    for (TensorId t : ids) out.push_back(s.tensors[t].name + " " + s.tensors[t].shape.ToString());
    return out;
  };
  for (int id = 0; id < (*net_a)->num_layers(); ++id) {
    SCOPED_TRACE((*net_a)->layer(id).name());
    EXPECT_EQ((*net_a)->layer(id).name(), (*net_b)->layer(id).name());
    EXPECT_EQ((*net_a)->layer(id).type(), (*net_b)->layer(id).type());
    EXPECT_EQ(names(sa, sa.layers[id].inputs), names(sb, sb.layers[id].inputs));
    EXPECT_EQ(names(sa, sa.layers[id].outputs), names(sb, sb.layers[id].outputs));
    EXPECT_EQ(names(sa, sa.layers[id].params), names(sb, sb.layers[id].params));
  }
}

// PyTorch's character models, imported, export as PyTorch wrote them
// (Gather, LSTM or GRU per level, their views) and come back as the same
// network, layer for layer, with the same scores bit for bit.
TEST(OnnxExportTest, ImportedSequenceModelsRoundTripAsTheSameNetwork) {
  for (const char* name : {"char_lstm", "char_gru", "char_bilstm", "seq_features"}) {
    SCOPED_TRACE(name);
    auto fixture = testing::LoadOnnxFixture(name);
    ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
    auto imported = ImportOnnxFile(fixture->onnx);
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    auto spec = ParseNetString(imported->yaml, name);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    ImportedNet back;
    ExpectRoundTripBitIdentical(*spec, imported->params, fixture->input, fixture->batch, &back);
    auto spec2 = ParseNetString(back.yaml, name);
    ASSERT_TRUE(spec2.ok()) << spec2.status().ToString();
    ExpectSameLayers(*spec, *spec2);
  }
}

// Every sequence layer with its options: an embedding of the input's ids,
// recurrent layers of one and two levels, one-way and bidirectional, with
// and without biases, GRU and LSTM; two recurrent layers that read one
// another stay two layers; elementwise layers, a concatenation and a
// per-step classifier between them, named `scores` as char-rnn's is (the
// graph's output then). Ids are whole numbers in the vocabulary.
constexpr char kEverySequenceLayer[] = R"(
name: every_sequence_layer
layers:
  - {name: ids, type: input, shape: [1, 1, 9], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 13, size: 6}
  - {name: lstm, type: lstm, hidden: 5, layers: 2, dropout: 0.25}
  - {name: gru, type: gru, hidden: 4, layers: 2, bidirectional: true}
  - {name: act, type: relu}
  - {name: bilstm, type: lstm, hidden: 3, bidirectional: true, bias: false}
  - {name: onegru, type: gru, hidden: 3, bias: false, inputs: [act]}
  - {name: again, type: gru, hidden: 3, bias: false}
  - {name: both, type: concat, inputs: [bilstm, again]}
  - {name: scores, type: convolution, filters: 13, kernel: 1}
  - {name: loss, type: softmax_loss}
)";

// A sequence of float features (N x C x 1 x T) through a GRU and an LSTM;
// a layer named `scores` that is not the scores (the output moves aside).
constexpr char kFeatureSequence[] = R"(
name: feature_sequence
layers:
  - {name: x, type: input, shape: [4, 1, 9], labels: pixels}
  - {name: scores, type: gru, hidden: 6, bidirectional: true}
  - {name: dec, type: lstm, hidden: 6, layers: 3}
  - {name: fc, type: convolution, filters: 3, kernel: 1}
  - {name: loss, type: softmax_loss}
)";

TEST(OnnxExportTest, EverySequenceLayerRoundTripsBitIdentically) {
  constexpr int64_t kBatch = 3, kSteps = 9, kVocabulary = 13;
  auto spec = ParseNetString(kEverySequenceLayer, "every_sequence_layer.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  const NpzArchive params = testing::SeededParams(**net);
  std::vector<float> ids(kBatch * kSteps);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 5 + 3) % kVocabulary);
  ImportedNet back;
  ExpectRoundTripBitIdentical(*spec, params, ids, kBatch, &back);
  // The ids are the graph's int64 (N, T) input, as nn.Embedding takes them;
  // each level of a recurrent layer is one ONNX node.
  auto model = ExportOnnx(**net, params, "params.npz");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const auto& input = model->graph().input(0).type().tensor_type();
  EXPECT_EQ(input.elem_type(), onnx::TensorProto::INT64);
  ASSERT_EQ(input.shape().dim_size(), 2);
  EXPECT_EQ(input.shape().dim(1).dim_value(), kSteps);
  std::map<std::string, int> ops;
  for (const auto& node : model->graph().node()) ++ops[node.op_type()];
  EXPECT_EQ(ops["Gather"], 1);
  EXPECT_EQ(ops["LSTM"], 3);
  EXPECT_EQ(ops["GRU"], 4);
  // Imported back: the same layers, levels joined again, separate layers kept apart.
  EXPECT_THAT(back.yaml, HasSubstr("{name: \"lstm\", type: lstm, inputs: [\"embed\"], hidden: 5, " +
                                   std::string("layers: 2, bidirectional: false, bias: true}")));
  EXPECT_THAT(back.yaml, HasSubstr("{name: \"gru\", type: gru, inputs: [\"lstm\"], hidden: 4, " +
                                   std::string("layers: 2, bidirectional: true, bias: true}")));
  EXPECT_THAT(back.yaml,
              HasSubstr("{name: \"again\", type: gru, inputs: [\"onegru\"], hidden: " +
                        std::string("3, layers: 1, bidirectional: false, bias: false}")));
  EXPECT_THAT(back.yaml,
              HasSubstr("{name: \"ids\", type: input, shape: [1, 1, 9], labels: pixels}"));
}

TEST(OnnxExportTest, FeatureSequenceRoundTripsBitIdentically) {
  ExpectSeededRoundTrip(ParseNetString(kFeatureSequence, "feature_sequence.yaml"));
}

// The memory tests' small vision transformer (patches read as tokens, a
// class token, a position table, attention of two heads, the class token
// classified), GPT (causal attention, naive and tiled) and Swin (window
// attention, shifted cosine window attention, patch merging): exported with
// standard operators (MatMul, Softmax, Reshape, Transpose, Gather, Expand;
// Swin's rolls as Slice and Concat, its bias and mask as constants), they
// come back as the same layers with the same scores bit for bit.
TEST(OnnxExportTest, TransformersRoundTripAsTheSameNetwork) {
  for (const char* text : {testing::kVit, testing::kGpt, testing::kSwin}) {
    const bool gpt = text == testing::kGpt;
    SCOPED_TRACE(gpt ? "gpt" : text == testing::kVit ? "vit" : "swin");
    auto spec = ParseNetString(text, "transformer.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto net = Net::Build(*spec, {1, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    const NpzArchive params = testing::SeededParams(**net);
    std::vector<float> ids;  // the GPT's, in its vocabulary of 7
    for (int i = 0; gpt && i < 3 * 6; ++i) ids.push_back(static_cast<float>((i * 5 + 2) % 7));
    ImportedNet back;
    ExpectRoundTripBitIdentical(*spec, params, ids, 3, &back);
    auto spec2 = ParseNetString(back.yaml, "back.yaml");
    ASSERT_TRUE(spec2.ok()) << spec2.status().ToString() << "\n" << back.yaml;
    ExpectSameLayers(*spec, *spec2);
  }
}

// An embedding that does not read the input's ids has no ONNX form here.
TEST(OnnxExportTest, EmbeddingsOfComputedValuesAreNamed) {
  auto spec = ParseNetString(R"(
name: computed_ids
layers:
  - {name: ids, type: input, shape: [1, 1, 5], labels: pixels}
  - {name: shift, type: relu}
  - {name: embed, type: embedding, vocabulary: 7, size: 3}
  - {name: fc, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss}
)",
                             "computed_ids.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto model = ExportOnnx(**net, testing::SeededParams(**net), "params.npz");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().ToString(),
              HasSubstr("layer 'embed' (embedding) reads 'shift', not the network's input"));
}

// Initial states from an input and final states as an output are not
// exported: the error names the layer and the key.
TEST(OnnxExportTest, RecurrentStatesAsValuesAreNamed) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  const Case cases[] = {
      {"  - {name: enc, type: lstm, hidden: 4, final: true}\n"
       "  - {name: dec, type: lstm, inputs: [embed, enc:1], hidden: 4, initial: input}\n",
       "layer 'enc': final: true (the final states as a second output) has no ONNX export: each "
       "LSTM node is written with its output Y only, without Y_h and Y_c"},
      {"  - {name: states, type: global_avg_pool}\n"
       "  - {name: dec, type: gru, inputs: [embed, states], hidden: 4, initial: input}\n",
       "layer 'dec': initial: input (initial states read from a second input) has no ONNX export: "
       "each GRU node is written without initial_h (zero states)"},
  };
  for (const Case& c : cases) {
    const std::string yaml = std::string(R"(
name: seq2seq
layers:
  - {name: ids, type: input, shape: [1, 1, 4], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 7, size: 4}
)") + c.yaml + R"(  - {name: fc, type: convolution, filters: 7, kernel: 1}
  - {name: loss, type: softmax_loss}
)";
    auto parsed = ParseNetString(yaml, "seq2seq.yaml");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto net = Net::Build(*parsed, {1, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    auto model = ExportOnnx(**net, testing::SeededParams(**net), "params.npz");
    ASSERT_FALSE(model.ok());
    EXPECT_THAT(model.status().ToString(), HasSubstr(c.error));
  }
}

TEST(OnnxExportTest, MissingParametersAreNamed) {
  auto spec = ParseNetString(kEveryLayer, "every_layer.yaml");
  ASSERT_TRUE(spec.ok());
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  NpzArchive params = testing::SeededParams(**net);
  params.erase("params/bn2/running_var");
  auto model = ExportOnnx(**net, params, "ckpt.npz");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().ToString(),
              HasSubstr("checkpoint 'ckpt.npz' has no 'params/bn2/running_var'"));
}

// ---- Errors ----

TEST(OnnxErrorsTest, TruncatedFile) {
  const std::string bytes = LoadOnnxProto("vgg11").SerializeAsString();
  for (size_t keep : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    auto graph = ParseOnnxModel(bytes.substr(0, keep), "net.onnx");
    ASSERT_FALSE(graph.ok()) << keep;
    EXPECT_THAT(graph.status().ToString(), HasSubstr("net.onnx: not an ONNX model")) << keep;
  }
}

TEST(OnnxErrorsTest, UnsupportedOperatorsAreListedWithTheirNodes) {
  onnx::ModelProto model = LoadOnnxProto("vgg11");
  int changed = 0;
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Relu") continue;
    node.set_op_type(changed == 0 ? "Softplus" : "Softsign");
    if (++changed == 2) break;
  }
  const std::string error = OnnxImportError(model);
  EXPECT_THAT(error, HasSubstr("net.onnx: unsupported operators: Softplus, Softsign"));
  EXPECT_THAT(error, HasSubstr("'/features/features.1/Relu' (Softplus)"));
  EXPECT_THAT(error, HasSubstr("'/features/features.4/Relu' (Softsign)"));
  EXPECT_THAT(error, HasSubstr("spill imports AveragePool"));
}

// A Constant node of `values` (float, or int64 when `ints`) shaped `dims`.
void AddConstant(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                 const std::vector<double>& values, bool ints) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Constant");
  n->add_output(name);
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(ints ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (double v : values) {
    if (ints) t->add_int64_data(static_cast<int64_t>(v));
    if (!ints) t->add_float_data(static_cast<float>(v));
  }
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs, const std::string& output) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("/" + output + "/" + op);
  for (const std::string& in : inputs) n->add_input(in);
  n->add_output(output);
  return n;
}

// Data computed from constants alone - Swin's way of writing its mask -
// becomes one constant before the import; a weight's Gather stays computed.
TEST(OnnxModelTest, ConstantDataFoldsAndWeightsStayWeights) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("folding");
  AddConstant(g, "shape", {2}, {3, 3}, true);
  AddNode(g, "ConstantOfShape", {"shape"}, "zeros");  // float zeros by default
  AddConstant(g, "where", {1, 2}, {1, 2}, true);
  AddConstant(g, "seven", {1}, {7}, false);
  AddNode(g, "ScatterND", {"zeros", "where", "seven"}, "scattered");
  AddConstant(g, "zero", {}, {0}, false);
  AddNode(g, "Equal", {"scattered", "zero"}, "equal");
  AddNode(g, "Not", {"equal"}, "differs");
  AddConstant(g, "masked", {}, {-100}, false);
  AddNode(g, "Where", {"differs", "masked", "scattered"}, "mask");
  AddConstant(g, "start", {}, {0}, true);
  AddConstant(g, "limit", {}, {3}, true);
  AddConstant(g, "step", {}, {1}, true);
  AddNode(g, "Range", {"start", "limit", "step"}, "range");
  onnx::AttributeProto* to = AddNode(g, "Cast", {"range"}, "ramp")->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  AddNode(g, "Add", {"mask", "ramp"}, "bias");  // (3, 3) + (3,)
  onnx::TensorProto* w = g->add_initializer();  // a weight: never folded
  w->set_name("table");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(3);
  for (int i = 0; i < 12; ++i) w->add_float_data(0.5f * i);
  AddConstant(g, "rows", {3}, {3, 0, 1}, true);
  AddNode(g, "Gather", {"table", "rows"}, "picked");
  AddNode(g, "Add", {"x", "bias"}, "shifted");
  AddNode(g, "Add", {"shifted", "picked"}, "y");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* tensor = v->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    tensor->mutable_shape()->add_dim()->set_dim_param("batch");
    tensor->mutable_shape()->add_dim()->set_dim_value(3);
    tensor->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto parsed = ParseOnnxModel(model.SerializeAsString(), "folding.onnx");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const onnx::TensorProto* bias = (*parsed)->Constant("bias");
  ASSERT_NE(bias, nullptr);
  auto values = OnnxFloats(*bias, "bias");
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, (std::vector<float>{0, 1, 2, 0, 1, -98, 0, 1, 2}));
  std::multiset<std::string> ops;
  for (const auto& n : (*parsed)->graph().node()) ops.insert(n.op_type());
  EXPECT_EQ(ops.count("ScatterND") + ops.count("Range") + ops.count("Not") + ops.count("Where"),
            0u);
  EXPECT_EQ(ops.count("Gather"), 1u);  // the weight's rows stay a computation
  EXPECT_EQ((*parsed)->Constant("picked"), nullptr);
}

// The scalar float constants of `model` equal to `value` (Constant nodes).
std::vector<onnx::TensorProto*> ScalarConstants(onnx::ModelProto* model, float value) {
  std::vector<onnx::TensorProto*> found;
  for (auto& n : *model->mutable_graph()->mutable_node()) {
    if (n.op_type() != "Constant" || n.attribute_size() != 1) continue;
    onnx::TensorProto* t = n.mutable_attribute(0)->mutable_t();
    auto v = OnnxFloats(*t, "constant");
    if (t->data_type() == onnx::TensorProto::FLOAT && v.ok() && v->size() == 1 &&
        (*v)[0] == value) {
      found.push_back(t);
    }
  }
  return found;
}

void SetFloats(onnx::TensorProto* t, const std::vector<float>& values) {
  t->clear_raw_data();
  t->clear_float_data();
  for (float v : values) t->add_float_data(v);
}

// Adds 0.25 to one entry of the model's first (1, heads, 4, 4) constant,
// the relative position bias of windows of 2 x 2 that PyTorch folds: no
// longer equal wherever the offset is. False when there is none.
bool ChangeOneScoreBias(onnx::ModelProto* model) {
  for (auto& t : *model->mutable_graph()->mutable_initializer()) {
    if (t.dims_size() != 4 || t.dims(0) != 1 || t.dims(2) != 4 || t.dims(3) != 4) continue;
    auto values = OnnxFloats(t, "bias");
    if (!values.ok()) return false;
    (*values)[1] += 0.25f;
    SetFloats(&t, *values);
    return true;
  }
  return false;
}

// Shifted-window attention that spill's window_attention does not compute
// is an error naming the Softmax and what differs: a bias that is not a
// relative position bias, another mask. Another scale than d^-1/2 is the
// layer's `scale`.
TEST(OnnxErrorsTest, WindowAttentionSpillDoesNotComputeIsNamed) {
  onnx::ModelProto biased = LoadOnnxProto("swin");  // one score's bias changed
  ASSERT_TRUE(ChangeOneScoreBias(&biased));
  const std::string error = OnnxImportError(biased);
  EXPECT_THAT(error, HasSubstr("(Softmax): spill imports Softmax only within attention"));
  EXPECT_THAT(error, HasSubstr("a shifted-window attention (Swin's): the bias added to the "
                               "scores is not a relative position bias"));

  onnx::ModelProto masked = LoadOnnxProto("swin");  // -100 across regions becomes -50
  std::vector<onnx::TensorProto*> fills = ScalarConstants(&masked, -100.0f);
  ASSERT_FALSE(fills.empty());
  for (onnx::TensorProto* t : fills) SetFloats(t, {-50.0f});
  EXPECT_THAT(OnnxImportError(masked),
              HasSubstr("is not the one of windows shifted by 1 (0 within a region, -100 "
                        "across)"));

  onnx::ModelProto scaled = LoadOnnxProto("swin");  // d^-0.5 becomes d^-0.25
  std::vector<onnx::TensorProto*> exponents = ScalarConstants(&scaled, -0.5f);
  ASSERT_FALSE(exponents.empty());
  for (onnx::TensorProto* t : exponents) SetFloats(t, {-0.25f});
  auto graph = ParseOnnxModel(scaled.SerializeAsString(), "net.onnx");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto net = ImportOnnx(**graph);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  EXPECT_THAT(net->yaml, HasSubstr("inputs: [\"features.1.0.attn.qkv\"], heads: 2, window: 2, "
                                   "shift: 0, scale: 0.70710677}"));
}

// MaxViT's attention (in its partitioned view, products by Einsum) that
// spill's window_attention does not compute is an error naming the
// Softmax and what differs.
TEST(OnnxErrorsTest, PartitionAttentionSpillDoesNotComputeIsNamed) {
  onnx::ModelProto biased = LoadOnnxProto("maxvit");  // one score's bias changed
  ASSERT_TRUE(ChangeOneScoreBias(&biased));
  EXPECT_THAT(OnnxImportError(biased),
              AllOf(HasSubstr("(Softmax): spill imports Softmax only within attention"),
                    HasSubstr("an attention in partitions (MaxViT's): the bias added to the "
                              "scores is not a relative position bias")));

  onnx::ModelProto transposed = LoadOnnxProto("maxvit");  // P^T V in place of P V
  int einsums = 0;
  for (auto& n : *transposed.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Einsum" || ++einsums != 2) continue;  // the first attention's P V
    for (auto& a : *n.mutable_attribute()) {
      if (a.name() == "equation") a.set_s("BGHIJ,BGHID->BGHJD");
    }
  }
  ASSERT_GE(einsums, 2);
  EXPECT_THAT(OnnxImportError(transposed),
              HasSubstr("(MaxViT's): the probabilities are read by other than one Einsum by the "
                        "values"));
}

// Attention that spill's layer does not compute is an error naming the
// Softmax and what differs: another scale, a mask that is not causal, a
// Softmax that is not between two products.
TEST(OnnxErrorsTest, AttentionSpillDoesNotComputeIsNamed) {
  onnx::ModelProto scaled = LoadOnnxProto("vit");  // q / sqrt(d) becomes q / 3
  std::set<std::string> divisors;
  for (const auto& node : scaled.graph().node()) {
    if (node.op_type() == "Div") divisors.insert(node.input(1));
  }
  bool found = false;
  for (auto& n : *scaled.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Constant" || !divisors.count(n.output(0))) continue;
    onnx::TensorProto* t = n.mutable_attribute(0)->mutable_t();
    auto value = OnnxFloats(*t, "divisor");
    if (t->data_type() != onnx::TensorProto::FLOAT || !value.ok() || value->size() != 1 ||
        std::abs((*value)[0] - std::sqrt(8.0f)) > 1e-5f) {
      continue;
    }
    t->clear_raw_data();
    t->add_float_data(3.0f);
    found = true;
    break;
  }
  ASSERT_TRUE(found);
  const std::string scale = OnnxImportError(scaled);
  EXPECT_THAT(scale, HasSubstr("(Softmax): spill imports Softmax only within attention"));
  EXPECT_THAT(scale, HasSubstr("where spill's attention scales by 1 / sqrt(8)"));

  onnx::ModelProto masked = LoadOnnxProto("char_attention");  // a mask hiding the diagonal
  onnx::TensorProto* mask = nullptr;
  for (auto& t : *masked.mutable_graph()->mutable_initializer()) {
    if (t.dims_size() == 3 && t.dims(1) == 7 && t.dims(2) == 7) mask = &t;
  }
  ASSERT_NE(mask, nullptr);
  auto values = OnnxFloats(*mask, "mask");
  ASSERT_TRUE(values.ok());
  (*values)[0] = -std::numeric_limits<float>::infinity();
  mask->clear_raw_data();
  mask->clear_float_data();
  for (float v : *values) mask->add_float_data(v);
  EXPECT_THAT(OnnxImportError(masked), HasSubstr("other than a constant causal mask"));

  // Scores through a Softmax, then a ReLU: a Softmax that is neither
  // attention's nor the graph's output.
  onnx::ModelProto plain = LoadOnnxProto("vgg11");
  onnx::NodeProto* softmax = plain.mutable_graph()->add_node();
  softmax->set_op_type("Softmax");
  softmax->set_name("/probabilities/Softmax");
  softmax->add_input(plain.graph().output(0).name());
  softmax->add_output("probabilities");
  onnx::NodeProto* relu = plain.mutable_graph()->add_node();
  relu->set_op_type("Relu");
  relu->add_input("probabilities");
  relu->add_output("rectified");
  plain.mutable_graph()->mutable_output(0)->set_name("rectified");
  const std::string lone = OnnxImportError(plain);
  EXPECT_THAT(lone, HasSubstr("'/probabilities/Softmax' (Softmax)"));
  EXPECT_THAT(lone, HasSubstr("its input is not a MatMul of two computed values"));
}

// A graph whose output is probabilities (a softmax or log-softmax over the
// classes, as deployed classifiers often end) imports as the scores before
// it: spill's loss applies that softmax, and the probabilities computed from
// spill's scores are PyTorch's - per example (mnist_log_softmax, opset 11)
// and per pixel (pixel_softmax, opset 13).
TEST(OnnxImportTest, AnOutputSoftmaxIsTheLosss) {
  constexpr double kTolerance = 1e-5;
  constexpr size_t kClasses = 10;  // onnx_fixtures.py's CLASSES
  for (const char* name : {"mnist_log_softmax", "pixel_softmax"}) {
    const bool log = std::string(name) == "mnist_log_softmax";
    auto fixture = testing::LoadOnnxFixture(name);
    ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
    auto imported = ImportOnnxFile(fixture->onnx);
    ASSERT_TRUE(imported.ok()) << name << ": " << imported.status().ToString();
    EXPECT_THAT(imported->yaml,
                HasSubstr(std::string("Its last node, ") + (log ? "LogSoftmax" : "Softmax") +
                          ", is the loss's softmax"));
    auto spec = ParseNetString(imported->yaml, name);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString() << "\n" << imported->yaml;
    auto scores = testing::ForwardScores(*spec, imported->params, fixture->input, fixture->batch);
    ASSERT_TRUE(scores.ok()) << name << ": " << scores.status().ToString();
    ASSERT_EQ(scores->size(), fixture->output.size()) << name;
    // Classes are the second axis of N x C x (H x W) in both.
    const size_t batch = static_cast<size_t>(fixture->batch);
    const size_t plane = scores->size() / batch / kClasses;
    std::vector<float> probabilities(scores->size());
    for (size_t n = 0; n < batch; ++n) {
      for (size_t p = 0; p < plane; ++p) {
        auto at = [&](size_t c) { return (n * kClasses + c) * plane + p; };
        double top = -std::numeric_limits<double>::infinity(), sum = 0;
        for (size_t c = 0; c < kClasses; ++c) top = std::max(top, double{(*scores)[at(c)]});
        for (size_t c = 0; c < kClasses; ++c) sum += std::exp((*scores)[at(c)] - top);
        for (size_t c = 0; c < kClasses; ++c) {
          const double shifted = (*scores)[at(c)] - top;
          probabilities[at(c)] =
              static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
        }
      }
    }
    EXPECT_LE(MaxRelativeError(probabilities, fixture->output), kTolerance) << name;
  }
}

// Over any other axis it is an error naming the node and the axis.
TEST(OnnxErrorsTest, AnOutputSoftmaxOverAnotherAxisIsNamed) {
  onnx::ModelProto model = LoadOnnxProto("pixel_softmax");
  for (auto& n : *model.mutable_graph()->mutable_node()) {
    if (n.op_type() != "Softmax") continue;
    n.clear_attribute();
    onnx::AttributeProto* axis = n.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(2);
  }
  const std::string error = OnnxImportError(model);
  EXPECT_THAT(error, HasSubstr("(Softmax): is taken over axis 2"));
  EXPECT_THAT(error, HasSubstr("over the classes alone, axis 1"));
}

TEST(OnnxErrorsTest, DynamicImageSize) {
  onnx::ModelProto model = LoadOnnxProto("vgg11");
  auto* dim = model.mutable_graph()
                  ->mutable_input(0)
                  ->mutable_type()
                  ->mutable_tensor_type()
                  ->mutable_shape()
                  ->mutable_dim(2);
  dim->set_dim_param("height");
  EXPECT_THAT(OnnxImportError(model), HasSubstr("input 'input' has a dynamic dimension (axis 2)"));
}

TEST(OnnxErrorsTest, DynamicBatchIsFine) {
  onnx::ModelProto model = LoadOnnxProto("resnet18");
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  EXPECT_EQ(OnnxImportError(model), "");
}

TEST(OnnxErrorsTest, OpsetOutOfRange) {
  for (int version : {9, 18}) {
    onnx::ModelProto model = LoadOnnxProto("resnet18");
    model.mutable_opset_import(0)->set_version(version);
    EXPECT_THAT(OnnxImportError(model), HasSubstr("net.onnx: opset " + std::to_string(version) +
                                                  "; spill reads opsets 11 to 17"));
  }
}

TEST(OnnxErrorsTest, LayerFeaturesSpillLacksAreNamed) {
  onnx::ModelProto model = LoadOnnxProto("vgg11");
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "MaxPool") continue;
    auto* order = node.add_attribute();
    order->set_name("storage_order");
    order->set_type(onnx::AttributeProto::INT);
    order->set_i(1);  // column-major indices
    break;
  }
  EXPECT_THAT(OnnxImportError(model), HasSubstr("(MaxPool): storage_order must be 0"));
}

// A ceil-mode window that starts in the right padding: ONNX keeps it (4x4),
// spill and PyTorch drop it (3x3). The import is refused, naming the layer,
// instead of a classifier whose imported weight no longer fits.
TEST(OnnxErrorsTest, ShapesSpillComputesDifferentlyAreNamed) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("ceil");
  auto add_value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  add_value(g->add_input(), "x", {1, 1, 5, 5});
  add_value(g->add_output(), "y", {1, 3});
  onnx::NodeProto* pool = g->add_node();
  pool->set_name("pool");
  pool->set_op_type("MaxPool");
  pool->add_input("x");
  pool->add_output("p");
  for (const char* key : {"kernel_shape", "strides"}) {
    onnx::AttributeProto* a = pool->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
  }
  onnx::AttributeProto* pads = pool->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  onnx::AttributeProto* ceil = pool->add_attribute();
  ceil->set_name("ceil_mode");
  ceil->set_type(onnx::AttributeProto::INT);
  ceil->set_i(1);
  onnx::NodeProto* flatten = g->add_node();
  flatten->set_op_type("Flatten");
  flatten->add_input("p");
  flatten->add_output("f");
  onnx::NodeProto* gemm = g->add_node();
  gemm->set_op_type("Gemm");
  gemm->add_input("f");
  gemm->add_input("fc.weight");
  gemm->add_output("y");
  onnx::AttributeProto* trans = gemm->add_attribute();
  trans->set_name("transB");
  trans->set_type(onnx::AttributeProto::INT);
  trans->set_i(1);
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("fc.weight");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->add_dims(16);
  for (int i = 0; i < 48; ++i) w->add_float_data(0.01f * i);
  auto graph = ParseOnnxModel(model.SerializeAsString(), "ceil.onnx");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto imported = ImportOnnx(**graph);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto spec = ParseNetString(imported->yaml, "ceil.onnx");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  EXPECT_THAT(CheckImportedShapes(*imported, **net).ToString(),
              HasSubstr("ceil.onnx: layer 'pool' (max_pool) computes 1x3x3 where ONNX infers "
                        "1x4x4"));
}

// `model` with every initializer moved to external data in `dir`, as
// torch.onnx.export writes a model over 2 GiB: the first half of the tensors
// one file each, the rest one after another in weights.bin. Returns the
// model's path, dir/NAME.onnx.
std::string WriteWithExternalData(onnx::ModelProto model, const std::string& dir,
                                  const std::string& name = "net") {
  std::ofstream shared(dir + "/weights.bin", std::ios::binary);
  auto* inits = model.mutable_graph()->mutable_initializer();
  int64_t offset = 0;
  for (int i = 0; i < inits->size(); ++i) {
    onnx::TensorProto& t = (*inits)[i];
    const std::string bytes = t.raw_data();
    auto add = [&t](const std::string& key, const std::string& value) {
      auto* entry = t.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    if (i < inits->size() / 2) {
      const std::string file = "tensor_" + std::to_string(i);
      std::ofstream(dir + "/" + file, std::ios::binary) << bytes;
      add("location", file);
    } else {
      shared << bytes;
      add("location", "weights.bin");
      add("offset", std::to_string(offset));
      add("length", std::to_string(bytes.size()));
      offset += static_cast<int64_t>(bytes.size());
    }
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
  }
  const std::string path = dir + "/" + name + ".onnx";
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
  return path;
}

// A model whose tensors live in files beside it imports as the same
// network with the same weights, bit for bit.
TEST(OnnxImportTest, ExternalDataGivesTheSameNetwork) {
  auto fixture = testing::LoadOnnxFixture("resnet18");
  ASSERT_TRUE(fixture.ok());
  auto inline_net = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(inline_net.ok()) << inline_net.status().ToString();
  const std::string path = WriteWithExternalData(LoadOnnxProto("resnet18"),
                                                 testing::TempDir("onnx_external"), "resnet18");
  auto external_net = ImportOnnxFile(path);
  ASSERT_TRUE(external_net.ok()) << external_net.status().ToString();
  auto without_source = [](const std::string& yaml) {  // the first line names the file
    return yaml.substr(yaml.find('\n'));
  };
  EXPECT_THAT(external_net->yaml, HasSubstr("Imported from " + path));
  EXPECT_EQ(without_source(external_net->yaml), without_source(inline_net->yaml));
  ASSERT_EQ(external_net->params.size(), inline_net->params.size());
  for (const auto& [name, array] : inline_net->params) {
    ASSERT_EQ(external_net->params.count(name), 1u) << name;
    EXPECT_EQ(external_net->params.at(name).data, array.data) << name;
  }
}

// The external data's errors name the model, the tensor and the file.
TEST(OnnxErrorsTest, ExternalDataThatCannotBeRead) {
  const std::string dir = testing::TempDir("onnx_external_errors");
  const std::string path = WriteWithExternalData(LoadOnnxProto("resnet18"), dir);
  onnx::ModelProto model;
  {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
  }
  auto import_with = [&](const std::string& key, const std::string& value) {
    onnx::ModelProto edited = model;
    onnx::TensorProto* t = edited.mutable_graph()->mutable_initializer(0);
    for (auto& entry : *t->mutable_external_data()) {
      if (entry.key() == key) entry.set_value(value);
    }
    if (key == "length") {
      auto* entry = t->add_external_data();
      entry->set_key("length");
      entry->set_value(value);
    }
    std::ofstream(dir + "/edited.onnx", std::ios::binary) << edited.SerializeAsString();
    auto net = ImportOnnxFile(dir + "/edited.onnx");
    return net.ok() ? std::string() : net.status().ToString();
  };
  const std::string tensor = model.graph().initializer(0).name();
  EXPECT_THAT(import_with("location", "missing.bin"),
              AllOf(HasSubstr("edited.onnx: tensor '" + tensor + "'"),
                    HasSubstr("cannot read " + dir + "/missing.bin")));
  EXPECT_THAT(import_with("location", "../tensor_0"), HasSubstr("outside the model's folder"));
  EXPECT_THAT(import_with("location", "/etc/passwd"), HasSubstr("outside the model's folder"));
  EXPECT_THAT(import_with("length", "1000000000"), HasSubstr("past the end of " + dir));
  EXPECT_THAT(import_with("length", "-4"), HasSubstr("length '-4' is not a byte count"));
  EXPECT_THAT(import_with("length", "4"), HasSubstr("different number of values"));
  // A model given as bytes has no folder to read from.
  auto graph = ParseOnnxModel(model.SerializeAsString(), "net.onnx");
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().ToString(), HasSubstr("read the model from its file"));
}

TEST(OnnxErrorsTest, MissingFile) {
  auto net = ImportOnnxFile("/nonexistent/net.onnx");
  ASSERT_FALSE(net.ok());
  EXPECT_THAT(net.status().ToString(), HasSubstr("/nonexistent/net.onnx"));
}

}  // namespace
}  // namespace spill
