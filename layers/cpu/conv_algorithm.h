// CPU convolution algorithms. Each computes the same convolution with its own
// trade of speed for workspace memory; the workspace selector (memory/)
// chooses one per convolution and step from the free bytes left.
//
//   im2col_image   im2col of one image at a time, one GEMM per image and group
//   im2col_batch   im2col of the whole batch, one GEMM per group (largest workspace)
//   im2col_chunk   im2col of a few images at a time (between the two)
//   direct         loops over the kernel window, no workspace
//   depthwise      one filter per channel only (groups == channels == filters):
//                  plane by plane, no workspace
//   dnnl           oneDNN's convolution primitives
//   dnnl_winograd  oneDNN's Winograd kernels (3x3, stride 1)
//   dnnl_bf16      oneDNN's bfloat16 primitives (AVX-512 BF16 or newer): 16-bit
//                  operands as they are, weights rounded to 16 bits, float32
//                  sums; about twice the speed of dnnl on wide layers
//   gemm_bf16      the same arithmetic as one matrix product over the batch
//                  (oneDNN's bfloat16 matmul on an im2col of the batch):
//                  faster where the planes are small (deep layers)
//
// Contract for every algorithm:
//   * Forward overwrites y with conv(x, w) (+ bias when bias != nullptr).
//   * BackwardData overwrites dx, or adds into it when `accumulate`.
//   * BackwardFilter overwrites dw, or adds into it when `accumulate` (a later
//     slice of the batch, memory.chunk); and writes db when db != nullptr,
//     the float of a double sum that starts from and returns to
//     bias_sums[f] when bias_sums != nullptr (carried across slices).
//   * Workspace: exactly WorkspaceBytes(g, op) bytes are passed in (may be
//     null when 0); nothing else is allocated per call beyond small constant
//     buffers, so the plan's numbers are what the run uses.
//   * Deterministic: the same inputs give the same bits on every call.
//   * Results agree with im2col_image within float rounding.
//   * Operands are plain unless the algorithm computes_blocked(); then x, dx
//     lie as g.input_layout says and y, dy as g.output_layout. Operands are
//     float32 unless the algorithm takes() their dtype: then x, dx hold
//     g.input_dtype elements and y, dy g.output_dtype ones (the float
//     pointers are only addresses then). Callers go through
//     layers/cpu/conv_layouts.h, which gives the others plain float32 copies.
//   * An algorithm that computes_16_bit() rounds the operands and the weights
//     to bfloat16 and accumulates in float32 (results agree with im2col_image
//     within bfloat16 rounding); it is a candidate only where the network
//     stores activations in 16 bits, unless a layer pins it.
#ifndef SPILL_LAYERS_CPU_CONV_ALGORITHM_H_
#define SPILL_LAYERS_CPU_CONV_ALGORITHM_H_

#include <cstddef>
#include <string>
#include <vector>

#include "layers/convolution_layer.h"

namespace spill {
namespace cpu {

enum class ConvOp { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
constexpr int kNumConvOps = 3;
const char* ConvOpName(ConvOp op);

class ConvAlgorithm {
 public:
  virtual ~ConvAlgorithm() = default;

  virtual std::string name() const = 0;
  virtual bool Supports(const ConvGeometry&) const { return true; }
  // Whether the algorithm takes blocked operands as they are.
  virtual bool computes_blocked() const { return false; }
  // Whether it takes operands stored in `dtype` as they are.
  virtual bool takes(DType dtype) const { return dtype == DType::kF32; }
  // Whether it computes in 16-bit arithmetic (see the contract above).
  virtual bool computes_16_bit() const { return false; }
  virtual size_t WorkspaceBytes(const ConvGeometry& g, ConvOp op) const = 0;

  virtual void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                       float* y, void* workspace) const = 0;
  virtual void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                            bool accumulate, void* workspace) const = 0;
  virtual void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                              float* db, bool accumulate, double* bias_sums,
                              void* workspace) const = 0;
};

// Every registered algorithm, in registration order.
std::vector<const ConvAlgorithm*> ConvAlgorithms();
// nullptr when no algorithm has that name.
const ConvAlgorithm* FindConvAlgorithm(const std::string& name);
// "unknown convolution algorithm 'x'; known convolution algorithms: ...".
std::string UnknownConvAlgorithm(const std::string& name);
// Registers an algorithm for the lifetime of the program.
bool RegisterConvAlgorithm(const ConvAlgorithm* algorithm);

// Shared helpers for the algorithms.
void AddConvBias(const ConvGeometry& g, const float* bias, float* y);
// db[f] = the sum of dy (in g.output_layout and g.output_dtype) over the
// batch and plane, image by image, in double from bias_sums[f] (zero when
// null), which then holds the new sum.
void ConvBiasGradient(const ConvGeometry& g, const void* dy, float* db, double* bias_sums);

}  // namespace cpu
}  // namespace spill

#define SPILL_REGISTER_CONV_ALGORITHM(Class)                  \
  static const bool spill_conv_algorithm_registered_##Class = \
      ::spill::cpu::RegisterConvAlgorithm(new Class())

#endif  // SPILL_LAYERS_CPU_CONV_ALGORITHM_H_
