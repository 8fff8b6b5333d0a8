// The precision a network trains in, and which of its tensors it stores in
// 16 bits.
//
//   fp32  every tensor float32
//   bf16  activations and their gradients in bfloat16; parameters (the
//         master weights), their gradients, solver state, saved tensors
//         (masks, indices, statistics) and losses stay float32
//   fp16  the same in IEEE half precision, with the loss scaled so that
//         small gradients do not underflow (tools/trainer/loss_scale.h)
//   tf32  float32 storage, tensor-core math for convolutions and matrix
//         products (CUDA only)
//
// Some activations stay float32 in every precision: the input layers'
// outputs (images, labels, token ids), the losses' outputs, and everything
// a layer reads as indices (labels, an embedding's ids) is computed from -
// ids above 256 are not exact in bfloat16.
//
// Layers compute in float32. Around each computation the executor converts
// the 16-bit tensors it reads into float32 copies and the copies it wrote
// back to 16 bits (round to nearest even); the copies live at the front of
// the step's workspace, so the plan counts them like any workspace
// (Net::ConversionBytes), and where memory is short large steps run in
// slices of the batch to keep them small (kConversionSlices). Conversion is exact and
// deterministic, so every memory mode trains the bits of the 16-bit baseline.
#ifndef SPILL_FRAMEWORK_GRAPH_PRECISION_H_
#define SPILL_FRAMEWORK_GRAPH_PRECISION_H_

#include <string>

#include "framework/base/status.h"
#include "framework/device/tensor.h"

namespace spill {

enum class Precision { kFp32, kBf16, kFp16, kTf32 };

// "fp32", "bf16", "fp16", "tf32".
const char* PrecisionName(Precision precision);
// One of the names above; an error listing them otherwise (`what` names
// the setting: "run.precision", "--precision").
StatusOr<Precision> ParsePrecision(const std::string& text, const std::string& what);
// ", activations in bf16" (and so on) for titles; "" in fp32.
std::string PrecisionNote(Precision precision);
// How the precision stores activations and their gradients.
DType ActivationType(Precision precision);

// A network built with NetOptions::slice_copies_from computes each step
// whose float32 copies of the whole batch would take at least that many
// bytes (and whose layer computes slices of the batch) in this many slices,
// so that its copies take an eighth of what they would: a quarter of the
// step's 16-bit tensors, not twice them. Slices cost time (smaller
// computations), so the default computes whole steps, and the programs
// build with kSliceCopiesFrom where a plan does not fit otherwise
// (tools/common/net_options.h, LeanerBuilds). The slices give the bits of
// the whole batch where the layer's reductions run in image order; either
// way every memory mode computes the same slices.
constexpr int64_t kConversionSlices = 8;
constexpr size_t kSliceCopiesFrom = size_t{1} << 20;

// Each float32 copy is rounded up to this many bytes, so that every copy and
// the layer's own workspace after them start aligned.
constexpr size_t kConversionAlign = 256;
inline size_t ConversionCopyBytes(int64_t elements) {
  const size_t bytes = static_cast<size_t>(elements) * sizeof(float);
  return (bytes + kConversionAlign - 1) / kConversionAlign * kConversionAlign;
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_PRECISION_H_
