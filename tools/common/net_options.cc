#include "tools/common/net_options.h"

#include "layers/cpu/conv_algorithm.h"

namespace spill {

NetOptions NetOptionsFor(int64_t batch, DeviceType device, const WorkspacePolicy& workspace) {
  NetOptions options;
  options.batch = batch;
  options.device = device;
  if (device != DeviceType::kCpu) return options;
  if (workspace.kind == WorkspacePolicy::Kind::kPin) {
    const cpu::ConvAlgorithm* pinned = cpu::FindConvAlgorithm(workspace.name);
    options.blocked_layouts = pinned == nullptr || pinned->computes_blocked();
  } else if (workspace.kind == WorkspacePolicy::Kind::kMemoryOptimal) {
    options.blocked_layouts = false;
  }
  return options;
}

}  // namespace spill
