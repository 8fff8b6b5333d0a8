// The ONNX exporter's Swin layers, written as torchvision's Swin exports
// (onnx_import_windows.cc reads them back as the same layers), on the
// channels-last view of spill's image:
//
//   window_attention  x (N, 3C, H, W) -> Transpose (N, H, W, 3C) -> torch.roll
//                     by -s along H and W (Slice + Concat) -> Reshape (N, H/w,
//                     w, W/w, w, 3C), Transpose [0 1 3 2 4 5], Reshape (N nW,
//                     T, 3C) -> Reshape (N nW, T, 3, heads, d), Transpose
//                     [2 0 3 1 4], Gather 0, 1, 2 -> MatMul(Q d^-1/2, K^T)
//                     (cosine: MatMul of the normalized Q and K (ReduceL2,
//                     Clip, Div) times Exp(Clip(logit_scale, max ln 100)))
//                     + the bias (1, heads, T, T) gathered from the table
//                     [Reshape (N, nW, heads, T, T) + the mask (1, nW, 1, T,
//                     T), Reshape back] -> Softmax -> MatMul by V -> Transpose
//                     [0 2 1 3], Reshape (N nW, T, C) -> the windows merged
//                     and rolled back -> Transpose (N, C, H, W); `grid`
//                     (MaxViT's grid, which has no roll): Reshape (N, w, H/w,
//                     w, W/w, 3C), Transpose [0 2 4 1 3 5] and back by
//                     Transpose [0 3 1 4 2 5]; `scale` multiplies Q instead
//                     of d^-1/2
//   space_to_depth    x (N, C, H, W) -> Transpose (N, H, W, C) -> the b x b
//                     strided slices x[:, dy::b, dx::b, :], dx major ->
//                     Concat over the channels -> Transpose (N, b b C, H/b,
//                     W/b)
#include <cmath>

#include "framework/onnx/onnx_exporter.h"
#include "framework/onnx/onnx_windows.h"

