// Folding the integer shape arithmetic of an ONNX graph into constants.
//
// A model exported with a dynamic batch computes its reshapes from the
// tensors' sizes at run time: PyTorch writes x.view(n, groups, c / groups,
// h, w) as Shape -> Gather -> Div -> Unsqueeze -> Concat -> Reshape, and
// x.chunk(2, 1) as Slice bounds computed from Shape. ONNX's shape inference
// cannot see through that arithmetic, so every value after such a reshape
// has an unknown shape. spill's shapes are static apart from the batch, so
// the arithmetic can be evaluated: each integer is either known or the batch
// size itself. FoldShapeArithmetic evaluates what the inferred shapes allow
// and replaces each evaluated input of a computing node (Reshape's shape,
// Slice's bounds, Resize's sizes) by a constant - the batch written as 0,
// Reshape's "copy this dimension" - then drops the arithmetic no node reads
// any more. Shapes inferred again then reach further, so the parser calls it
// until nothing changes.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_SHAPE_FOLDING_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_SHAPE_FOLDING_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spill {

// The integer-only operators folded (with Constant and Identity).
bool IsShapeArithmetic(const std::string& op);

// Folds what the shapes inferred so far allow (read from the graph's
// value_info; the batch is the first input's first axis, a dim_param).
// The batch may also be merged with other axes - PyTorch's attention
// reshapes (N, T, C) to (T, N x heads, d) - which no constant target can
// say: such a Reshape (or an Expand over the batch) keeps its arithmetic,
// and its output's shape is written into value_info instead, the batch as
// its symbol and k times it as "<symbol>*k", for inference to read on
// (so is a Concat's, whose batch ONNX's inference leaves unnamed). The
// caller puts `annotations` into value_info before each inference.
// Returns whether the graph or the annotations changed.
bool FoldShapeArithmetic(onnx::ModelProto* model,
                         std::map<std::string, onnx::ValueInfoProto>* annotations);

// k when `dim_param` is the batch symbol `batch` (1) or "<batch>*k".
std::optional<int64_t> BatchMultiple(const std::string& dim_param, const std::string& batch);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_SHAPE_FOLDING_H_
