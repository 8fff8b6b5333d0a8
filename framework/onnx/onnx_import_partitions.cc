// The ONNX importer's MaxViT (torchvision's maxvit_t). Each of its blocks
// attends twice in a partitioned view of the image, with the layer norms,
// the MLP and the residual adds computed in that view:
//
//   X (N, C, H, W) -> Reshape (N, C, H/P, P, W/P, P), Transpose
//     [0 2 4 3 5 1], Reshape (N, G, P P, C)        WindowPartition: blocks
//     [-> Transpose [0 2 1 3]]                    SwapAxes: grid attention
//   ... LayerNormalization, the attention, Add, LayerNormalization, MatMul,
//       GELU, MatMul, Add ...
//     [-> Transpose [0 2 1 3]] -> Reshape (N, H/P, W/P, P, P, C), Transpose
//     [0 5 1 3 2 4], Reshape (N, C, H, W)          WindowDepartition
//
// The partitions are views of spill's image (Value::block, Value::swapped):
// they write no layer, and the layers between them work per pixel. The
// attention (RelativePositionalMultiHeadAttention) exports as
//
//   Y (N, G, T, C) -> MatMul + Add (to_qkv), Slice [0, C), [C, 2C), [2C, 3C)
//     of the last axis, each Reshape (N, G, T, heads, d), Transpose
//     [0 1 3 2 4] -> Einsum("BGHID,BGHJD->BGHIJ", Q, K d^-1/2) + B,
//     B: (1, heads, T, T) -> Softmax -> Einsum("BGHIJ,BGHJD->BGHID", P, V)
//     -> Transpose [0 1 3 2 4], Reshape (N, G, T, C), MatMul + Add (merge)
//
// and becomes a 1x1 convolution, window_attention (windows of P, or with
// `grid: true` when it reads the swapped view: T = (H/P)(W/P) pixels spread
// P apart) and a 1x1 convolution. B is read back into the table as Swin's
// is (onnx_import_windows.cc).
#include <cctype>
#include <cmath>

#include "framework/onnx/onnx_importer.h"
#include "framework/onnx/onnx_node_reading.h"

