// How long each CPU convolution algorithm takes for a given shape and
// operation - the time in the workspace selector's candidates.
//
//   model    an estimate from the operation's FLOPs and a fixed rate per
//            algorithm: deterministic and instant (tests, first plans)
//   measure  runs the algorithm once per shape, operation and algorithm
//            (best of a few runs, on host buffers outside the device budget;
//            a single run when it is already several times slower than
//            another algorithm on the same operation), remembers it, and
//            appends it to a cache file when one is set; later processes -
//            `plan` too - read the file instead.
// Times found in the cache file are used in either mode.
#ifndef SPILL_LAYERS_CPU_CONV_TIMER_H_
#define SPILL_LAYERS_CPU_CONV_TIMER_H_

#include <string>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {

enum class ConvTimingMode { kModel, kMeasure };

struct ConvTimingSettings {
  ConvTimingMode mode = ConvTimingMode::kModel;
  std::string cache_file;  // empty: no file
};

// Process-wide; set by the tools before networks are built. Setting the
// same mode and file again keeps the times measured so far.
void SetConvTiming(const ConvTimingSettings& settings);
const ConvTimingSettings& ConvTiming();
// The timing cache the tools share: $XDG_CACHE_HOME/spill or ~/.cache/spill
// (created if missing); empty when neither can be used.
std::string DefaultConvTimingCache();

// Seconds for `op` of `algorithm` on geometry `g`.
double ConvSeconds(const ConvAlgorithm& algorithm, const ConvGeometry& g, ConvOp op);
// Multiply-adds x 2 of an operation.
double ConvFlops(const ConvGeometry& g);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CONV_TIMER_H_
