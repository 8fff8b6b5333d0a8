// The float32 copies of the 16-bit tensors one computation reads and writes
// (framework/graph/precision.h), carved in order from the front of the
// step's workspace: the executor asks for each view's float32 form before the
// call, converts the copies of what the layer reads, hands the layer the rest
// of the workspace, and after the call converts the copies it wrote back.
// A tensor seen twice in one call (an input read twice) has one copy.
#ifndef SPILL_FRAMEWORK_GRAPH_CONVERSIONS_H_
#define SPILL_FRAMEWORK_GRAPH_CONVERSIONS_H_

#include <vector>

#include "framework/device/device.h"
#include "framework/schedule/declarations.h"

namespace spill {

class Conversions {
 public:
  // `active` false: the layer takes 16-bit tensors as they are
  // (Layer::computes_16_bit), and every view passes through.
  Conversions(Device* device, const Workspace& workspace, bool active = true)
      : device_(device), workspace_(workspace), active_(active) {}

  // `t` as float32: `t` itself when it is float32 (or empty), else its copy.
  // `read`: the layer reads its values; `written`: it writes them (both, for
  // a gradient it adds into).
  Tensor Float(const Tensor& t, bool read, bool written);
  void Float(std::vector<Tensor>* views, bool read, bool written);
  // Converts the copies that are read; call once every view is asked for.
  void ConvertIn();
  // The workspace after the copies: the layer's own.
  Workspace rest() const;
  // Converts the written copies back to their tensors.
  void WriteBack();

 private:
  struct Copy {
    Tensor half;
    float* copy = nullptr;
    bool read = false;
    bool written = false;
  };
  Device* device_;
  Workspace workspace_;
  bool active_;
  size_t used_ = 0;
  std::vector<Copy> copies_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_CONVERSIONS_H_
