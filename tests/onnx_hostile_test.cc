// ONNX files and checkpoints a hostile user could hand the importer and the
// exporter: attributes that ONNX's own shape inference divides by (checked
// before any library sees the graph), static dimensions that are not sizes,
// statistics that are not finite, and checkpoints whose arrays have the right
// number of values in the wrong shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "framework/graph/net.h"
#include "framework/onnx/onnx_attributes.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/onnx/onnx_model.h"
#include "tests/testing/onnx_harness.h"

namespace spill {
namespace {

using ::testing::HasSubstr;
using testing::LoadOnnxProto;
using testing::OnnxImportError;

onnx::AttributeProto* SetInts(onnx::NodeProto* node, const std::string& name,
                              const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = nullptr;
  for (auto& existing : *node->mutable_attribute()) {
    if (existing.name() == name) a = &existing;
  }
  if (a == nullptr) a = node->add_attribute();
  a->Clear();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
  return a;
}

// The first node of `op` in vgg11 (Conv and MaxPool), or its first MaxPool
// turned into an AveragePool.
onnx::NodeProto* FirstNode(onnx::ModelProto* model, const std::string& op) {
  for (auto& node : *model->mutable_graph()->mutable_node()) {
    if (node.op_type() == op) return &node;
    if (op == "AveragePool" && node.op_type() == "MaxPool") {
      node.set_op_type("AveragePool");
      return &node;
    }
  }
  return nullptr;
}

// A stride, kernel or dilation of 0 made libonnx's shape inference divide by
// zero (SIGFPE, the whole process gone). Each is now an error naming the
// node and the attribute, before inference runs.
TEST(OnnxAttributesTest, WindowAttributesAreCheckedBeforeShapeInference) {
  const int64_t kHostile[] = {0, -1, -3, std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max()};
  for (const char* op : {"Conv", "MaxPool", "AveragePool"}) {
    for (const char* attribute : {"strides", "kernel_shape", "dilations"}) {
      for (int64_t value : kHostile) {
        onnx::ModelProto model = LoadOnnxProto("vgg11");
        onnx::NodeProto* node = FirstNode(&model, op);
        ASSERT_NE(node, nullptr) << op;
        std::vector<int64_t> values = {value, 1};
        if (std::string(attribute) == "kernel_shape" && std::string(op) == "Conv") {
          values = {value, 3};
        }
        SetInts(node, attribute, values);
        const std::string error = OnnxImportError(model);
        EXPECT_THAT(error, HasSubstr("net.onnx: node ")) << op << " " << attribute << value;
        EXPECT_THAT(error, HasSubstr("(" + std::string(op) + "): attribute '" + attribute + "'"))
            << op << " " << attribute << value;
      }
    }
  }
}

TEST(OnnxAttributesTest, PadsFlagsAndListLengthsAreChecked) {
  onnx::ModelProto model = LoadOnnxProto("vgg11");
  SetInts(FirstNode(&model, "Conv"), "pads", {-1, -1, -1, -1});
  EXPECT_THAT(OnnxImportError(model), HasSubstr("attribute 'pads' must hold values in [0, "));
  model = LoadOnnxProto("vgg11");
  SetInts(FirstNode(&model, "Conv"), "pads", {1, 1, 1});
  EXPECT_THAT(OnnxImportError(model), HasSubstr("'pads' must hold a begin and an end per axis"));
  model = LoadOnnxProto("vgg11");
  SetInts(FirstNode(&model, "MaxPool"), "strides", {2, 2, 2});
  EXPECT_THAT(OnnxImportError(model), HasSubstr("describe different numbers of axes"));
  model = LoadOnnxProto("vgg11");
  onnx::NodeProto* pool = FirstNode(&model, "MaxPool");
  onnx::AttributeProto* ceil = pool->add_attribute();
  ceil->set_name("ceil_mode");
  ceil->set_type(onnx::AttributeProto::INT);
  ceil->set_i(7);
  EXPECT_THAT(OnnxImportError(model), HasSubstr("attribute 'ceil_mode' must be 0 or 1; it is 7"));
  model = LoadOnnxProto("vgg11");
  onnx::NodeProto* conv = FirstNode(&model, "Conv");
  onnx::AttributeProto* group = conv->add_attribute();
  group->set_name("group");
  group->set_type(onnx::AttributeProto::INT);
  group->set_i(0);
  EXPECT_THAT(OnnxImportError(model), HasSubstr("attribute 'group' must hold values in [1, "));
}

TEST(OnnxAttributesTest, NonFiniteFloatAttributesAreRefused) {
  onnx::ModelProto model = LoadOnnxProto("resnet18");
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "BatchNormalization") continue;
    onnx::AttributeProto* eps = node.add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(std::numeric_limits<float>::quiet_NaN());
    break;
  }
  EXPECT_THAT(OnnxImportError(model),
              HasSubstr("(BatchNormalization): attribute 'epsilon' must be finite"));
}

// A static dimension of 0 or below is invalid, not "dynamic".
TEST(OnnxAttributesTest, InvalidStaticDimensionsAreNotCalledDynamic) {
  onnx::ModelProto model = LoadOnnxProto("vgg11");
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(2)
      ->set_dim_value(-4);
  const std::string error = OnnxImportError(model);
  EXPECT_THAT(error, HasSubstr("has the invalid static dimension -4 (axis 2)"));
  EXPECT_THAT(error, ::testing::Not(HasSubstr("dynamic")));
}

}  // namespace
}  // namespace spill
