// The ONNX importer's state, shared by its files: onnx_import.cc walks the
// graph (inputs, outputs, names, values read through), onnx_import_layers.cc
// and onnx_import_vision.cc convert the nodes of images that become layers,
// onnx_import_patterns.cc the chains PyTorch writes for one function, and
// onnx_import_sequence.cc the sequences (embeddings, LSTM, GRU and the views
// around them). Private to framework/onnx_import*.cc; the interface is
// framework/onnx/onnx_import.h.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_

#include <array>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"

namespace spill {
namespace onnx_import {

// How an ONNX value's axes map onto the spill tensor (N, C, H, W) holding it.
enum class Layout {
  kNchw,               // as spill: (C, H, W), or a flattened (features) view
  kNhwc,               // channels last, (H, W, C): a Transpose [0, 2, 3, 1] of an NCHW value
  kGrouped,            // (groups, C / groups, H, W): a channel shuffle's first Reshape
  kGroupedTransposed,  // (C / groups, groups, H, W): its Transpose, awaiting the last Reshape
  kSequence            // a view of a sequence N x C x 1 x T: Value::axes says which
};

// An ONNX value and where spill holds it.
struct Value {
  std::string ref;               // the layer whose output it is
  std::vector<int64_t> dims;     // its ONNX shape without the batch axis
  std::array<int64_t, 3> chw{};  // the spill tensor's C, H, W
  Layout layout = Layout::kNchw;
  // A sequence's ONNX axes, the batch's included, one letter each: N batch,
  // T time, C features; a recurrent operator's output splits the features
  // into D directions of H hidden units (C = D x H, forward first). "NTC" is
  // batch-first, "TNC" time-major, "NCT" channels-first, "TDNH" ONNX's
  // LSTM output Y, "NT" integer ids; M is the positions and the batch
  // merged into one axis (T major, as (T N, C) before attention's output
  // projection), B the batch and the positions (N major). Empty for images.
  std::string axes;
  // MaxViT's partitioned view of an image (kNhwc with block P > 0): (G, P P,
  // C), the image cut into P x P blocks, G = (H/P)(W/P) of them, row after
  // row - torchvision's WindowPartition; `swapped` (P P, G, C), its
  // SwapAxes for grid attention. 0 for a plain channels-last (H, W, C).
  int64_t block = 0;
  bool swapped = false;

  // The ONNX axis of the batch: the first, except in time-major sequences.
  int BatchAxis() const {
    return layout == Layout::kSequence ? static_cast<int>(axes.find_first_of("NMB")) : 0;
  }

  // Laid out as ONNX says: C x H x W, not a flattened view of it.
  bool Spatial() const {
    return layout == Layout::kNchw && dims.size() == 3 && dims[0] == chw[0] && dims[1] == chw[1] &&
           dims[2] == chw[2];
  }
  // Channels last: H x W x C of the tensor's C x H x W.
  bool ChannelsLast() const {
    return layout == Layout::kNhwc && block == 0 && dims.size() == 3 && dims[0] == chw[1] &&
           dims[1] == chw[2] && dims[2] == chw[0];
  }
  // MaxViT's (G, P P, C) or, swapped, (P P, G, C) view of the image.
  bool Partitioned() const {
    if (layout != Layout::kNhwc || block <= 0 || dims.size() != 3 || dims[2] != chw[0]) {
      return false;
    }
    const int64_t groups = (chw[1] / block) * (chw[2] / block), tokens = block * block;
    return dims[swapped ? 1 : 0] == groups && dims[swapped ? 0 : 1] == tokens;
  }
  // The same view of the pixels: one layout, sequence axes and partition.
  bool SameView(const Value& o) const {
    return layout == o.layout && axes == o.axes && block == o.block && swapped == o.swapped;
  }
  // Channels where spill has them: spatial, or N x C with C the tensor's channels.
  bool Channels() const {
    return Spatial() || (layout == Layout::kNchw && dims.size() == 1 && chw[1] == 1 && chw[2] == 1);
  }
  // The ONNX axis (after the batch) holding the channels, or -1 for none:
  // spatial and N x C values have them first, channels-last values last,
  // sequences where their C is (when it follows the batch).
  int ChannelAxis() const {
    if (Channels()) return 0;
    if (layout == Layout::kSequence) {
      const size_t c = axes.find('C');
      return c != std::string::npos && c > axes.find_first_of("NMB") ? static_cast<int>(c) - 1 : -1;
    }
    return ChannelsLast() || Partitioned() ? 2 : -1;
  }
};

// A zero Pad folded into the AveragePool that reads it.
struct PendingPad {
  std::string source;  // the padded value
  int64_t h = 0, w = 0;
};

class Importer {
 public:
  explicit Importer(const OnnxGraph& g) : g_(g) {}
  // onnx_import_attention.cc's symbolic view of one of attention's operands.
  struct AttentionView;
  StatusOr<ImportedNet> Run();

