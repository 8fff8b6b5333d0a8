// ONNX import: a network written in PyTorch (torch.onnx.export) or anything
// else that writes ONNX, as a spill network plus its weights.
//
//   auto net = ImportOnnxFile("resnet18.onnx");
//   net->yaml      // the network in spill's YAML format (models/README.md)
//   net->params    // "params/<layer>/<tensor>" float32 (N, C, H, W) arrays
//
// Each node becomes one layer (Conv -> convolution, BatchNormalization ->
// batch_norm with its running statistics, Gemm and MatMul + Add ->
// fully_connected, ...); layers holding weights are named after the weights
// (PyTorch's module paths: `layer1.0.conv1`), the others after their nodes.
// Values whose layout spill keeps as it is - Flatten, the 2-D Reshape before
// a classifier, Identity, an all-zero Pad, a Constant - are read through,
// and a zero Pad before an AveragePool folds into the pooling. A softmax_loss
// named `loss` reads the graph's output: the training config supplies the
// labels. The batch axis may be symbolic (the config sets the batch); every
// other dimension must be static.
//
// Sequence models come in as PyTorch writes them (onnx_import_sequence.cc):
// an int64 (N, T) input of ids becomes an input of shape [1, 1, T] (the ids
// as floats), a float (N, T, C) input one of [C, 1, T] (spill holds a
// sequence N x C x 1 x T, so the caller gives the features channels first);
// Gather of a constant table -> embedding, LSTM and GRU -> lstm and gru (the
// nodes of one multi-layer nn.LSTM joined into one layer, weights under
// PyTorch's names `lstm/weight_ih_l0`), a per-step MatMul + Add -> a 1x1
// convolution, the Transposes, Squeezes and Reshapes between them read
// through; scores of every step get `labels: pixels`, a label per step.
//
// Anything spill cannot compute exactly as ONNX defines it is an error naming
// the file, the node and what was expected: asymmetric padding, dilated
// pooling, even LRN sizes, Gemm with alpha or beta other than 1, a Concat
// along an axis other than channels, a Flatten whose result reaches a
// convolution, batch norm in training mode, a reverse-only or clipped LSTM,
// non-zero initial states, and so on.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_IMPORT_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_IMPORT_H_

#include <array>
#include <map>
#include <string>

#include "framework/base/status.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"
#include "framework/onnx/onnx_model.h"

namespace spill {

struct ImportedNet {
  std::string name;
  std::string label;  // the file
  std::string yaml;   // the network in spill's format
  NpzArchive params;  // its initial weights, as a checkpoint names them
  // ONNX's inferred C, H, W of each layer's output (features: F, 1, 1).
  std::map<std::string, std::array<int64_t, 3>> shapes;
};

StatusOr<ImportedNet> ImportOnnx(const OnnxGraph& graph);
StatusOr<ImportedNet> ImportOnnxFile(const std::string& path);

// Every layer of `net` (built from `imported.yaml`) computes the shape ONNX
// inferred for its node: an operator whose border arithmetic differs (a ceil
// mode window ONNX keeps and PyTorch's rule drops) is an error naming the
// layer, not a network whose weights silently fail to load.
Status CheckImportedShapes(const ImportedNet& imported, const Net& net);

// The shortest decimal that reads back as the same float ("1e-05", "0.1").
std::string ShortestFloat(float value);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_IMPORT_H_
