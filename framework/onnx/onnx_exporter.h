// The ONNX exporter's internals, shared by its files: onnx_export.cc (the
// walk over the layers, the layers of classic CNNs), onnx_export_vision.cc
// (the layers of mobile and modern networks and encoder-decoders) and
// onnx_export_sequence.cc (embeddings, lstm and gru). Not part of the API:
// see onnx_export.h.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_EXPORTER_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_EXPORTER_H_

#include <onnx/onnx_pb.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/base/status.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"

namespace spill {
namespace onnx_export {

// A layer's option as the YAML gives it, or `fallback` (the layer's default).
YAML::Node Param(const LayerSpec& spec, const char* key);
int64_t Int(const LayerSpec& spec, const char* key, int64_t fallback);
double Float(const LayerSpec& spec, const char* key, double fallback);
bool Bool(const LayerSpec& spec, const char* key, bool fallback);
// An int or [h, w].
std::vector<int64_t> Pair(const LayerSpec& spec, const char* key, std::vector<int64_t> fallback);

void AddInts(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& v);
void AddInt(onnx::NodeProto* node, const std::string& name, int64_t v);
void AddFloat(onnx::NodeProto* node, const std::string& name, double v);
void AddString(onnx::NodeProto* node, const std::string& name, const std::string& v);
// A step of a layer's chain: the node and its output named "<layer>/<step>".
onnx::NodeProto* Named(onnx::NodeProto* node, const std::string& layer, const std::string& step);

class Exporter {
 public:
  Exporter(const Net& net, const NpzArchive& params, const std::string& label)
      : net_(net), params_(params), label_(label), s_(net.schedule()) {}
  StatusOr<onnx::ModelProto> Run();

 private:
  Status Layer(int id);
  Status Input(int id);
  Status Window(int id, const std::string& op);
  Status FullyConnected(int id);
  Status BatchNorm(int id);
  // The layers of mobile and modern networks and encoder-decoders, each as
  // the node or chain the importer reads back as the same layer.
  Status Vision(int id, const std::vector<std::string>& inputs, int rank, bool* done);
  Status Activation(int id, const std::string& x);
  Status Gelu(int id, const std::string& x);
  Status ChannelShuffle(int id, const std::string& x);
  Status LayerNorm(int id, const std::string& x, int rank);
  Status Scale(int id, const std::string& x, int rank);
  Status Upsample(int id, const std::string& x);
  Status TransposedConvolution(int id, const std::string& x);
  Status Pad(int id, const std::string& x);
  // Transformers (onnx_export_attention.cc): attention and the layers
  // around it, in the forms the importer reads back.
  Status Attention(int id, const std::string& x);
  // Gathers 0, 1 and 2 along `axis` of `stacked`: "<layer>/q", "/k", "/v".
  void GatherQkv(int id, const std::string& stacked, int64_t axis);
  Status Positions(int id, const std::string& x);
  Status Tokens(int id, const std::string& x);
  Status ClassToken(int id, const std::string& x);
  Status Token(int id, const std::string& x);
  // Swin (onnx_export_windows.cc): window attention and patch merging as
  // torchvision's Swin exports them, on the channels-last view.
  Status WindowAttention(int id, const std::string& x);
  Status SpaceToDepth(int id, const std::string& x);
  // torch.roll by -`shift` along `axis` of a (N, H, W, C) value: its output.
  std::string Roll(int id, const std::string& v, int64_t axis, int64_t extent, int64_t shift,
                   const std::string& step);
  // Sequences (onnx_export_sequence.cc): spill's N x C x 1 x T stays an
  // ONNX (N, C, 1, T) value between layers; embeddings and recurrent layers
  // view it as PyTorch's exports do, and back.
  // Whether the input holds ids that only embeddings read: an int64 (N, T).
  bool InputHoldsIds(int id) const;
  Status Embedding(int id);
  Status Recurrent(int id);
  // One level of a recurrent layer: its W, R (and B) in ONNX's gate order.
  StatusOr<std::vector<std::string>> RecurrentWeights(int id, int64_t level, int64_t directions,
                                                      bool lstm);
  // The float32 values of parameter `p` of layer `id`, checked as Initializer does.
  StatusOr<std::vector<float>> ParamValues(int id, int p) const;
  // An initializer `<layer>.<suffix>` holding `values` as raw bytes.
  std::string RawConstant(int id, const std::string& suffix, const std::vector<float>& values,
                          const std::vector<int64_t>& dims);
  // Initializers the exporter writes itself: named `<layer>.<suffix>`.
  std::string FloatConstant(int id, const std::string& suffix, const std::vector<float>& values,
                            const std::vector<int64_t>& dims);
  std::string IntConstant(int id, const std::string& suffix, const std::vector<int64_t>& values);
  onnx::NodeProto* Node(int id, const std::string& op, std::vector<std::string> inputs);
  // The ONNX value of spill tensor `t`, of rank 4 when `image` is required.
  StatusOr<std::string> In(int id, int k, bool image) const;
  // Adds the parameter `p` of layer `id` as an initializer of `dims`.
  StatusOr<std::string> Initializer(int id, int p, const std::string& suffix,
                                    const std::vector<int64_t>& dims);
  std::string Out(int id, int rank);

  const Net& net_;
  const NpzArchive& params_;
  const std::string& label_;
  const Schedule& s_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::map<TensorId, std::pair<std::string, int>> values_;  // tensor -> (ONNX name, rank)
  std::string scores_;
  int scores_rank_ = 0;
  TensorId scores_tensor_ = kNoTensor;
};

}  // namespace onnx_export
}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_EXPORTER_H_
