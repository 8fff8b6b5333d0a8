// ONNX files and checkpoints a hostile user could hand the importer and the
// exporter: attributes that ONNX's own shape inference divides by (checked
// before any library sees the graph), static dimensions that are not sizes,
// statistics that are not finite, checkpoints whose arrays have the right
// number of values in the wrong shape, and malformed LSTM and GRU nodes (their
// weights, attributes, inputs and initial states edited one at a time).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "framework/graph/net.h"
#include "framework/onnx/onnx_attributes.h"
#include "framework/onnx/onnx_export.h"
#include "framework/onnx/onnx_import.h"
#include "framework/onnx/onnx_model.h"
#include "tests/testing/onnx_harness.h"

namespace spill {
namespace {

using ::testing::AllOf;
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

// ---- Recurrent operators ----

onnx::TensorProto* FindInitializer(onnx::ModelProto* model, const std::string& name) {
  for (auto& t : *model->mutable_graph()->mutable_initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

void SetAttribute(onnx::NodeProto* node, const std::string& name,
                  const std::function<void(onnx::AttributeProto*)>& set) {
  onnx::AttributeProto* a = nullptr;
  for (auto& existing : *node->mutable_attribute()) {
    if (existing.name() == name) a = &existing;
  }
  if (a == nullptr) a = node->add_attribute();
  a->Clear();
  a->set_name(name);
  set(a);
}

void SetInt(onnx::NodeProto* node, const std::string& name, int64_t v) {
  SetAttribute(node, name, [v](onnx::AttributeProto* a) {
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  });
}

void SetString(onnx::NodeProto* node, const std::string& name, const std::string& v) {
  SetAttribute(node, name, [&v](onnx::AttributeProto* a) {
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  });
}

// Everything a config's `model: {onnx: ...}` does short of planning: parse,
// import, build at batch 2, check the shapes; every imported weight fits its
// parameter exactly. A rejection must name the file and never be internal.
Status ImportAndBuild(const onnx::ModelProto& model) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<OnnxGraph> graph,
                         ParseOnnxModel(model.SerializeAsString(), "net.onnx"));
  SPILL_ASSIGN_OR_RETURN(ImportedNet imported, ImportOnnx(*graph));
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, ParseNetString(imported.yaml, "net.onnx"));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {2, DeviceType::kCpu}));
  SPILL_RETURN_IF_ERROR(CheckImportedShapes(imported, *net));
  const Schedule& s = net->schedule();
  size_t matched = 0;
  for (int id = 0; id < net->num_layers(); ++id) {
    for (TensorId p : s.layers[id].params) {
      auto it = imported.params.find("params/" + s.tensors[p].name);
      if (it == imported.params.end()) return Internal("no weight for " + s.tensors[p].name);
      if (it->second.numel() != s.tensors[p].shape.numel()) {
        return Internal("imported weight '" + it->first + "' has the wrong size");
      }
      ++matched;
    }
  }
  if (matched != imported.params.size()) return Internal("imported weights left unmatched");
  return Status::Ok();
}

const char* const kSequenceFixtures[] = {"char_lstm", "char_gru", "char_bilstm", "seq_features"};

// One edit of a recurrent node (or of its weights) of `model`.
using RecurrentEdit = std::function<void(onnx::ModelProto*, onnx::NodeProto*)>;

