// ONNX import against PyTorch, and its errors.
//
// The fixtures in tests/testdata/onnx were written by tools/onnx_fixtures.py
// (torch.onnx.export of a ResNet-18, a VGG-11, an Inception-style block and a
// dense block, with an input batch and PyTorch's scores for it): imported,
// they give PyTorch's scores to 1e-5 relative, and the imported ResNet-18
// trains bit-identically to its baseline in every memory mode. Broken files
// (truncated, unsupported operators, dynamic shapes, opsets out of range)
// are errors that name the file and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "framework/net.h"
#include "framework/onnx_import.h"
#include "framework/onnx_model.h"
#include "tests/onnx_harness.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

const char* const kFixtures[] = {"resnet18", "vgg11", "inception", "dense_block"};

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

// Two steps at batch 2 in every memory mode, each at the smallest budget
// that runs and a roomy one: the losses and weights of the baseline, bit for
// bit, starting from the imported weights.
TEST(OnnxImportTest, ImportedResNet18TrainsBitIdenticallyInEveryMode) {
  auto fixture = testing::LoadOnnxFixture("resnet18");
  ASSERT_TRUE(fixture.ok());
  auto imported = ImportOnnxFile(fixture->onnx);
  ASSERT_TRUE(imported.ok());
  auto spec = ParseNetString(imported->yaml, "resnet18");
  ASSERT_TRUE(spec.ok());
  testing::ExpectEveryModeBitIdentical(*spec, imported->params);
}

// ---- Errors ----

onnx::ModelProto LoadProto(const std::string& name) {
  auto fixture = testing::LoadOnnxFixture(name);
  SPILL_CHECK(fixture.ok());
  std::ifstream in(fixture->onnx, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  SPILL_CHECK(model.ParseFromString(bytes.str()));
  return model;
}

std::string ImportError(const onnx::ModelProto& model) {
  auto graph = ParseOnnxModel(model.SerializeAsString(), "net.onnx");
  if (!graph.ok()) return graph.status().ToString();
  auto net = ImportOnnx(**graph);
  return net.ok() ? "" : net.status().ToString();
}

TEST(OnnxErrorsTest, TruncatedFile) {
  const std::string bytes = LoadProto("vgg11").SerializeAsString();
  for (size_t keep : {size_t{0}, size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    auto graph = ParseOnnxModel(bytes.substr(0, keep), "net.onnx");
    ASSERT_FALSE(graph.ok()) << keep;
    EXPECT_THAT(graph.status().ToString(), HasSubstr("net.onnx: not an ONNX model")) << keep;
  }
}

TEST(OnnxErrorsTest, UnsupportedOperatorsAreListedWithTheirNodes) {
  onnx::ModelProto model = LoadProto("vgg11");
  int changed = 0;
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Relu") continue;
    node.set_op_type(changed == 0 ? "Sigmoid" : "Tanh");
    if (++changed == 2) break;
  }
  const std::string error = ImportError(model);
  EXPECT_THAT(error, HasSubstr("net.onnx: unsupported operators: Sigmoid, Tanh"));
  EXPECT_THAT(error, HasSubstr("'/features/features.1/Relu' (Sigmoid)"));
  EXPECT_THAT(error, HasSubstr("'/features/features.4/Relu' (Tanh)"));
  EXPECT_THAT(error, HasSubstr("spill imports AveragePool"));
}

TEST(OnnxErrorsTest, DynamicImageSize) {
  onnx::ModelProto model = LoadProto("vgg11");
  auto* dim = model.mutable_graph()
                  ->mutable_input(0)
                  ->mutable_type()
                  ->mutable_tensor_type()
                  ->mutable_shape()
                  ->mutable_dim(2);
  dim->set_dim_param("height");
  EXPECT_THAT(ImportError(model), HasSubstr("input 'input' has a dynamic dimension (axis 2)"));
}

TEST(OnnxErrorsTest, DynamicBatchIsFine) {
  onnx::ModelProto model = LoadProto("resnet18");
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  EXPECT_EQ(ImportError(model), "");
}

TEST(OnnxErrorsTest, OpsetOutOfRange) {
  for (int version : {9, 18}) {
    onnx::ModelProto model = LoadProto("resnet18");
    model.mutable_opset_import(0)->set_version(version);
    EXPECT_THAT(ImportError(model), HasSubstr("net.onnx: opset " + std::to_string(version) +
                                              "; spill reads opsets 11 to 17"));
  }
}

TEST(OnnxErrorsTest, LayerFeaturesSpillLacksAreNamed) {
  onnx::ModelProto model = LoadProto("vgg11");
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Conv") continue;
    for (auto& a : *node.mutable_attribute()) {
      if (a.name() == "pads") a.set_ints(2, 0);  // [1, 1, 0, 1]
    }
    break;
  }
  EXPECT_THAT(ImportError(model),
              HasSubstr("node 0 '/features/features.0/Conv' (Conv): asymmetric pads"));
}

TEST(OnnxErrorsTest, MissingFile) {
  auto net = ImportOnnxFile("/nonexistent/net.onnx");
  ASSERT_FALSE(net.ok());
  EXPECT_THAT(net.status().ToString(), HasSubstr("/nonexistent/net.onnx"));
}

}  // namespace
}  // namespace spill
