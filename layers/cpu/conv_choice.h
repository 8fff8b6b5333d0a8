// The CPU convolution algorithms one layer may run, for the convolution and
// the transposed convolution alike: every registered algorithm that supports
// the layer's geometry, or only the one its `algorithm` parameter pins.
// Algorithms that compute in 16-bit arithmetic (dnnl_bf16) are offered only
// where x or y is stored in bfloat16 (or where pinned). The memory runtime
// chooses among them per operation and step; where it makes no choice,
// oneDNN's runs when it is available - in 16 bits where the network stores
// 16 bits and the processor computes them.
#ifndef SPILL_LAYERS_CPU_CONV_CHOICE_H_
#define SPILL_LAYERS_CPU_CONV_CHOICE_H_

#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/config/layer_params.h"
#include "layers/convolution_layer.h"
#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {

class ConvAlgorithmChoice {
 public:
  // Reads `algorithm`; an unknown name is an error that lists the known ones.
  explicit ConvAlgorithmChoice(LayerParams& params);

  // Keeps the algorithms that support `g`, in registration order, oneDNN's
  // first where `dnnl_first`. An error when none does.
  Status Select(const ConvGeometry& g, bool dnnl_first);
  // The storage types of x and y changed (Layer::DtypesChanged): offers the
  // selected algorithms again for them.
  void SetDtypes(DType input, DType output);

  const std::vector<const ConvAlgorithm*>& supported() const { return supported_; }
  // The algorithm that runs where the runtime chose none.
  const ConvAlgorithm& fallback() const { return *supported_[default_]; }
  // The algorithm chosen for operation `op` of a pass (an index into
  // supported(), or -1 for none), else the fallback.
  const ConvAlgorithm* Chosen(const std::vector<int>& algorithms, int op) const;

 private:
  std::string pinned_;
  std::vector<const ConvAlgorithm*> selected_;   // for the geometry
  std::vector<const ConvAlgorithm*> supported_;  // and the storage types
  int default_ = 0;
};

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CONV_CHOICE_H_