 private:
  Status Input();
  Status Convert(int node);
  Status Output();

  // onnx_import_layers.cc
  Status Conv(int node);
  Status BatchNorm(int node);
  Status Activation(int node);
  Status Pool(int node);
  Status GlobalPool(int node);
  Status Gemm(int node);
  Status MatMul(int node);
  Status FullyConnected(int node, const Value& x, const onnx::TensorProto& w, bool transposed,
                        const onnx::TensorProto* bias, int out_node);
  Status Add(int node);
  Status Concat(int node);
  Status Dropout(int node);
  Status Lrn(int node);
  Status Pad(int node);
  Status ReadThrough(int node);
  Status Reshape(int node);
  // The graph's output as probabilities: a Softmax or LogSoftmax over the
  // scores' classes, the one spill's loss applies (predict reports them).
  // The node, or -1.
  int FindOutputSoftmax() const;
  Status OutputSoftmax(int node);

  // onnx_import_vision.cc: the operators of mobile and modern networks;
  // false when `node` is none of them.
  StatusOr<bool> ConvertVision(int node);
  Status Clip(int node);
  Status HardSigmoid(int node);
  Status Sigmoid(int node);
  Status Mul(int node);
  Status Transpose(int node);
  Status ReduceMean(int node);
  Status Slice(int node);
  Status Split(int node);
  Status Resize(int node);
  Status ConvTranspose(int node);
  Status LayerNormalization(int node);
  // A layer of `type` reading one value, elementwise: its output keeps the
  // input's layout.
  Status Elementwise(int node, const std::string& type, const std::string& attributes,
                     int out_node);
  // Sub and Div by a constant (a per-channel shift or scale).
  Status DivOrSub(int node);
  // A product or sum of two computed values: of one shape, or a map and
  // per-channel values (multiply, add, broadcast_add).
  Status Broadcast(int node, bool multiply, const Value& a, const Value& b);
  // A scale layer reading `x`: gamma per channel, and beta when given.
  Status ScaleLayer(int node, const Value& x, const std::vector<float>& gamma,
                    const std::vector<float>* beta, int out_node, const std::string& weight);
  // Per-channel values of a constant broadcast against `x`, or an error.
  StatusOr<std::vector<float>> ChannelConstant(int node, const Value& x,
                                               const onnx::TensorProto& t) const;
  // A 1x1 convolution from a MatMul by a constant of a value whose channels
  // come last (a channels-last view of an image, or a sequence).
  Status ChannelsLastMatMul(int node, const Value& x, const onnx::TensorProto& w);
  // For windows padded more on one side (asymmetric pads, auto_pad SAME):
  // a pad layer (filled with `value`, named after `layer`) that takes the
  // excess, leaving `pads` (top, left, bottom, right) symmetric; returns the
  // layer to read.
  std::string AsymmetricPad(const std::string& layer, const Value& x, std::array<int64_t, 4>* pads,
                            float value);
  // A slice layer of channels [begin, end) of `x` for output `k` of `node`.
  Status ChannelSlice(int node, int k, const Value& x, int64_t begin, int64_t end);

  // onnx_import_patterns.cc: the chains of elementwise operators PyTorch
  // writes for one function, each recognized from its first node and
  // converted as one layer (false: not the pattern).
  StatusOr<bool> LayerNormPattern(int node);
  StatusOr<bool> GeluPattern(int node);
  // x * f(x) with f the node (Sigmoid: silu; HardSigmoid of 1/6, 1/2:
  // hard_swish); the Mul reading both, or -1.
  int SelfGate(int node) const;
  // The one node reading `value`, if it is of operator `op`; else -1.
  int OnlyReader(const std::string& value, const std::string& op) const;
  // A float constant holding one value.
  bool ScalarConstant(const std::string& value, float* out) const;
  // The other input of a two-input node, given one of them.
  std::string OtherInput(int node, const std::string& one) const;
  // Registers output `k` of `node` as the tensor `v` (kept in its layout).
  Status ProduceValue(int node, int k, Value v);