namespace spill {
namespace onnx_export {

// Slice + Concat along `axis` of (N, H, W, C) `v`: torch.roll by -`shift`.
std::string Exporter::Roll(int id, const std::string& v, int64_t axis, int64_t extent,
                           int64_t shift, const std::string& step) {
  const std::string& name = net_.layer(id).name();
  const std::string a = std::to_string(axis);
  Named(Node(id, "Slice",
             {v, IntConstant(id, step + "_tail_start" + a, {shift}),
              IntConstant(id, step + "_tail_end" + a, {extent}),
              IntConstant(id, step + "_axis" + a, {axis})}),
        name, step + "_tail" + a);
  Named(Node(id, "Slice",
             {v, IntConstant(id, step + "_head_start" + a, {0}),
              IntConstant(id, step + "_head_end" + a, {shift}), name + "." + step + "_axis" + a}),
        name, step + "_head" + a);
  AddInt(
      Named(Node(id, "Concat", {name + "/" + step + "_tail" + a, name + "/" + step + "_head" + a}),
            name, step + "_rolled" + a),
      "axis", axis);
  return name + "/" + step + "_rolled" + a;
}

Status Exporter::WindowAttention(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const LayerSpec& spec = net_.spec(id);
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t heads = Int(spec, "heads", 1), w = Int(spec, "window", 1);
  const int64_t c = in.c() / 3, d = c / heads, h = in.h(), wd = in.w(), t = w * w;
  const int64_t windows = (h / w) * (wd / w);
  const bool cosine = Bool(spec, "cosine", false), grid = Bool(spec, "grid", false);
  // As the layer: an axis one window spans is not rolled.
  const int64_t shift = Int(spec, "shift", 0);
  const int64_t shift_h = h > w ? shift : 0, shift_w = wd > w ? shift : 0;
  if (shift_h != shift_w) {
    return InvalidArgument(label_ + ": layer '" + name + "' (window_attention) shifts its " +
                           std::to_string(h) + "x" + std::to_string(wd) +
                           " image along one axis only; ONNX's form of it shifts both");
  }
  const int64_t s = shift_h;
  auto out = [&](const std::string& step) { return name + "/" + step; };
  AddInts(Named(Node(id, "Transpose", {x}), name, "channels_last"), "perm", {0, 2, 3, 1});
  std::string image = out("channels_last");
  if (s > 0) image = Roll(id, Roll(id, image, 1, h, s, "roll"), 2, wd, s, "roll");
  // Windows: (N, H/w, w, W/w, w) with the window's axes second and fourth;
  // a grid: (N, w, H/w, w, W/w), token (r, c) of group (a, b) at pixel
  // (r H/w + a, c W/w + b).
  const std::vector<int64_t> split = grid ? std::vector<int64_t>{-1, w, h / w, w, wd / w, 3 * c}
                                          : std::vector<int64_t>{-1, h / w, w, wd / w, w, 3 * c};
  Named(Node(id, "Reshape", {image, IntConstant(id, "windows_shape", split)}), name, "windows6");
  AddInts(Named(Node(id, "Transpose", {out("windows6")}), name, "windows_t"), "perm",
          grid ? std::vector<int64_t>{0, 2, 4, 1, 3, 5} : std::vector<int64_t>{0, 1, 3, 2, 4, 5});
  Named(Node(id, "Reshape", {out("windows_t"), IntConstant(id, "tokens_shape", {-1, t, 3 * c})}),
        name, "windows");
  Named(Node(id, "Reshape", {out("windows"), IntConstant(id, "heads_shape", {-1, t, 3, heads, d})}),
        name, "heads");
  AddInts(Named(Node(id, "Transpose", {out("heads")}), name, "qkv"), "perm", {2, 0, 3, 1, 4});
  GatherQkv(id, out("qkv"), 0);
  std::string q = out("q"), k = out("k");
  if (cosine) {
    for (std::string* v : {&q, &k}) {
      const std::string part = *v == out("q") ? "q" : "k";
      onnx::NodeProto* norm = Named(Node(id, "ReduceL2", {*v}), name, part + "_norm");
      AddInts(norm, "axes", {-1});
      AddInt(norm, "keepdims", 1);
      Named(Node(id, "Clip", {out(part + "_norm"), FloatConstant(id, part + "_eps", {1e-12f}, {})}),
            name, part + "_clipped");
      Named(Node(id, "Div", {*v, out(part + "_clipped")}), name, part + "_unit");
      *v = out(part + "_unit");
    }
  } else {
    const double given = Float(spec, "scale", 0.0);  // as the layer: d^-1/2 without
    const float scale =
        static_cast<float>(given > 0 ? given : std::pow(static_cast<double>(d), -0.5));
    Named(Node(id, "Mul", {q, FloatConstant(id, "scale", {scale}, {})}), name, "q_scaled");
    q = out("q_scaled");
  }
  AddInts(Named(Node(id, "Transpose", {k}), name, "k_t"), "perm", {0, 1, 3, 2});
  Named(Node(id, "MatMul", {q, out("k_t")}), name, "products");
  std::string scores = out("products");
  if (cosine) {
    SPILL_ASSIGN_OR_RETURN(std::string logit, Initializer(id, 1, "logit_scale", {heads, 1, 1}));
    Named(Node(id, "Clip",
               {logit, "",
                FloatConstant(id, "max_logit", {static_cast<float>(std::log(100.0))}, {})}),
          name, "logit_clipped");
    Named(Node(id, "Exp", {out("logit_clipped")}), name, "logit_scale");
    Named(Node(id, "Mul", {scores, out("logit_scale")}), name, "scaled");
    scores = out("scaled");
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<float> table, ParamValues(id, 0));
  std::vector<float> bias(heads * t * t);
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t a = 0; a < t; ++a) {
      for (int64_t b = 0; b < t; ++b) {
        bias[(head * t + a) * t + b] = table[onnx_windows::RelativeIndex(w, a, b) * heads + head];
      }
    }
  }
  Named(Node(id, "Add", {scores, RawConstant(id, "bias", bias, {1, heads, t, t})}), name, "biased");
  scores = out("biased");
  if (s > 0) {
    std::vector<float> mask(windows * t * t);
    for (int64_t k2 = 0; k2 < windows; ++k2) {
      for (int64_t a = 0; a < t; ++a) {
        for (int64_t b = 0; b < t; ++b)
          mask[(k2 * t + a) * t + b] = onnx_windows::ShiftMask(h, wd, w, s, k2, a, b);
      }
    }
    Named(Node(id, "Reshape", {scores, IntConstant(id, "per_window", {-1, windows, heads, t, t})}),
          name, "per_window");
    Named(
        Node(id, "Add", {out("per_window"), RawConstant(id, "mask", mask, {1, windows, 1, t, t})}),
        name, "masked");
    Named(Node(id, "Reshape", {out("masked"), IntConstant(id, "scores_shape", {-1, heads, t, t})}),
          name, "masked_scores");
    scores = out("masked_scores");
  }
  AddInt(Named(Node(id, "Softmax", {scores}), name, "probabilities"), "axis", -1);
  Named(Node(id, "MatMul", {out("probabilities"), out("v")}), name, "heads_out");
  AddInts(Named(Node(id, "Transpose", {out("heads_out")}), name, "tokens_heads"), "perm",
          {0, 2, 1, 3});
  Named(Node(id, "Reshape", {out("tokens_heads"), IntConstant(id, "merged", {-1, t, c})}), name,
        "merged");
  Named(
      Node(id, "Reshape", {out("merged"), IntConstant(id, "image6", {-1, h / w, wd / w, w, w, c})}),
      name, "image6");
  AddInts(Named(Node(id, "Transpose", {out("image6")}), name, "image_t"), "perm",
          grid ? std::vector<int64_t>{0, 3, 1, 4, 2, 5} : std::vector<int64_t>{0, 1, 3, 2, 4, 5});
  Named(Node(id, "Reshape", {out("image_t"), IntConstant(id, "image_shape", {-1, h, wd, c})}), name,
        "image");
  image = out("image");
  if (s > 0) image = Roll(id, Roll(id, image, 1, h, h - s, "back"), 2, wd, wd - s, "back");
  AddInts(Node(id, "Transpose", {image}), "perm", {0, 3, 1, 2});
  graph_->mutable_node(graph_->node_size() - 1)->add_output(name);
  return Status::Ok();
}

