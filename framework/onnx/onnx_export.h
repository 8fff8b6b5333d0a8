// ONNX export: a spill network and its parameters (a checkpoint's params/
// arrays) as an ONNX model of its inference graph, for any runtime that
// reads ONNX.
//
//   auto model = ExportOnnx(net, checkpoint_arrays);   // checked by onnx::checker
//   WriteOnnxFile("net.onnx", *model);
//
// The graph is the forward pass in the evaluation phase: the input layer
// becomes the graph input (the batch axis symbolic, "N"), batch norm normalizes
// with its running statistics, dropout is the identity ONNX makes of it
// outside training, and the loss layer is left out - the graph's output is
// the scores it reads. A fully connected layer reading an image flattens it
// first (Flatten, then Gemm with the weight as spill stores it, transB = 1).
// The layers of mobile and modern networks export as ONNX's operator of the
// same function (Clip, HardSigmoid, HardSwish, Sigmoid, Mul, Slice, Resize,
// ConvTranspose, Pad, LayerNormalization behind channels-last Transposes) or
// as the chain PyTorch writes (SiLU as x * Sigmoid(x), GELU through Erf,
// channel shuffle as Reshape-Transpose-Reshape, a scale as Mul and Add).
// Sequences (N x C x 1 x T) export as PyTorch writes them: an input that
// only embeddings read as int64 ids (N, T), embedding as Gather, lstm and
// gru as ONNX's LSTM and GRU, one node per level, gates in ONNX's order,
// between the views those operators read (onnx_export_sequence.cc).
// Opset 17. Weights are named `<layer>.weight`, `<layer>.bias` (batch norm:
// also `.running_mean`, `.running_var`; a recurrent layer's nodes are
// `<layer>/LSTM`, `<layer>/LSTM_1`, ...), so importing the file back names
// the layers as before and gives bit-identical outputs.
//
// Layers ONNX cannot express as spill computes them are errors naming the
// layer (a network with several losses, a convolution reading the output of
// a fully connected layer).
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_EXPORT_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_EXPORT_H_

#include <onnx/onnx_pb.h>

#include <string>

#include "framework/base/status.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"

namespace spill {

constexpr int kExportOpset = 17;  // LayerNormalization (17), HardSwish (14)

// `params` holds "params/<tensor>" for every parameter of `net`, float32 in
// the network's shape (as a checkpoint does); anything else is an error
// naming `label` and the array.
StatusOr<onnx::ModelProto> ExportOnnx(const Net& net, const NpzArchive& params,
                                      const std::string& label);

// ONNX's own checker (onnx::checker::check_model), its message as the error.
Status CheckOnnx(const onnx::ModelProto& model);

// Writes the serialized model atomically (temporary file, then rename).
Status WriteOnnxFile(const std::string& path, const onnx::ModelProto& model);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_EXPORT_H_