  // onnx_import_sequence.cc: sequences (N x C x 1 x T) and their ONNX
  // views; false when `node` neither reads one nor is a sequence operator.
  StatusOr<bool> ConvertSequence(int node);
  // Gather of a constant table by the input's ids: an embedding layer.
  Status Embedding(int node);
  // LSTM and GRU: a recurrent layer, or the next layer of the one below.
  Status Recurrent(int node);
  Status RecurrentAttributes(int node, bool lstm, int64_t* directions) const;
  // Initial states, sequence lengths and peepholes that change nothing.
  Status RecurrentDefaults(int node, bool lstm, int64_t steps) const;
  // The gates of one ONNX node as layer `layer`'s parameters of `level`.
  Status RecurrentWeights(int node, bool lstm, const std::string& layer, int64_t level,
                          int64_t directions, int64_t hidden, int64_t inputs);
  // The recurrent layer that `node` continues as its next level: `x` views
  // its output, which nothing else reads, and the two agree; else nullptr.
  struct RecurrentStack;
  RecurrentStack* StackBelow(int node, const Value& x, int64_t hidden, int64_t directions,
                             bool bias);
  Status SequenceTranspose(int node, const Value& x);
  Status SequenceSqueeze(int node, const Value& x);
  Status SequenceReshape(int node, const Value& x);
  Status SequenceGemm(int node, const Value& x);
  // Before the walk: the nodes that compute recurrent operators' initial
  // states from constants and the batch size (Shape ... ConstantOfShape or
  // Expand, and Slices of it) and feed nothing else are marked converted;
  // the states that are all zeros are noted (zero_states_).
  void MarkInitialStates();
  // Whether `value` is computed from constants and shapes alone (adding its
  // nodes); clears `zero` when it is not all zeros.
  bool StateChain(const std::string& value, std::set<int>* nodes, int depth, bool* zero) const;
  // Before the walk: the shape arithmetic that reshapes and expands read
  // where folding left it (their output shapes are inferred) is marked
  // converted.
  void MarkShapeChains();
  // Whether `value` is integer shape arithmetic on constants and Shape.
  bool ShapeOnly(const std::string& value, std::set<int>* nodes, int depth) const;
  // The ONNX shape of a sequence `value` viewed as `axes`, without the batch.
  StatusOr<std::vector<int64_t>> SequenceDims(int node, const std::string& value,
                                              const std::string& axes) const;

