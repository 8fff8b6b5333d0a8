// The ONNX exporter's layers of mobile and modern networks and
// encoder-decoders: each as the ONNX operator of the same function, or as
// the chain PyTorch writes for it, which the importer reads back as the same
// layer (so a network exported and imported again scores bit-identically).
#include <set>

#include "framework/onnx/onnx_exporter.h"

namespace spill {
namespace onnx_export {
namespace {

// A node of a chain producing `<layer>/<output>`, named `<layer>/<name>`
// unless `name` is empty: the node the importer names its layer after keeps
// the layer's name.
onnx::NodeProto* Step(onnx::NodeProto* node, const std::string& layer, const std::string& output,
                      const std::string& name = "") {
  if (!name.empty()) node->set_name(layer + "/" + name);
  node->add_output(layer + "/" + output);
  return node;
}

}  // namespace

std::string Exporter::FloatConstant(int id, const std::string& suffix,
                                    const std::vector<float>& values,
                                    const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(net_.layer(id).name() + "." + suffix);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return t->name();
}

std::string Exporter::IntConstant(int id, const std::string& suffix,
                                  const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(net_.layer(id).name() + "." + suffix);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return t->name();
}

// The activations: the ONNX operator of the same function, or PyTorch's
// chain for it (SiLU as x * Sigmoid(x), GELU through Erf).
Status Exporter::Activation(int id, const std::string& x) {
  const std::string& type = net_.layer(id).type();
  const LayerSpec& spec = net_.spec(id);
  const std::string& name = net_.layer(id).name();
  onnx::NodeProto* node = nullptr;
  if (type == "relu6" || type == "clip") {
    const bool relu6 = type == "relu6";
    const float low = static_cast<float>(relu6 ? 0.0 : Float(spec, "min", 0.0));
    const float high = static_cast<float>(relu6 ? 6.0 : Float(spec, "max", 6.0));
    node = Node(id, "Clip",
                {x, FloatConstant(id, "min", {low}, {}), FloatConstant(id, "max", {high}, {})});
  } else if (type == "hard_sigmoid") {
    node = Node(id, "HardSigmoid", {x});
    AddFloat(node, "alpha", Float(spec, "alpha", 1.0 / 6));
    AddFloat(node, "beta", Float(spec, "beta", 0.5));
  } else if (type == "hard_swish") {
    node = Node(id, "HardSwish", {x});
  } else if (type == "sigmoid") {
    node = Node(id, "Sigmoid", {x});
  } else if (type == "tanh") {
    node = Node(id, "Tanh", {x});
  } else if (type == "silu") {
    Step(Node(id, "Sigmoid", {x}), name, "sigmoid");
    node = Node(id, "Mul", {x, name + "/sigmoid"});
    node->set_name(name + "/gate");
  } else {
    return Gelu(id, x);
  }
  node->add_output(name);
  return Status::Ok();
}

// x * (1 + erf(x / sqrt 2)) / 2, as PyTorch writes the exact GELU.
Status Exporter::Gelu(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  constexpr float kSqrt2 = 1.41421356f;
  Step(Node(id, "Div", {x, FloatConstant(id, "sqrt2", {kSqrt2}, {})}), name, "div");
  Step(Node(id, "Erf", {name + "/div"}), name, "erf", "erf");
  Step(Node(id, "Add", {name + "/erf", FloatConstant(id, "one", {1.0f}, {})}), name, "add", "add");
  Step(Node(id, "Mul", {x, name + "/add"}), name, "mul", "mul");
  onnx::NodeProto* half = Node(id, "Mul", {name + "/mul", FloatConstant(id, "half", {0.5f}, {})});
  half->set_name(name + "/half");
  half->add_output(name);
  return Status::Ok();
}

// Reshape to (N, groups, C / groups, H, W), swap the two channel axes,
// reshape back: ShuffleNet's chain. A 0 keeps the batch as it is.
Status Exporter::ChannelShuffle(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t groups = Int(net_.spec(id), "groups", 1);
  Step(Node(id, "Reshape",
            {x, IntConstant(id, "grouped", {0, groups, in.c() / groups, in.h(), in.w()})}),
       name, "grouped", "grouped");
  AddInts(Step(Node(id, "Transpose", {name + "/grouped"}), name, "transposed", "transposed"),
          "perm", {0, 2, 1, 3, 4});
  Node(id, "Reshape", {name + "/transposed", IntConstant(id, "shape", {0, in.c(), in.h(), in.w()})})
      ->add_output(name);
  return Status::Ok();
}

// LayerNormalization over the last axis (opset 17): an image's channels
// come last through a channels-last view and back.
Status Exporter::LayerNorm(int id, const std::string& x, int rank) {
  const std::string& name = net_.layer(id).name();
  const int64_t c = s_.tensors[s_.layers[id].params[0]].shape.c();
  SPILL_ASSIGN_OR_RETURN(std::string gamma, Initializer(id, 0, "weight", {c}));
  SPILL_ASSIGN_OR_RETURN(std::string beta, Initializer(id, 1, "bias", {c}));
  std::string in = x;
  if (rank == 4) {
    AddInts(Step(Node(id, "Transpose", {x}), name, "nhwc", "nhwc"), "perm", {0, 2, 3, 1});
    in = name + "/nhwc";
  }
  onnx::NodeProto* norm = Node(id, "LayerNormalization", {in, gamma, beta});
  AddInt(norm, "axis", -1);
  AddFloat(norm, "epsilon", Float(net_.spec(id), "eps", 1e-5));
  if (rank == 2) {
    norm->add_output(name);
    return Status::Ok();
  }
  norm->add_output(name + "/norm");
  onnx::NodeProto* back = Node(id, "Transpose", {name + "/norm"});
  back->set_name(name + "/nchw");
  AddInts(back, "perm", {0, 3, 1, 2});
  back->add_output(name);
  return Status::Ok();
}

// y = gamma x (+ beta): Mul (and Add) by per-channel constants.
Status Exporter::Scale(int id, const std::string& x, int rank) {
  const std::string& name = net_.layer(id).name();
  const int64_t c = s_.tensors[s_.layers[id].params[0]].shape.c();
  const std::vector<int64_t> dims =
      rank == 4 ? std::vector<int64_t>{1, c, 1, 1} : std::vector<int64_t>{1, c};
  SPILL_ASSIGN_OR_RETURN(std::string gamma, Initializer(id, 0, "weight", dims));
  onnx::NodeProto* mul = Node(id, "Mul", {x, gamma});
  if (s_.layers[id].params.size() == 1) {
    mul->add_output(name);
    return Status::Ok();
  }
  mul->add_output(name + "/scaled");
  SPILL_ASSIGN_OR_RETURN(std::string beta, Initializer(id, 1, "bias", dims));
  onnx::NodeProto* add = Node(id, "Add", {name + "/scaled", beta});
  add->set_name(name + "/shift");
  add->add_output(name);
  return Status::Ok();
}

// Resize by the whole factors of the output's size over the input's:
// nearest takes input pixel floor(o / factor), bilinear PyTorch's
// half-pixel centers (or the corners).
Status Exporter::Upsample(int id, const std::string& x) {
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const Shape& out = s_.tensors[s_.layers[id].outputs[0]].shape;
  if (out.h() % in.h() != 0 || out.w() % in.w() != 0) {
    return InvalidArgument("layer '" + net_.layer(id).name() + "' (upsample) resizes " +
                           std::to_string(in.h()) + "x" + std::to_string(in.w()) + " to " +
                           std::to_string(out.h()) + "x" + std::to_string(out.w()) +
                           "; ONNX export takes whole factors");
  }
  const std::vector<float> scales = {1, 1, static_cast<float>(out.h() / in.h()),
                                     static_cast<float>(out.w() / in.w())};
  onnx::NodeProto* node = Node(id, "Resize", {x, "", FloatConstant(id, "scales", scales, {4})});
  const LayerSpec& spec = net_.spec(id);
  const YAML::Node mode = Param(spec, "mode");
  if (mode.IsDefined() && mode.IsScalar() && mode.Scalar() == "bilinear") {
    AddString(node, "mode", "linear");
    AddString(node, "coordinate_transformation_mode",
              Bool(spec, "align_corners", false) ? "align_corners" : "pytorch_half_pixel");
  } else {
    AddString(node, "mode", "nearest");
    AddString(node, "coordinate_transformation_mode", "asymmetric");
    AddString(node, "nearest_mode", "floor");
  }
  node->add_output(net_.layer(id).name());
  return Status::Ok();
}

// ConvTranspose with the weight as spill stores it, (C_in, C_out / groups,
// kh, kw), which is ONNX's layout.
Status Exporter::TransposedConvolution(int id, const std::string& x) {
  const LayerSpec& spec = net_.spec(id);
  const Shape& w = s_.tensors[s_.layers[id].params[0]].shape;
  SPILL_ASSIGN_OR_RETURN(std::string weight,
                         Initializer(id, 0, "weight", {w.n(), w.c(), w.h(), w.w()}));
  std::vector<std::string> inputs = {x, weight};
  if (s_.layers[id].params.size() > 1) {
    const int64_t filters = s_.tensors[s_.layers[id].outputs[0]].shape.c();
    SPILL_ASSIGN_OR_RETURN(std::string bias, Initializer(id, 1, "bias", {filters}));
    inputs.push_back(bias);
  }
  onnx::NodeProto* node = Node(id, "ConvTranspose", inputs);
  const std::vector<int64_t> pad = Pair(spec, "pad", {0, 0});
  AddInts(node, "kernel_shape", {w.h(), w.w()});
  AddInts(node, "strides", Pair(spec, "stride", {1, 1}));
  AddInts(node, "pads", {pad[0], pad[1], pad[0], pad[1]});
  AddInts(node, "output_padding", Pair(spec, "output_pad", {0, 0}));
  AddInts(node, "dilations", Pair(spec, "dilation", {1, 1}));
  AddInt(node, "group", Int(spec, "groups", 1));
  node->add_output(net_.layer(id).name());
  return Status::Ok();
}

// Constant padding of H and W: [h, w] or [top, left, bottom, right].
Status Exporter::Pad(int id, const std::string& x) {
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const Shape& out = s_.tensors[s_.layers[id].outputs[0]].shape;
  const YAML::Node given = Param(net_.spec(id), "pad");
  int64_t top = 0, left = 0;
  if (given.IsSequence() && given.size() == 4) {
    top = given[0].as<int64_t>();
    left = given[1].as<int64_t>();
  } else {
    const std::vector<int64_t> pad = Pair(net_.spec(id), "pad", {0, 0});
    top = pad[0];
    left = pad[1];
  }
  const int64_t bottom = out.h() - in.h() - top, right = out.w() - in.w() - left;
  const float value = static_cast<float>(Float(net_.spec(id), "value", 0.0));
  Node(id, "Pad",
       {x, IntConstant(id, "pads", {0, 0, top, left, 0, 0, bottom, right}),
        FloatConstant(id, "value", {value}, {})})
      ->add_output(net_.layer(id).name());
  return Status::Ok();
}

Status Exporter::Vision(int id, const std::vector<std::string>& inputs, int rank, bool* done) {
  static const std::set<std::string> kActivations = {
      "relu6", "clip", "hard_sigmoid", "hard_swish", "sigmoid", "silu", "gelu", "tanh"};
  const std::string& type = net_.layer(id).type();
  const std::string& x = inputs[0];
  *done = true;
  if (kActivations.count(type)) return Activation(id, x);
  if (type == "channel_shuffle") return ChannelShuffle(id, x);
  if (type == "layer_norm") return LayerNorm(id, x, rank);
  if (type == "scale") return Scale(id, x, rank);
  if (type == "upsample") return Upsample(id, x);
  if (type == "transposed_convolution") return TransposedConvolution(id, x);
  if (type == "pad") return Pad(id, x);
  if (type == "attention") return Attention(id, x);
  if (type == "positions") return Positions(id, x);
  if (type == "tokens") return Tokens(id, x);
  if (type == "class_token") return ClassToken(id, x);
  if (type == "token") return Token(id, x);
  if (type == "window_attention") return WindowAttention(id, x);
  if (type == "space_to_depth") return SpaceToDepth(id, x);
  if (type == "multiply" || type == "broadcast_add") {
    Node(id, type == "multiply" ? "Mul" : "Add", inputs)->add_output(net_.layer(id).name());
    return Status::Ok();
  }
  if (type == "slice") {
    const int64_t begin = Int(net_.spec(id), "begin", 0), end = Int(net_.spec(id), "end", 1);
    Node(id, "Slice",
         {x, IntConstant(id, "starts", {begin}), IntConstant(id, "ends", {end}),
          IntConstant(id, "axes", {1})})
        ->add_output(net_.layer(id).name());
    return Status::Ok();
  }
  *done = false;
  return Status::Ok();
}

}  // namespace onnx_export
}  // namespace spill