namespace spill {
namespace onnx_import {
namespace {

// `equation` with its letters renamed a, b, c... in order of appearance and
// its spaces dropped: "B G H I D, B G H J D -> B G H I J" is
// "abcde,abcfe->abcdf".
std::string CanonicalEinsum(const std::string& equation) {
  std::string out, letters;
  for (char ch : equation) {
    if (ch == ' ') continue;
    if (!std::isalpha(static_cast<unsigned char>(ch))) {
      out += ch;
      continue;
    }
    size_t k = letters.find(ch);
    if (k == std::string::npos) {
      k = letters.size();
      letters += ch;
    }
    out += static_cast<char>('a' + k);
  }
  return out;
}

bool EinsumIs(const onnx::NodeProto& n, const std::string& canonical) {
  return n.op_type() == "Einsum" && n.input_size() == 2 &&
         CanonicalEinsum(AttrString(n, "equation", "")) == canonical;
}

constexpr char kScores[] = "abcde,abcfe->abcdf";   // Q K^T per group and head
constexpr char kProduct[] = "abcde,abcef->abcdf";  // P V

}  // namespace

void Importer::MarkPartitions() {
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& merge = g.node(i);
    if (merge.op_type() != "Reshape") continue;
    const int t = Producer(InputOf(merge, 0));
    const int split = t >= 0 ? Producer(InputOf(g.node(t), 0)) : -1;
    if (split < 0 || g.node(split).op_type() != "Reshape" ||
        SoleConsumer(OutputOf(g.node(t), 0)) != i ||
        SoleConsumer(OutputOf(g.node(split), 0)) != t) {
      continue;
    }
    const std::vector<int64_t> x = DimsOrEmpty(g_, InputOf(g.node(split), 0));
    const std::vector<int64_t> d6 = DimsOrEmpty(g_, OutputOf(g.node(split), 0));
    const std::vector<int64_t> y = DimsOrEmpty(g_, OutputOf(merge, 0));
    if (x.size() != 4 || d6.size() != 6 || y.size() != 4) continue;
    if (IsPerm(g.node(t), {0, 2, 4, 3, 5, 1})) {  // (N, C, H, W) to (N, G, P P, C)
      const int64_t p = d6[3];
      if (d6[5] != p || d6[1] != x[1] || d6[2] * p != x[2] || d6[4] * p != x[3] ||
          y[1] != d6[2] * d6[4] || y[2] != p * p || y[3] != x[1]) {
        continue;
      }
      partitions_[i] = PartitionStep{InputOf(g.node(split), 0), p, true};
    } else if (IsPerm(g.node(t), {0, 5, 1, 3, 2, 4})) {  // (N, G, P P, C) to (N, C, H, W)
      const int64_t p = d6[3];
      if (d6[4] != p || d6[5] != x[3] || x[1] != d6[1] * d6[2] || x[2] != p * p || y[1] != x[3] ||
          y[2] != d6[1] * p || y[3] != d6[2] * p) {
        continue;
      }
      partitions_[i] = PartitionStep{InputOf(g.node(split), 0), p, false};
    } else {
      continue;
    }
    fused_.insert({split, t});
  }
}

Status Importer::Partition(int node) {
  const PartitionStep& p = partitions_.at(node);
  auto it = values_.find(p.source);
  if (it == values_.end()) {
    return Fail(node, "the partition reads '" + p.source + "', which spill did not import");
  }
  const Value& x = it->second;
  Value v = x;
  if (p.into) {
    if (!x.Spatial() || x.chw[1] % p.block != 0 || x.chw[2] % p.block != 0) {
      return Fail(node, "MaxViT's window partition (blocks of " + std::to_string(p.block) +
                            ") reads '" + p.source + "', which spill does not hold as an image " +
                            "(N, C, H, W) of multiples of the block");
    }
    v.layout = Layout::kNhwc;
    v.block = p.block;
    v.swapped = false;
    v.dims = {(x.chw[1] / p.block) * (x.chw[2] / p.block), p.block * p.block, x.chw[0]};
  } else {
    if (!x.Partitioned() || x.swapped || x.block != p.block) {
      return Fail(node, "MaxViT's window departition (blocks of " + std::to_string(p.block) +
                            ") reads '" + p.source + "', which is not the image partitioned " +
                            "into such blocks (N, G, P P, C)");
    }
    v.layout = Layout::kNchw;
    v.block = 0;
    v.dims = {x.chw[0], x.chw[1], x.chw[2]};
  }
  return ProduceValue(node, 0, v);
}

// From the Softmax back to the scores: an Einsum of Q and K per group and
// head plus a constant bias; false when the scores are not MaxViT's.
bool Importer::FindPartitionChain(int softmax, WindowChain* c) const {
  const onnx::GraphProto& g = g_.graph();
  const onnx::NodeProto& s = g.node(softmax);
  const int add = Producer(InputOf(s, 0));
  if (add < 0 || g.node(add).op_type() != "Add") return false;
  std::set<int> bias_nodes;
  std::optional<std::vector<float>> bias;
  int side = 1;
  while (side >= 0 && !(bias = WeightValues(InputOf(g.node(add), side), &bias_nodes))) --side;
  const int scores = bias ? Producer(InputOf(g.node(add), 1 - side)) : -1;
  if (scores < 0 || !EinsumIs(g.node(scores), kScores)) return false;
  // Q and K, one of them scaled by d^-1/2 (MaxViT scales the keys).
  float scale = 1;
  int operands[2];
  for (int k = 0; k < 2; ++k) {
    operands[k] = Producer(InputOf(g.node(scores), k));
    const int m = operands[k];
    float factor = 0;
    if (m >= 0 && g.node(m).op_type() == "Mul" && scale == 1) {
      const bool second = ScalarConstant(InputOf(g.node(m), 1), &factor);
      if (second || ScalarConstant(InputOf(g.node(m), 0), &factor)) {
        scale = factor;
        c->nodes.insert(m);
        operands[k] = Producer(InputOf(g.node(m), second ? 0 : 1));
      }
    }
  }
  std::string qkv;
  int64_t begins[3] = {-1, -1, -1};
  if (!PartitionHeads(operands[0], c, &qkv, &begins[0]) ||
      !PartitionHeads(operands[1], c, &qkv, &begins[1])) {
    return false;
  }
  // MaxViT's from here on: what does not match is an error, not another chain.
  c->softmax = softmax;
  c->partitioned = true;
  c->nodes.insert({softmax, add, scores});
  c->nodes.insert(bias_nodes.begin(), bias_nodes.end());
  std::string why, probabilities = OutputOf(s, 0);
  const int dropout = OnlyReader(probabilities, "Dropout");
  if (dropout >= 0) {
    c->nodes.insert(dropout);
    probabilities = OutputOf(g.node(dropout), 0);
  }
  const int product = OnlyReader(probabilities, "Einsum");
  const int64_t ch = c->channels, d = ch / c->heads;
  // d^-1/2 is the layer's own; another factor (MaxViT's C^-1/2) its `scale`.
  const double want = 1.0 / std::sqrt(static_cast<double>(d));
  if (std::fabs(scale - want) > 1e-6 * want) c->scale = scale;
  if (product < 0 || !EinsumIs(g.node(product), kProduct) ||
      InputOf(g.node(product), 0) != probabilities) {
    why = "the probabilities are read by other than one Einsum by the values";
  } else if (!PartitionHeads(Producer(InputOf(g.node(product), 1)), c, &qkv, &begins[2])) {
    why = "the values are not a Slice of the same projection, split into the same heads";
  } else if (begins[0] != 0 || begins[1] != ch || begins[2] != 2 * ch) {
    why =
        "the queries, keys and values are not channels [0, C), [C, 2C) and [2C, 3C) of the "
        "projection";
  } else if (!(scale > 0 && scale <= 1e3f)) {
    why = "the scores are scaled by " + std::to_string(scale) + " (spill's window_attention " +
          "scales by a factor in (0, 1000])";
  } else if (PartitionInput(c, qkv, &why) && PartitionOutput(c, product, &why)) {
    const int64_t w = std::lround(std::sqrt(static_cast<double>(c->tokens)));
    c->window = w;
    if (w * w != c->tokens) {
      why = "a partition of " + std::to_string(c->tokens) + " positions is not square";
    } else {
      WindowBias(c, *bias, c->tokens, &why);
    }
  }
  c->error = why;
  return true;
}

// Q, K or V: Transpose [0 1 3 2 4] of a Reshape (N, G, T, heads, d) of a
// Slice of the projection's last axis; its first channel.
bool Importer::PartitionHeads(int transpose, WindowChain* c, std::string* qkv,
                              int64_t* begin) const {
  const onnx::GraphProto& g = g_.graph();
  if (transpose < 0 || !IsPerm(g.node(transpose), {0, 1, 3, 2, 4})) return false;
  const int reshape = Producer(InputOf(g.node(transpose), 0));
  const int slice = reshape >= 0 ? Producer(InputOf(g.node(reshape), 0)) : -1;
  if (reshape < 0 || slice < 0 || g.node(reshape).op_type() != "Reshape") return false;
  const std::vector<int64_t> d5 = DimsOrEmpty(g_, OutputOf(g.node(reshape), 0));
  const auto cut = ReadSlice(g_, g.node(slice), 4);
  if (d5.size() != 5 || !cut || cut->axis != 3 || cut->step != 1 ||
      cut->end - cut->begin != d5[3] * d5[4] ||
      (!qkv->empty() && InputOf(g.node(slice), 0) != *qkv) ||
      (c->heads > 0 && (d5[3] != c->heads || d5[2] != c->tokens || d5[1] != c->groups))) {
    return false;
  }
  *qkv = InputOf(g.node(slice), 0);
  *begin = cut->begin;
  c->heads = d5[3];
  c->channels = d5[3] * d5[4];
  c->groups = d5[1];
  c->tokens = d5[2];
  c->nodes.insert({transpose, reshape, slice});
  return true;
}

// The projection the slices read: MatMul by (C, 3C) and Add of 3C, of the
// partitioned image - or that image itself with 3C channels (spill's own
// export, which has no projection).
bool Importer::PartitionInput(WindowChain* c, const std::string& qkv, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  int add = Producer(qkv), mm = add;
  if (add >= 0 && g.node(add).op_type() == "Add") {
    std::optional<std::vector<float>> bias;
    int side = 1;
    while (side >= 0 && !(bias = WeightValues(InputOf(g.node(add), side), &c->nodes))) --side;
    if (!bias) {
      *why = "the queries, keys and values get a bias that is not computed from weights alone";
      return false;
    }
    c->qkv_bias = *bias;
    c->has_qkv_bias = true;
    mm = Producer(InputOf(g.node(add), 1 - side));
    c->nodes.insert(add);
  }
  if (mm >= 0 && g.node(mm).op_type() == "MatMul" &&
      g_.Constant(InputOf(g.node(mm), 1)) != nullptr) {
    c->qkv = mm;
    c->qkv_weight = g_.Constant(InputOf(g.node(mm), 1));
    c->nodes.insert(mm);
    c->in_channels = c->channels;
    c->source = InputOf(g.node(mm), 0);
  } else if (!c->has_qkv_bias) {
    c->in_channels = 3 * c->channels;
    c->source = qkv;
  } else {
    *why = "the queries, keys and values are not one MatMul by a constant weight";
    return false;
  }
  if (!TailIs(g_, c->source, {c->groups, c->tokens, c->in_channels})) {
    *why = "the projection does not read a partitioned image (N, G, T, C)";
    return false;
  }
  return true;
}

// From the product forward: the heads merged back to (N, G, T, C) and the
// out-projection (MatMul + Add), unless spill's own export.
bool Importer::PartitionOutput(WindowChain* c, int product, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  c->nodes.insert(product);
  const int perm = OnlyReader(OutputOf(g.node(product), 0), "Transpose");
  const int merge = perm >= 0 ? OnlyReader(OutputOf(g.node(perm), 0), "Reshape") : -1;
  if (perm < 0 || !IsPerm(g.node(perm), {0, 1, 3, 2, 4}) || merge < 0 ||
      !TailIs(g_, OutputOf(g.node(merge), 0), {c->groups, c->tokens, c->channels})) {
    *why = "the heads' outputs are not merged to (N, G, T, C)";
    return false;
  }
  c->nodes.insert({perm, merge});
  std::string out = OutputOf(g.node(merge), 0);
  const int mm = OnlyReader(out, "MatMul");
  if (mm >= 0 && g_.Constant(InputOf(g.node(mm), 1)) != nullptr) {
    c->proj = mm;
    c->proj_weight = g_.Constant(InputOf(g.node(mm), 1));
    c->nodes.insert(mm);
    out = OutputOf(g.node(mm), 0);
    const int add = OnlyReader(out, "Add");
    if (add >= 0 && g_.Constant(OtherInput(add, out)) != nullptr) {
      c->proj_bias = g_.Constant(OtherInput(add, out));
      c->nodes.insert(add);
      out = OutputOf(g.node(add), 0);
    }
  }
  c->last = producers_.at(out);
  return true;
}

}  // namespace onnx_import
}  // namespace spill
