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
#include <string>
#include <vector>

namespace spill {

// The integer-only operators folded (with Constant and Identity).
bool IsShapeArithmetic(const std::string& op);

// `dims`: every value's inferred shape, a negative entry for an unknown or
// symbolic dimension. Returns whether the graph changed.
bool FoldShapeArithmetic(onnx::ModelProto* model,
                         const std::map<std::string, std::vector<int64_t>>& dims);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_SHAPE_FOLDING_H_
