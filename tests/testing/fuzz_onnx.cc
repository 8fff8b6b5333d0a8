#include "tests/testing/fuzz_onnx.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "framework/graph/net.h"
#include "framework/onnx/onnx_import.h"
#include "memory/planning/planner.h"

namespace spill {
namespace fuzz {
namespace {

const int64_t kExtremeInts[] = {0,
                                -1,
                                1,
                                2,
                                3,
                                65537,
                                int64_t{1} << 40,
                                std::numeric_limits<int64_t>::max(),
                                std::numeric_limits<int64_t>::min()};
const float kExtremeFloats[] = {0.0f,
                                -1.0f,
                                1e30f,
                                std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::infinity(),
                                1e-30f};
const char* const kOperators[] = {"Sigmoid", "Conv", "Gemm", "MatMul", "Reshape", "Flatten",
                                  "",        "Loop", "Add",  "Concat", "Pad",     "LRN"};

int64_t PickInt(Random& rng) { return kExtremeInts[rng.Below(std::size(kExtremeInts))]; }

onnx::NodeProto* PickNode(onnx::GraphProto* g, Random& rng) {
  return g->node_size() == 0 ? nullptr
                             : g->mutable_node(static_cast<int>(rng.Below(g->node_size())));
}

void MutateAttribute(onnx::GraphProto* g, Random& rng) {
  onnx::NodeProto* node = PickNode(g, rng);
  if (node == nullptr) return;
  onnx::AttributeProto* a =
      node->attribute_size() > 0 && rng.Below(4) != 0
          ? node->mutable_attribute(static_cast<int>(rng.Below(node->attribute_size())))
          : node->add_attribute();
  if (a->name().empty()) {
    const char* names[] = {"pads", "strides", "group", "axis", "kernel_shape", "alpha", "size"};
    a->set_name(names[rng.Below(std::size(names))]);
  }
  switch (rng.Below(4)) {
    case 0:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(PickInt(rng));
      break;
    case 1: {
      a->set_type(onnx::AttributeProto::INTS);
      a->clear_ints();
      const int n = static_cast<int>(rng.Below(9));
      for (int i = 0; i < n; ++i) a->add_ints(PickInt(rng));
      break;
    }
    case 2:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(kExtremeFloats[rng.Below(std::size(kExtremeFloats))]);
      break;
    default:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(rng.Below(2) ? "SAME_UPPER" : "reflect");
  }
}

void MutateInitializer(onnx::GraphProto* g, Random& rng) {
  if (g->initializer_size() == 0) return;
  onnx::TensorProto* t = g->mutable_initializer(static_cast<int>(rng.Below(g->initializer_size())));
  switch (rng.Below(4)) {
    case 0:
      if (t->dims_size() > 0)
        t->set_dims(static_cast<int>(rng.Below(t->dims_size())), PickInt(rng));
      break;
    case 1:
      t->set_data_type(static_cast<int32_t>(rng.Below(17)));
      break;
    case 2:
      t->set_raw_data(t->raw_data().substr(0, t->raw_data().size() / 2));
      break;
    default:
      t->set_data_location(onnx::TensorProto::EXTERNAL);
  }
}

void MutateInput(onnx::GraphProto* g, Random& rng) {
  onnx::NodeProto* node = PickNode(g, rng);
  if (node == nullptr) return;
  switch (rng.Below(3)) {
    case 0:
      if (node->input_size() > 0) node->mutable_input()->RemoveLast();
      break;
    case 1:
      if (node->input_size() > 0) node->set_input(0, rng.Below(2) ? "missing" : node->output(0));
      break;
    default:
      node->add_input(g->initializer_size() > 0 ? g->initializer(0).name() : "extra");
  }
}

void MutateInputShape(onnx::GraphProto* g, Random& rng) {
  if (g->input_size() == 0) return;
  auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  if (shape->dim_size() == 0 || rng.Below(5) == 0) {
    shape->add_dim()->set_dim_value(3);
    return;
  }
  auto* dim = shape->mutable_dim(static_cast<int>(rng.Below(shape->dim_size())));
  if (rng.Below(2)) {
    dim->set_dim_param("d");
  } else {
    dim->set_dim_value(PickInt(rng));
  }
}

void MutateOutputs(onnx::GraphProto* g, Random& rng) {
  switch (rng.Below(3)) {
    case 0:
      g->clear_output();
      break;
    case 1:
      if (g->output_size() > 0) *g->add_output() = g->output(0);
      break;
    default:
      if (g->output_size() > 0) g->mutable_output(0)->set_name("nowhere");
  }
}

}  // namespace

const char* OnnxMutationName(OnnxMutation m) {
  static const char* const kNames[] = {"operator", "input",       "attribute", "input shape",
                                       "opset",    "initializer", "outputs",   "node order"};
  return kNames[static_cast<int>(m)];
}

std::string MutateOnnx(const std::string& bytes, OnnxMutation m, Random& rng) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return bytes;
  onnx::GraphProto* g = model.mutable_graph();
  switch (m) {
    case OnnxMutation::kOperator:
      if (onnx::NodeProto* node = PickNode(g, rng)) {
        node->set_op_type(kOperators[rng.Below(std::size(kOperators))]);
      }
      break;
    case OnnxMutation::kInput:
      MutateInput(g, rng);
      break;
    case OnnxMutation::kAttribute:
      MutateAttribute(g, rng);
      break;
    case OnnxMutation::kInputShape:
      MutateInputShape(g, rng);
      break;
    case OnnxMutation::kOpset: {
      const int64_t versions[] = {0, 1, 10, 11, 12, 17, 18, 1000, -5};
      if (model.opset_import_size() > 0) {
        model.mutable_opset_import(0)->set_version(versions[rng.Below(std::size(versions))]);
      }
      break;
    }
    case OnnxMutation::kInitializer:
      MutateInitializer(g, rng);
      break;
    case OnnxMutation::kOutputs:
      MutateOutputs(g, rng);
      break;
    case OnnxMutation::kNodeOrder:
      if (g->node_size() > 1) {
        g->mutable_node()->SwapElements(static_cast<int>(rng.Below(g->node_size())),
                                        static_cast<int>(rng.Below(g->node_size())));
      }
      break;
    case OnnxMutation::kCount:
      break;
  }
  return model.SerializeAsString();
}

Status OnnxPipeline(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(ImportedNet imported, ImportOnnxFile(path));
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, ParseNetString(imported.yaml, path));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {2, DeviceType::kCpu}));
  SPILL_RETURN_IF_ERROR(CheckImportedShapes(imported, *net));
  // Every imported weight must fit a parameter of the network exactly.
  const Schedule& s = net->schedule();
  size_t matched = 0;
  for (int id = 0; id < net->num_layers(); ++id) {
    for (TensorId p : s.layers[id].params) {
      auto it = imported.params.find("params/" + s.tensors[p].name);
      if (it == imported.params.end()) continue;
      if (it->second.numel() != s.tensors[p].shape.numel()) {
        return Internal("imported weight '" + it->first + "' has the wrong size");
      }
      ++matched;
    }
  }
  if (matched != imported.params.size()) return Internal("imported weights left unmatched");
  MemoryOptions options;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode("superneurons", &options));
  options.device_budget = kUnlimitedBudget;
  return Plan(net->view(), options).status();
}

}  // namespace fuzz
}  // namespace spill