  // onnx_import_attention.cc: the chain of nn.MultiheadAttention (and of
  // spill's export) from one projection's queries, keys and values to the
  // sequence of its output, as one attention layer.
  struct AttentionChain {
    int softmax = -1;
    std::string source;                        // X, the projection
    std::string source_layout;                 // "NTC", "TNC" (features last) or "NC1T"
    std::vector<int> q, k, v, out;             // the views (X to the products; O to the sequence)
    int scores = -1, mask = -1, product = -1;  // MatMul, Add, MatMul
    std::vector<int> scalings;                 // Mul or Div of the scores by constants
    int last = -1;                             // the node whose output is the layer's
    std::string layout;                        // of that output (SequenceLayout)
    int64_t heads = 1, width = 0, steps = 0;
    bool causal = false;
    std::string error;  // why this Softmax is no such chain, or ""
  };
  // Before the walk: every Softmax's chain, its nodes marked converted and
  // its last node noted (attention_), or why it is none (softmax_errors_).
  void MarkAttention();
  AttentionChain FindAttention(int softmax);
  bool Evaluate(AttentionChain* c, std::string* why) const;
  bool FollowOutput(AttentionChain* c, AttentionView o, int64_t width, std::string* why) const;
  bool SourceView(const std::string& x, AttentionView* view, std::string* layout,
                  std::string* why) const;
  bool ApplyView(int node, const std::string& output, AttentionView* v, std::string* why) const;
  bool CausalMask(int add, int64_t steps, std::string* why) const;
  // From `value` back through views to the value they view (appending the
  // views, first first, to `nodes`).
  std::string ViewsBack(const std::string& value, std::vector<int>* nodes) const;
  // A value's ONNX shape, each axis's size and whether it holds the batch
  // (a multiple of it: the size is the factor).
  StatusOr<std::vector<int64_t>> BatchDims(const std::string& value,
                                           std::vector<bool>* batches) const;
  // The attention layer, at its chain's last node.
  Status Attention(int node);
  // The ends of a vision transformer's sequence: a class token put before
  // it (Concat of an Expand of a constant over the batch), a position table
  // added to it (Add of a constant of its shape), one position taken out of
  // it (Gather along the positions).
  Status ClassToken(int node);
  Status PositionTable(int node, const Value& x, const onnx::TensorProto& table);
  Status TakeToken(int node, const Value& x);
  // onnx_import_windows.cc: torchvision's Swin Transformer. The chain of
  // shifted_window_attention - from the channels-last image X through its
  // padding, cyclic shift, window partition and qkv projection to the
  // attention of each window (a relative position bias and the shifted
  // windows' mask added to the scores), then the output projection, the
  // windows merged, the shift undone and the padding cut - as three layers:
  // a 1x1 convolution (qkv), window_attention and a 1x1 convolution (proj).
  struct WindowChain {
    int softmax = -1;
    int last = -1;            // the node whose output is the chain's (N, H, W, C)
    std::string source;       // X
    int qkv = -1, proj = -1;  // their MatMuls
    const onnx::TensorProto* qkv_weight = nullptr;
    std::vector<float> qkv_bias;
    bool has_qkv_bias = false;
    const onnx::TensorProto *proj_weight = nullptr, *proj_bias = nullptr;
    int64_t heads = 0, window = 0, shift = 0, channels = 0;
    int64_t in_channels = 0;                // of the image read: C, or 3C without a qkv projection
    int64_t height = 0, width = 0;          // padded to multiples of the window
    int64_t pad_bottom = 0, pad_right = 0;  // the zeros added
    std::vector<float> table;               // the relative position bias, (2w - 1)^2 x heads
    bool cosine = false;                    // Swin V2's scores
    std::vector<float> logit_scale;
    // MaxViT's: the source is a partitioned image (Value::block), read as
    // G groups of T positions - windows of its blocks, or a grid where the
    // view is swapped.
    bool partitioned = false;
    int64_t groups = 0, tokens = 0;
    bool grid = false;  // spill's own export of a grid: its windows spread over the image
    float scale = 0;    // what multiplies the scores where it is not d^-1/2 (MaxViT's C^-1/2)
    std::set<int> nodes;
    std::string error;  // why this Softmax is no such chain, or ""
  };
  // Before the walk (and before MarkAttention): every Softmax whose chain
  // `find` recognizes (Swin's FindWindowChain, MaxViT's
  // FindPartitionChain), its nodes marked converted, or its error noted
  // under `kind`; `find` returns false where the Softmax is not of its
  // kind at all (its error empty).
  using ChainFinder = bool (Importer::*)(int softmax, WindowChain* c) const;
  void MarkWindowChains(ChainFinder find, const std::string& kind);
  bool FindWindowChain(int softmax, WindowChain* c) const;
  bool WindowInput(WindowChain* c, int product, const std::string& y, std::string* why) const;
  bool WindowOutput(WindowChain* c, int product, std::string* why) const;
  bool WindowSource(WindowChain* c, int merge, int64_t tokens, std::string* why) const;
  bool WindowBias(WindowChain* c, const std::vector<float>& bias, int64_t tokens,
                  std::string* why) const;
  // A constant's values, or a value computed from weights and constants
  // alone (framework/onnx/onnx_data_folding.h), its nodes added to `nodes`.
  std::optional<std::vector<float>> WeightValues(const std::string& value,
                                                 std::set<int>* nodes) const;
  // Swin V2's Mul of the cosine similarities by exp(min(logit_scale,
  // ln 100)): the MatMul it scales, the parameter read into the chain.
  bool CosineScale(int mul, WindowChain* c, int* product) const;
  // F.normalize(x, dim=-1): x / Expand(Clip(ReduceL2(x), 1e-12)); x.
  bool NormalizedOf(const std::string& value, std::string* source, std::set<int>* nodes) const;
  bool WindowMask(const WindowChain& c, const onnx::TensorProto* mask, int64_t height,
                  int64_t width, std::string* why) const;
  // A torch.roll along `axis`: Concat(Slice(v, s, end), Slice(v, 0, s)) of
  // one value; its source and s (the shift to the left), or false.
  bool RollOf(const std::string& value, int64_t axis, std::string* source, int64_t* shift,
              std::set<int>* nodes) const;
  // The roll of `value` along `axis` that its readers compute: the Concat's
  // output and s, or false.
  bool RollAfter(const std::string& value, int64_t axis, std::string* out, int64_t* shift,
                 std::set<int>* nodes) const;
  Status WindowAttention(int node);
  // Swin's patch merging: a Concat over the channels of the b x b strided
  // slices of one channels-last image, x[..., dy::b, dx::b, :] in the order
  // dx major, dy minor - a space_to_depth layer.
  struct PatchMerge {
    std::string source;
    int64_t block = 0;
  };
  void MarkPatchMerging();
  Status SpaceToDepth(int node);
  // onnx_import_partitions.cc: MaxViT. Its window partition and departition
  // (Reshape, Transpose, Reshape) are views of the image that write no
  // layer; its attention in those views is a WindowChain (`partitioned`).
  struct PartitionStep {
    std::string source;
    int64_t block = 0;
    bool into = true;  // (N, C, H, W) to (N, G, P P, C); false: back
  };
  void MarkPartitions();
  Status Partition(int node);
  bool FindPartitionChain(int softmax, WindowChain* c) const;
  bool PartitionHeads(int transpose, WindowChain* c, std::string* qkv, int64_t* begin) const;
  bool PartitionInput(WindowChain* c, const std::string& qkv, std::string* why) const;
  bool PartitionOutput(WindowChain* c, int product, std::string* why) const;

