// ONNX export: the layers in route order (a topological order, as ONNX
// requires), one node each (two for a fully connected layer that flattens an
// image; a chain for the layers of onnx_export_vision.cc that ONNX has no
// one operator for), attributes read from the layer's entry with the
// layer's own defaults. Values keep their ONNX rank (4 for images, 2 after Gemm) so a
// layer that needs an image refuses a flattened one.
#include "framework/onnx/onnx_export.h"

#include <onnx/checker.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "framework/base/files.h"
#include "framework/config/layer_params.h"
#include "framework/io/checkpoint.h"
#include "framework/onnx/onnx_exporter.h"

namespace spill {
namespace onnx_export {

YAML::Node Param(const LayerSpec& spec, const char* key) {
  if (!spec.params.IsMap()) return YAML::Node();
  return spec.params[key];
}

int64_t Int(const LayerSpec& spec, const char* key, int64_t fallback) {
  const YAML::Node n = Param(spec, key);
  return n.IsDefined() && n.IsScalar() ? n.as<int64_t>() : fallback;
}

double Float(const LayerSpec& spec, const char* key, double fallback) {
  const YAML::Node n = Param(spec, key);
  return n.IsDefined() && n.IsScalar() ? n.as<double>() : fallback;
}

bool Bool(const LayerSpec& spec, const char* key, bool fallback) {
  const YAML::Node n = Param(spec, key);
  return n.IsDefined() && n.IsScalar() ? n.as<bool>() : fallback;
}

// An int or [h, w].
std::vector<int64_t> Pair(const LayerSpec& spec, const char* key, std::vector<int64_t> fallback) {
  const YAML::Node n = Param(spec, key);
  if (!n.IsDefined() || n.IsNull()) return fallback;
  if (n.IsScalar()) return {n.as<int64_t>(), n.as<int64_t>()};
  return {n[0].as<int64_t>(), n[1].as<int64_t>()};
}

onnx::NodeProto* Exporter::Node(int id, const std::string& op, std::vector<std::string> inputs) {
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(net_.layer(id).name() + (op == "Flatten" ? "/flatten" : ""));
  for (const std::string& in : inputs) node->add_input(in);
  return node;
}

void AddInts(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

onnx::NodeProto* Named(onnx::NodeProto* node, const std::string& layer, const std::string& step) {
  node->set_name(layer + "/" + step);
  node->add_output(layer + "/" + step);
  return node;
}

void AddInt(onnx::NodeProto* node, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AddString(onnx::NodeProto* node, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void AddFloat(onnx::NodeProto* node, const std::string& name, double v) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

StatusOr<std::string> Exporter::In(int id, int k, bool image) const {
  const TensorId t = s_.layers[id].inputs[k];
  auto it = values_.find(t);
  if (it == values_.end()) {
    return InvalidArgument("layer '" + net_.layer(id).name() + "' reads '" + s_.tensors[t].name +
                           "', which has no ONNX value (only the input's images export)");
  }
  if (image && it->second.second != 4) {
    return InvalidArgument("layer '" + net_.layer(id).name() + "' (" + net_.layer(id).type() +
                           ") reads '" + s_.tensors[t].name + "' as an image, where ONNX holds " +
                           "it flattened (the output of a fully connected layer, or the " +
                           "input's ids)");
  }
  return it->second.first;
}

std::string Exporter::Out(int id, int rank) {
  const TensorId t = s_.layers[id].outputs[0];
  values_[t] = {net_.layer(id).name(), rank};
  return net_.layer(id).name();
}

StatusOr<std::string> Exporter::Initializer(int id, int p, const std::string& suffix,
                                            const std::vector<int64_t>& dims) {
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, ParamValues(id, p));
  return RawConstant(id, suffix, values, dims);
}

// Images (N, C, H, W); ids that only embeddings read (N x 1 x 1 x T) as
// int64 (N, T), as PyTorch's nn.Embedding takes them.
Status Exporter::Input(int id) {
  const Shape& shape = s_.tensors[s_.layers[id].outputs[0]].shape;
  const bool ids = InputHoldsIds(id);
  onnx::ValueInfoProto* in = graph_->add_input();
  in->set_name(Out(id, ids ? 2 : 4));
  auto* type = in->mutable_type()->mutable_tensor_type();
  type->set_elem_type(ids ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
  type->mutable_shape()->add_dim()->set_dim_param("N");
  std::vector<int64_t> dims = {shape.c(), shape.h(), shape.w()};
  if (ids) dims = {shape.w()};
  for (int64_t d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
  return Status::Ok();
}

// Conv and the pools: kernel, strides, symmetric pads.
Status Exporter::Window(int id, const std::string& op) {
  const LayerSpec& spec = net_.spec(id);
  SPILL_ASSIGN_OR_RETURN(std::string x, In(id, 0, true));
  const std::vector<int64_t> kernel = Pair(spec, "kernel", {1, 1});
  const std::vector<int64_t> pad = Pair(spec, "pad", {0, 0});
  std::vector<int64_t> stride = Pair(spec, "stride", {1, 1});
  if (op != "Conv" && !Param(spec, "stride").IsDefined()) {  // pools stride by their kernel
    stride = {std::min(kernel[0], kMaxLayerStride), std::min(kernel[1], kMaxLayerStride)};
  }
  std::vector<std::string> inputs = {x};
  if (op == "Conv") {
    const Shape& w = s_.tensors[s_.layers[id].params[0]].shape;
    SPILL_ASSIGN_OR_RETURN(std::string weight,
                           Initializer(id, 0, "weight", {w.n(), w.c(), w.h(), w.w()}));
    inputs.push_back(weight);
    if (s_.layers[id].params.size() > 1) {
      SPILL_ASSIGN_OR_RETURN(std::string bias, Initializer(id, 1, "bias", {w.n()}));
      inputs.push_back(bias);
    }
  }
  onnx::NodeProto* node = Node(id, op, inputs);
  AddInts(node, "kernel_shape", kernel);
  AddInts(node, "strides", stride);
  AddInts(node, "pads", {pad[0], pad[1], pad[0], pad[1]});
  if (op == "Conv") {
    AddInts(node, "dilations", Pair(spec, "dilation", {1, 1}));
    AddInt(node, "group", Int(spec, "groups", 1));
  } else {
    AddInt(node, "ceil_mode", Bool(spec, "ceil_mode", false));
  }
  if (op == "AveragePool") AddInt(node, "count_include_pad", Bool(spec, "count_include_pad", true));
  node->add_output(Out(id, 4));
  return Status::Ok();
}

Status Exporter::FullyConnected(int id) {
  SPILL_ASSIGN_OR_RETURN(std::string x, In(id, 0, false));
  if (values_[s_.layers[id].inputs[0]].second == 4) {
    onnx::NodeProto* flatten = Node(id, "Flatten", {x});
    AddInt(flatten, "axis", 1);
    x = net_.layer(id).name() + "/flat";
    flatten->add_output(x);
  }
  const Shape& w = s_.tensors[s_.layers[id].params[0]].shape;
  SPILL_ASSIGN_OR_RETURN(std::string weight, Initializer(id, 0, "weight", {w.n(), w.c()}));
  std::vector<std::string> inputs = {x, weight};
  if (s_.layers[id].params.size() > 1) {
    SPILL_ASSIGN_OR_RETURN(std::string bias, Initializer(id, 1, "bias", {w.n()}));
    inputs.push_back(bias);
  }
  onnx::NodeProto* node = Node(id, "Gemm", inputs);
  AddInt(node, "transB", 1);
  node->add_output(Out(id, 2));
  return Status::Ok();
}

Status Exporter::BatchNorm(int id) {
  SPILL_ASSIGN_OR_RETURN(std::string x, In(id, 0, false));
  const int rank = values_[s_.layers[id].inputs[0]].second;
  const int64_t c = s_.tensors[s_.layers[id].params[0]].shape.c();
  std::vector<std::string> inputs = {x};
  const char* suffixes[] = {"weight", "bias", "running_mean", "running_var"};
  for (int p = 0; p < 4; ++p) {
    SPILL_ASSIGN_OR_RETURN(std::string name, Initializer(id, p, suffixes[p], {c}));
    inputs.push_back(name);
  }
  onnx::NodeProto* node = Node(id, "BatchNormalization", inputs);
  AddFloat(node, "epsilon", Float(net_.spec(id), "eps", 1e-5));
  AddFloat(node, "momentum", 1.0 - Float(net_.spec(id), "momentum", 0.1));
  node->add_output(Out(id, rank));
  return Status::Ok();
}

Status Exporter::Layer(int id) {
  const std::string& type = net_.layer(id).type();
  const LayerSpec& spec = net_.spec(id);
  const std::string& name = net_.layer(id).name();
  if (type == "input") return Input(id);
  if (type == "convolution") return Window(id, "Conv");
  if (type == "max_pool") return Window(id, "MaxPool");
  if (type == "avg_pool") return Window(id, "AveragePool");
  if (type == "fully_connected") return FullyConnected(id);
  if (type == "batch_norm") return BatchNorm(id);
  if (type == "embedding") return Embedding(id);
  if (type == "lstm" || type == "gru") return Recurrent(id);
  if (type == "softmax_loss") {
    if (scores_tensor_ != kNoTensor) {
      return InvalidArgument("network '" + net_.name() + "' has several losses; ONNX export " +
                             "takes a network with one output");
    }
    SPILL_ASSIGN_OR_RETURN(scores_, In(id, 0, false));
    scores_tensor_ = s_.layers[id].inputs[0];
    scores_rank_ = values_[scores_tensor_].second;
    return Status::Ok();
  }
  static const std::set<std::string> kImageOnly = {"global_avg_pool",
                                                   "lrn",
                                                   "channel_shuffle",
                                                   "upsample",
                                                   "transposed_convolution",
                                                   "pad",
                                                   "multiply",
                                                   "broadcast_add",
                                                   "attention",
                                                   "positions",
                                                   "tokens",
                                                   "class_token",
                                                   "token",
                                                   "window_attention",
                                                   "space_to_depth"};
  const bool image = kImageOnly.count(type) > 0;
  std::vector<std::string> inputs;
  for (size_t k = 0; k < s_.layers[id].inputs.size(); ++k) {
    SPILL_ASSIGN_OR_RETURN(std::string in, In(id, static_cast<int>(k), image));
    inputs.push_back(in);
  }
  const int rank = values_[s_.layers[id].inputs[0]].second;
  bool done = false;
  SPILL_RETURN_IF_ERROR(Vision(id, inputs, rank, &done));
  if (done) {
    Out(id, rank);
    return Status::Ok();
  }
  onnx::NodeProto* node = nullptr;
  if (type == "relu") {
    const double slope = Float(spec, "negative_slope", 0);
    node = Node(id, slope == 0 ? "Relu" : "LeakyRelu", inputs);
    if (slope != 0) AddFloat(node, "alpha", slope);
  } else if (type == "global_avg_pool") {
    node = Node(id, "GlobalAveragePool", inputs);
  } else if (type == "lrn") {
    node = Node(id, "LRN", inputs);
    AddInt(node, "size", Int(spec, "size", 5));
    AddFloat(node, "alpha", Float(spec, "alpha", 1e-4));
    AddFloat(node, "beta", Float(spec, "beta", 0.75));
    AddFloat(node, "bias", Float(spec, "k", 1.0));
  } else if (type == "dropout") {
    onnx::TensorProto* ratio = graph_->add_initializer();
    ratio->set_name(name + ".ratio");
    ratio->set_data_type(onnx::TensorProto::FLOAT);
    ratio->add_float_data(static_cast<float>(Float(spec, "ratio", 0.5)));
    inputs.push_back(ratio->name());
    node = Node(id, "Dropout", inputs);
  } else if (type == "concat" || type == "add") {
    for (size_t k = 1; k < inputs.size(); ++k) {
      if (values_[s_.layers[id].inputs[k]].second != rank) {
        return InvalidArgument("layer '" + name + "' joins images and flattened features");
      }
    }
    if (type == "concat") {
      node = Node(id, "Concat", inputs);
      AddInt(node, "axis", 1);
    } else {
      // Stochastic depth: inference scales the branch by its survival.
      const float survival = static_cast<float>(Float(spec, "survival", 1.0));
      if (survival < 1) {
        onnx::NodeProto* scaled =
            Node(id, "Mul", {inputs[0], FloatConstant(id, "survival", {survival}, {})});
        scaled->set_name(name + "/scaled");
        scaled->add_output(name + "/scaled");
        inputs[0] = name + "/scaled";
      }
      // ONNX's Add takes two inputs: more are summed left to right, as
      // spill's add sums them, one Add each.
      std::string sum = inputs[0];
      for (size_t k = 1; k + 1 < inputs.size(); ++k) {
        onnx::NodeProto* partial = Node(id, "Add", {sum, inputs[k]});
        sum = name + "/sum" + std::to_string(k);
        partial->set_name(sum);
        partial->add_output(sum);
      }
      node = Node(id, "Add", {sum, inputs.back()});
    }
  } else {
    return InvalidArgument("layer '" + name + "': type '" + type + "' has no ONNX export");
  }
  node->add_output(Out(id, rank));
  return Status::Ok();
}

constexpr int64_t kOnnxIrVersion = 8;  // what libonnx 1.12 writes

StatusOr<onnx::ModelProto> Exporter::Run() {
  model_.set_ir_version(kOnnxIrVersion);
  model_.set_producer_name("spill");
  onnx::OperatorSetIdProto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  graph_ = model_.mutable_graph();
  graph_->set_name(net_.name());
  for (int id : s_.route) SPILL_RETURN_IF_ERROR(Layer(id));
  if (scores_tensor_ == kNoTensor) {
    return InvalidArgument("network '" + net_.name() + "' has no loss layer to take scores from");
  }
  // The scores leave the graph under their own name, through an Identity -
  // unless the layer computing them is named so already (char-rnn's
  // classifier, `scores`); a layer of that name elsewhere moves the output
  // to `scores.output` (ONNX names each value once).
  std::string output = "scores";
  bool taken = false;
  for (int id = 0; id < net_.num_layers(); ++id) taken = taken || net_.layer(id).name() == output;
  if (scores_ != output) {
    if (taken) output = "scores.output";
    Node(net_.loss_layers()[0], "Identity", {scores_})->add_output(output);
  }
  onnx::ValueInfoProto* out = graph_->add_output();
  out->set_name(output);
  auto* type = out->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  const Shape& shape = s_.tensors[scores_tensor_].shape;
  type->mutable_shape()->add_dim()->set_dim_param("N");
  std::vector<int64_t> dims = {shape.c(), shape.h(), shape.w()};
  if (scores_rank_ == 2) dims = {shape.c()};
  for (int64_t d : dims) type->mutable_shape()->add_dim()->set_dim_value(d);
  SPILL_RETURN_IF_ERROR(CheckOnnx(model_));
  return std::move(model_);
}

}  // namespace onnx_export

StatusOr<onnx::ModelProto> ExportOnnx(const Net& net, const NpzArchive& params,
                                      const std::string& label) {
  // As the checkpoint loader does: a transposed or flattened weight has the
  // right number of values in the wrong shape.
  SPILL_RETURN_IF_ERROR(CheckParameterArrays(params, label, net));
  return onnx_export::Exporter(net, params, label).Run();
}

Status CheckOnnx(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return Internal(std::string("onnx::checker rejects the exported model: ") + e.what());
  }
  return Status::Ok();
}

Status WriteOnnxFile(const std::string& path, const onnx::ModelProto& model) {
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return Internal("the exported model does not serialize (over 2 GiB?)");
  }
  return WriteFileAtomically(path, bytes, "ONNX model");
}

}  // namespace spill
