// The attributes of an ONNX model's nodes, checked before any library reads
// the graph: ONNX's own checker and shape inference divide by strides and
// multiply kernel sizes without looking (a stride of 0 ends the process with
// SIGFPE inside libonnx), so every value they compute with is checked here
// first, against one table of rules per operator.
//
// A rule names an attribute, its type and its range: window sizes, strides
// and dilations at least 1, pads at least 0 (all at most kMaxOnnxWindow),
// flags 0 or 1, floats finite, strings one of a list, and the lengths of a
// window's lists consistent with each other. The constant inputs shape
// inference reads (Reshape's shape, Pad's pads) are checked the same way.
// An operator without rules has no attributes that inference computes with;
// an operator the importer gains adds its rules to the table
// (onnx_attributes.cc), next to the others.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_ATTRIBUTES_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_ATTRIBUTES_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "framework/base/status.h"

namespace spill {

// The largest kernel, stride, dilation or pad accepted: far beyond any image
// spill trains, small enough that no product of a few overflows.
constexpr int64_t kMaxOnnxWindow = int64_t{1} << 20;
// The largest value of a dimension in Reshape's shape input.
constexpr int64_t kMaxOnnxDimension = int64_t{1} << 31;

// Every node's attributes (and the constant inputs shape inference reads)
// within their rules; the first violation is an error naming `label`, the
// node, the attribute and what was expected.
Status CheckOnnxAttributes(const onnx::ModelProto& model, const std::string& label);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_ATTRIBUTES_H_
