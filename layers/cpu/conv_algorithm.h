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
//     lie as g.input_layout says and y, dy as g.output_layout. Callers go
//     through layers/cpu/conv_layouts.h, which gives the others plain copies.
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
// db[f] = the sum of dy (in g.output_layout) over the batch and plane, image
// by image, in double from bias_sums[f] (zero when null), which then holds
// the new sum.
void ConvBiasGradient(const ConvGeometry& g, const float* dy, float* db, double* bias_sums);

}  // namespace cpu
}  // namespace spill

#define SPILL_REGISTER_CONV_ALGORITHM(Class)                  \
  static const bool spill_conv_algorithm_registered_##Class = \
      ::spill::cpu::RegisterConvAlgorithm(new Class())

#endif  // SPILL_LAYERS_CPU_CONV_ALGORITHM_H_