  // A per-position linear layer (Gemm, or MatMul by a constant) of a
  // sequence view whose features come last: a 1x1 convolution.
  Status SequenceLinear(int node, const Value& x, const std::vector<float>& weight, int64_t k,
                        const onnx::TensorProto* bias, int out_node,
                        const std::string& weight_name);

  // Helpers.
  Status Fail(int node, const std::string& message) const;
  StatusOr<const Value*> In(int node, int k) const;
  StatusOr<const onnx::TensorProto*> ConstIn(int node, int k) const;
  bool HasInput(int node, int k) const;
  Status OnlyFirstOutput(int node) const;
  // The inferred shape of `value`, static after the batch axis.
  StatusOr<std::vector<int64_t>> DimsOf(int node, const std::string& value) const;
  // Registers the node's output 0 as a new spill tensor produced by `layer`;
  // an elementwise layer's tensor is laid out as its input `like`.
  Status Produce(int node, const std::string& layer, const Value* like = nullptr);
  // Named after the node's weight input `weight` ("" for none), else the node.
  std::string LayerName(int node, const std::string& weight);
  // Named after the node's PyTorch module ("/lstm/LSTM_1": lstm), else the node.
  std::string ModuleLayerName(int node);
  // The node's PyTorch module, its scoped name without the operator's own
  // last part; "" for a node without scopes.
  std::string ModuleName(int node) const;
  // `base`, or base_2, base_3... when taken.
  std::string UniqueName(const std::string& base);
  // A layer's entry in the YAML.
  static std::string Entry(const std::string& name, const std::string& type,
                           const std::vector<std::string>& inputs, const std::string& attributes);
  // Appends a layer's entry; returns its index in layers_.
  size_t Emit(const std::string& name, const std::string& type,
              const std::vector<std::string>& inputs, const std::string& attributes);
  Status Weight(int node, const std::string& layer, const std::string& param,
                const onnx::TensorProto& tensor, const std::vector<int64_t>& shape);
  // The node that reads `value` when exactly one node does, else -1.
  int SoleConsumer(const std::string& value) const;
  // The node computing `value`, or -1 (an input or an initializer).
  int Producer(const std::string& value) const;

  // A recurrent layer written so far, which the next ONNX node may extend.
  struct RecurrentStack {
    std::string op;  // LSTM or GRU
    std::string module;
    std::string input;  // the layer it reads
    int64_t hidden = 0, directions = 1, levels = 1;
    bool bias = true;
    size_t entry = 0;  // in layers_
    int last = -1;     // the node of its top level
  };

  const OnnxGraph& g_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> producers_;          // value -> the node computing it
  std::set<std::string> zero_states_;             // recurrent initial states known to be zero
  std::map<std::string, RecurrentStack> stacks_;  // by layer name
  std::map<std::string, PendingPad> pads_;
  std::set<int> fused_;                        // nodes already converted as part of another
  std::map<int, AttentionChain> attention_;    // by the chain's last node
  std::map<int, WindowChain> windows_;         // by the chain's last node
  std::map<int, PatchMerge> merges_;           // by the Concat
  std::map<int, PartitionStep> partitions_;    // by the last Reshape
  std::map<int, std::string> softmax_errors_;  // a Softmax outside any chain: why
  int output_softmax_ = -1;                    // FindOutputSoftmax
  std::map<std::string, std::string>
      broadcasts_;  // Expand of a constant over the batch: the constant
  std::set<std::string> names_;
  std::vector<std::string> layers_;  // the entries after the input's
  // The input layer's entry, written ahead of layers_ once Output() knows
  // whether the scores are a map of the input's size (labels per pixel).
  std::string input_entry_;
  std::array<int64_t, 3> input_chw_{};
  int64_t batch_ = kDynamicOnnxDim;  // the input's batch axis
  bool pixel_labels_ = false;
  ImportedNet net_;
};

// "[3, 3]"
std::string Pair(int64_t a, int64_t b);
// "[1, 2, 3]"
std::string List(const std::vector<int64_t>& v);

}  // namespace onnx_import
}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_