std::vector<std::pair<std::string, RecurrentEdit>> RecurrentEdits() {
  std::vector<std::pair<std::string, RecurrentEdit>> edits;
  auto add = [&edits](const std::string& name, RecurrentEdit edit) {
    edits.emplace_back(name, std::move(edit));
  };
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{4}, int64_t{6}, int64_t{1} << 20,
                    int64_t{1} << 40}) {
    add("hidden_size " + std::to_string(v),
        [v](onnx::ModelProto*, onnx::NodeProto* n) { SetInt(n, "hidden_size", v); });
  }
  for (const char* d : {"forward", "reverse", "bidirectional", "sideways", ""}) {
    add(std::string("direction ") + d,
        [d](onnx::ModelProto*, onnx::NodeProto* n) { SetString(n, "direction", d); });
  }
  for (const char* flag : {"layout", "input_forget", "linear_before_reset"}) {
    for (int64_t v : {0, 1, 2}) {
      add(std::string(flag) + " " + std::to_string(v),
          [flag, v](onnx::ModelProto*, onnx::NodeProto* n) { SetInt(n, flag, v); });
    }
  }
  for (float v : {1.0f, std::numeric_limits<float>::quiet_NaN()}) {
    add("clip", [v](onnx::ModelProto*, onnx::NodeProto* n) {
      SetAttribute(n, "clip", [v](onnx::AttributeProto* a) {
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(v);
      });
    });
  }
  for (std::vector<std::string> list : std::vector<std::vector<std::string>>{
           {"Relu", "Tanh", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh"}, {}}) {
    add("activations", [list](onnx::ModelProto*, onnx::NodeProto* n) {
      SetAttribute(n, "activations", [&list](onnx::AttributeProto* a) {
        a->set_type(onnx::AttributeProto::STRINGS);
        for (const std::string& f : list) a->add_strings(f);
      });
    });
  }
  for (int k = 0; k < 8; ++k) {
    add("input " + std::to_string(k) + " dropped", [k](onnx::ModelProto*, onnx::NodeProto* n) {
      if (k < n->input_size()) n->set_input(k, "");
    });
    add("input " + std::to_string(k) + " the graph's input",
        [k](onnx::ModelProto* m, onnx::NodeProto* n) {
          while (n->input_size() <= k) n->add_input("");
          n->set_input(k, m->graph().input(0).name());
        });
    add("input " + std::to_string(k) + " a weight", [k](onnx::ModelProto* m, onnx::NodeProto* n) {
      while (n->input_size() <= k) n->add_input("");
      n->set_input(k, m->graph().initializer(0).name());
    });
  }
  for (int k = 1; k <= 3; ++k) {  // W, R, B
    const std::string w = "input " + std::to_string(k);
    auto tensor = [k](onnx::ModelProto* m, onnx::NodeProto* n) {
      return k < n->input_size() ? FindInitializer(m, n->input(k)) : nullptr;
    };
    add(w + " dims swapped", [tensor](onnx::ModelProto* m, onnx::NodeProto* n) {
      if (auto* t = tensor(m, n); t != nullptr && t->dims_size() >= 2) {
        const int64_t last = t->dims(t->dims_size() - 1);
        t->set_dims(t->dims_size() - 1, t->dims(t->dims_size() - 2));
        t->set_dims(t->dims_size() - 2, last);
      }
    });
    add(w + " a dimension short", [tensor](onnx::ModelProto* m, onnx::NodeProto* n) {
      if (auto* t = tensor(m, n); t != nullptr && t->dims_size() >= 2) {
        t->set_dims(1, t->dims(0) * t->dims(1));
        t->mutable_dims()->erase(t->mutable_dims()->begin());
      }
    });
    add(w + " rows doubled", [tensor](onnx::ModelProto* m, onnx::NodeProto* n) {
      if (auto* t = tensor(m, n); t != nullptr && t->dims_size() >= 2)
        t->set_dims(1, 2 * t->dims(1));
    });
    add(w + " of int64", [tensor](onnx::ModelProto* m, onnx::NodeProto* n) {
      if (auto* t = tensor(m, n)) t->set_data_type(onnx::TensorProto::INT64);
    });
    add(w + " not finite", [tensor](onnx::ModelProto* m, onnx::NodeProto* n) {
      auto* t = tensor(m, n);
      if (t == nullptr || t->raw_data().size() < sizeof(float)) return;
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::string raw = t->raw_data();
      std::memcpy(&raw[0], &nan, sizeof(nan));
      t->set_raw_data(raw);
    });
  }
  add("sequence_lens of 3", [](onnx::ModelProto* m, onnx::NodeProto* n) {
    onnx::TensorProto* lengths = m->mutable_graph()->add_initializer();
    lengths->set_name("lengths");
    lengths->set_data_type(onnx::TensorProto::INT32);
    lengths->add_dims(2);
    lengths->add_int32_data(3);
    lengths->add_int32_data(3);
    while (n->input_size() <= 4) n->add_input("");
    n->set_input(4, "lengths");
  });
  add("initial_h of ones", [](onnx::ModelProto* m, onnx::NodeProto* n) {
    onnx::TensorProto* h = m->mutable_graph()->add_initializer();
    h->set_name("ones");
    h->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 2, 5}) h->add_dims(d);
    for (int i = 0; i < 10; ++i) h->add_float_data(1);
    while (n->input_size() <= 5) n->add_input("");
    n->set_input(5, "ones");
  });
  add("Y_h read", [](onnx::ModelProto* m, onnx::NodeProto* n) {
    onnx::NodeProto* reader = m->mutable_graph()->add_node();
    reader->set_op_type("Relu");
    reader->add_input(n->output(1));
    reader->add_output("y_h_relu");
  });
  return edits;
}