Status Exporter::SpaceToDepth(int id, const std::string& x) {
  const std::string& name = net_.layer(id).name();
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const int64_t b = Int(net_.spec(id), "block_size", 2);
  AddInts(Named(Node(id, "Transpose", {x}), name, "channels_last"), "perm", {0, 2, 3, 1});
  std::vector<std::string> parts;
  for (int64_t k = 0; k < b * b; ++k) {
    const int64_t dx = k / b, dy = k % b;
    const std::string part = std::to_string(k);
    Named(
        Node(id, "Slice",
             {name + "/channels_last", IntConstant(id, "rows_start" + part, {dy}),
              IntConstant(id, "rows_end" + part, {in.h()}),
              IntConstant(id, "rows_axis" + part, {1}), IntConstant(id, "rows_step" + part, {b})}),
        name, "rows" + part);
    Named(
        Node(id, "Slice",
             {name + "/rows" + part, IntConstant(id, "cols_start" + part, {dx}),
              IntConstant(id, "cols_end" + part, {in.w()}),
              IntConstant(id, "cols_axis" + part, {2}), IntConstant(id, "cols_step" + part, {b})}),
        name, "part" + part);
    parts.push_back(name + "/part" + part);
  }
  AddInt(Named(Node(id, "Concat", parts), name, "merged"), "axis", 3);
  AddInts(Node(id, "Transpose", {name + "/merged"}), "perm", {0, 3, 1, 2});
  graph_->mutable_node(graph_->node_size() - 1)->add_output(name);
  return Status::Ok();
}

}  // namespace onnx_export
}  // namespace spill
