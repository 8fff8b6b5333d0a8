// The ONNX exporter's transformer layers, written with standard operators
// in the forms the importer reads back as the same layers
// (onnx_import_attention.cc). A sequence N x C x 1 x T is an ONNX
// (N, C, 1, T) value between layers, as in onnx_export_sequence.cc:
//
//   attention    x (N, 3C, 1, T) -> Reshape (N, 3, heads, d, T) -> Gather
//                0, 1, 2 along axis 1: Q, K^T, V as (N, heads, d, T) ->
//                MatMul(Transpose(Q) (N, heads, T, d) x 1/sqrt(d), K^T)
//                [+ the causal mask, 0 and -inf (T, T)] -> Softmax(-1) ->
//                MatMul by Transpose(V) -> Transpose (N, heads, d, T) ->
//                Reshape (N, C, 1, T)
//   positions    Add of the table's first T positions (1, C, 1, T): imported,
//                a table of length T
//   tokens       Reshape (N, C, H W) -> Reshape (N, C, 1, H W)
//   class_token  Concat along the positions of the token (1, C, 1, 1)
//                expanded over the batch (Expand by (N, C, 1, 1) from Shape)
//   token        Reshape (N, C, T) -> Gather of the position along axis 2 ->
//                Unsqueeze (N, C, 1, 1)
#include <cmath>
#include <limits>

#include "framework/onnx/onnx_exporter.h"

namespace spill {
namespace onnx_export {
namespace {

// The node the importer names its layer after: named as the layer.
onnx::NodeProto* Main(onnx::NodeProto* node, const std::string& layer, const std::string& step) {
  node->set_name(layer);
  node->add_output(layer + "/" + step);
  return node;
}

}  // namespace

void Exporter::GatherQkv(int id, const std::string& stacked, int64_t axis) {
  const std::string& name = net_.layer(id).name();
  const char* parts[] = {"q", "k", "v"};
  for (int64_t p = 0; p < 3; ++p) {
    onnx::TensorProto* index = graph_->add_initializer();
    index->set_name(name + ".index_" + parts[p]);
    index->set_data_type(onnx::TensorProto::INT64);
    index->add_int64_data(p);
    AddInt(Named(Node(id, "Gather", {stacked, index->name()}), name, parts[p]), "axis", axis);
  }
}

Status Exporter::Attention(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t heads = Int(net_.spec(id), "heads", 1);
  const int64_t width = in.c() / 3, depth = width / heads, steps = in.w();
  auto out = [&](const std::string& step) { return name + "/" + step; };
  Named(Node(id, "Reshape", {x, IntConstant(id, "heads_shape", {0, 3, heads, depth, steps})}), name,
        "heads");
  GatherQkv(id, out("heads"), 1);
  AddInts(Named(Node(id, "Transpose", {out("q")}), name, "q_rows"), "perm", {0, 1, 3, 2});
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(depth)));
  Named(Node(id, "Mul", {out("q_rows"), FloatConstant(id, "scale", {scale}, {})}), name,
        "q_scaled");
  Named(Node(id, "MatMul", {out("q_scaled"), out("k")}), name, "scores");
  std::string scores = out("scores");
  if (Bool(net_.spec(id), "causal", false)) {
    std::vector<float> mask(steps * steps, 0.0f);
    for (int64_t i = 0; i < steps; ++i) {
      for (int64_t j = i + 1; j < steps; ++j) {
        mask[i * steps + j] = -std::numeric_limits<float>::infinity();
      }
    }
    Named(Node(id, "Add", {scores, RawConstant(id, "causal_mask", mask, {steps, steps})}), name,
          "masked");
    scores = out("masked");
  }
  AddInt(Named(Node(id, "Softmax", {scores}), name, "probabilities"), "axis", -1);
  AddInts(Named(Node(id, "Transpose", {out("v")}), name, "v_rows"), "perm", {0, 1, 3, 2});
  Named(Node(id, "MatMul", {out("probabilities"), out("v_rows")}), name, "heads_out");
  AddInts(Named(Node(id, "Transpose", {out("heads_out")}), name, "heads_channels"), "perm",
          {0, 1, 3, 2});
  onnx::NodeProto* merge =
      Node(id, "Reshape", {out("heads_channels"), IntConstant(id, "shape", {0, width, 1, steps})});
  merge->add_output(name);
  return Status::Ok();
}

Status Exporter::Positions(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t c = in.c(), steps = in.w();
  const int64_t length = s_.tensors[s_.layers[id].params[0]].shape.w();
  SPILL_ASSIGN_OR_RETURN(std::vector<float> table, ParamValues(id, 0));
  std::vector<float> used(c * steps);  // the first T positions of each channel
  for (int64_t k = 0; k < c; ++k) {
    std::copy(table.begin() + k * length, table.begin() + k * length + steps,
              used.begin() + k * steps);
  }
  Node(id, "Add", {x, RawConstant(id, "weight", used, {1, c, 1, steps})})->add_output(name);
  return Status::Ok();
}

Status Exporter::Tokens(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t c = in.c(), steps = in.h() * in.w();
  Main(Node(id, "Reshape", {x, IntConstant(id, "sequence", {0, c, steps})}), name, "sequence");
  Node(id, "Reshape", {name + "/sequence", IntConstant(id, "shape", {0, c, 1, steps})})
      ->add_output(name);
  return Status::Ok();
}

Status Exporter::ClassToken(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const int64_t c = s_.tensors[s_.layers[id].inputs[0]].shape.c();
  SPILL_ASSIGN_OR_RETURN(std::string token, Initializer(id, 0, "weight", {1, c, 1, 1}));
  Named(Node(id, "Shape", {x}), name, "shape");
  onnx::NodeProto* batch = Node(
      id, "Slice", {name + "/shape", IntConstant(id, "start", {0}), IntConstant(id, "end", {1})});
  Named(batch, name, "batch");
  AddInt(Named(Node(id, "Concat", {name + "/batch", IntConstant(id, "per_image", {c, 1, 1})}), name,
               "expanded_shape"),
         "axis", 0);
  Named(Node(id, "Expand", {token, name + "/expanded_shape"}), name, "tokens");
  AddInt(Node(id, "Concat", {name + "/tokens", x}), "axis", 3);
  graph_->mutable_node(graph_->node_size() - 1)->add_output(name);
  return Status::Ok();
}

Status Exporter::Token(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  int64_t index = Int(net_.spec(id), "index", 0);
  if (index < 0) index += in.w();
  Named(Node(id, "Reshape", {x, IntConstant(id, "sequence", {0, in.c(), in.w()})}), name,
        "sequence");
  onnx::TensorProto* position = graph_->add_initializer();
  position->set_name(name + ".position");
  position->set_data_type(onnx::TensorProto::INT64);
  position->add_int64_data(index);
  AddInt(Main(Node(id, "Gather", {name + "/sequence", position->name()}), name, "taken"), "axis",
         2);
  Node(id, "Unsqueeze", {name + "/taken", IntConstant(id, "axes", {2, 3})})->add_output(name);
  return Status::Ok();
}

}  // namespace onnx_export
}  // namespace spill