// Each edit of every LSTM and GRU node of the sequence fixtures imports,
// builds and fits its weights, or is an error naming the file - never an
// internal error, never a crash.
TEST(OnnxRecurrentHostileTest, EditedRecurrentNodesAreErrorsOrNetworks) {
  int accepted = 0, rejected = 0;
  for (const char* fixture : kSequenceFixtures) {
    const onnx::ModelProto original = LoadOnnxProto(fixture);
    for (int i = 0; i < original.graph().node_size(); ++i) {
      const std::string& op = original.graph().node(i).op_type();
      if (op != "LSTM" && op != "GRU") continue;
      for (const auto& [what, edit] : RecurrentEdits()) {
        onnx::ModelProto model = original;
        edit(&model, model.mutable_graph()->mutable_node(i));
        const Status status = ImportAndBuild(model);
        const std::string where = std::string(fixture) + " node " + std::to_string(i) + ": " + what;
        EXPECT_NE(status.code(), StatusCode::kInternal) << where << ": " << status.ToString();
        if (!status.ok()) {
          EXPECT_THAT(status.ToString(), HasSubstr("net.onnx")) << where;
          ++rejected;
        } else {
          ++accepted;
        }
      }
    }
  }
  std::printf("edited recurrent nodes: %d imported, %d rejected\n", accepted, rejected);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, accepted);
}

// The window and partition matchers follow values through whatever node
// computes them: each Reshape, Transpose and Einsum of the Swin and MaxViT
// fixtures made to read a Constant (a node without inputs) imports or is an
// error naming the file - never a read past a node's inputs.
TEST(OnnxWindowHostileTest, ChainsReadingAConstantAreErrorsOrNetworks) {
  int accepted = 0, rejected = 0;
  for (const char* fixture : {"swin", "maxvit"}) {
    const onnx::ModelProto original = LoadOnnxProto(fixture);
    std::string constant;
    for (const auto& n : original.graph().node()) {
      if (n.op_type() == "Constant" && constant.empty()) constant = n.output(0);
    }
    ASSERT_FALSE(constant.empty()) << fixture;
    for (int i = 0; i < original.graph().node_size(); ++i) {
      const std::string& op = original.graph().node(i).op_type();
      if (op != "Reshape" && op != "Transpose" && op != "Einsum") continue;
      onnx::ModelProto model = original;
      model.mutable_graph()->mutable_node(i)->set_input(0, constant);
      const Status status = ImportAndBuild(model);
      const std::string where =
          std::string(fixture) + " node " + std::to_string(i) + " (" + op + ")";
      EXPECT_NE(status.code(), StatusCode::kInternal) << where << ": " << status.ToString();
      if (status.ok()) {
        ++accepted;
      } else {
        EXPECT_THAT(status.ToString(), HasSubstr("net.onnx")) << where;
        ++rejected;
      }
    }
  }
  std::printf("chains reading a constant: %d imported, %d rejected\n", accepted, rejected);
  EXPECT_GT(rejected, 0);
}

