// The default work of a layer: an elementwise operation (see Layer::work).
// Layers whose cost is not proportional to their outputs override it.
#include "framework/graph/layer.h"

namespace spill {

double TotalElements(const std::vector<Shape>& shapes) {
  double total = 0;
  for (const Shape& s : shapes) total += static_cast<double>(s.numel());
  return total;
}

LayerWork Layer::work(Pass pass, const std::vector<Shape>& inputs,
                      const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  LayerWork w;
  w.flops = out;
  // Forward: read the inputs, write the outputs. Backward: read the outputs
  // (or inputs) and the output gradients, write the input gradients.
  w.bytes = sizeof(float) * (pass == Pass::kForward ? in + out : in + 2 * out);
  return w;
}

}  // namespace spill