// The errors of the edits above that a user would make name the node and
// what spill expected.
TEST(OnnxRecurrentHostileTest, MalformedRecurrentNodesAreNamed) {
  auto error_of = [](const char* fixture, const std::string& op, const RecurrentEdit& edit) {
    onnx::ModelProto model = LoadOnnxProto(fixture);
    edit(&model, FirstNode(&model, op));
    return ImportAndBuild(model).ToString();
  };
  // W of the wrong shape: its inputs do not match the embedding's 6 features.
  EXPECT_THAT(error_of("char_lstm", "LSTM",
                       [](onnx::ModelProto* m, onnx::NodeProto* n) {
                         onnx::TensorProto* w = FindInitializer(m, n->input(1));
                         w->set_dims(2, 3);
                         w->set_dims(1, 40);
                       }),
              AllOf(HasSubstr("net.onnx: node "), HasSubstr("'/lstm/LSTM' (LSTM): W '"),
                    HasSubstr("has the shape [1, 40, 3] where [1, 20, 6] was expected")));
  EXPECT_THAT(error_of("char_lstm", "LSTM",
                       [](onnx::ModelProto*, onnx::NodeProto* n) {
                         SetString(n, "direction", "sideways");
                       }),
              HasSubstr("(LSTM): attribute 'direction' must be one of forward, reverse, "
                        "bidirectional; it is 'sideways'"));
  EXPECT_THAT(
      error_of("char_lstm", "LSTM",
               [](onnx::ModelProto*, onnx::NodeProto* n) { SetString(n, "direction", "reverse"); }),
      HasSubstr("(LSTM): direction reverse: spill's lstm and gru run forward"));
  EXPECT_THAT(
      error_of("char_gru", "GRU",
               [](onnx::ModelProto*, onnx::NodeProto* n) { SetInt(n, "linear_before_reset", 0); }),
      HasSubstr("(GRU): linear_before_reset 0"));
  EXPECT_THAT(error_of("char_bilstm", "LSTM",
                       [](onnx::ModelProto*, onnx::NodeProto* n) { SetInt(n, "layout", 1); }),
              HasSubstr("(LSTM): layout 1"));
  EXPECT_THAT(error_of("seq_features", "LSTM",
                       [](onnx::ModelProto*, onnx::NodeProto* n) {
                         SetAttribute(n, "activations", [](onnx::AttributeProto* a) {
                           a->set_type(onnx::AttributeProto::STRINGS);
                           for (const char* f : {"Sigmoid", "Relu", "Tanh"}) a->add_strings(f);
                         });
                       }),
              HasSubstr("(LSTM): activations other than ONNX's defaults"));
  // The GRU fixture's initial state is Expand of a constant 0 (a fixed
  // batch): made 1, it is refused.
  EXPECT_THAT(error_of("char_gru", "GRU",
                       [](onnx::ModelProto* m, onnx::NodeProto*) {
                         for (auto& node : *m->mutable_graph()->mutable_node()) {
                           if (node.op_type() != "Constant" ||
                               node.attribute(0).t().data_type() != onnx::TensorProto::FLOAT) {
                             continue;
                           }
                           const float one = 1;
                           node.mutable_attribute(0)->mutable_t()->set_raw_data(&one, sizeof(one));
                         }
                       }),
              AllOf(HasSubstr("(GRU): initial_h '"), HasSubstr("' is not zero")));
}

}  // namespace
}  // namespace spill
