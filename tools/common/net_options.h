// How a program builds its network for a memory configuration.
#ifndef SPILL_TOOLS_COMMON_NET_OPTIONS_H_
#define SPILL_TOOLS_COMMON_NET_OPTIONS_H_

#include <cstdint>

#include "framework/graph/net.h"
#include "memory/workspace_selector.h"

namespace spill {

// Blocked activation layouts (framework/graph/layouts.h) unless the workspace
// policy pins a CPU convolution algorithm that computes on plain tensors, or
// asks for the least memory (memory_optimal): blocked layouts serve the
// algorithms that read them, and every other one would convert each blocked
// tensor to a plain copy and back, the copies as large as the batch (a
// streamed step's slices would still reserve them whole). The copies are
// exact, so a pinned algorithm's results are those of plain layouts.
NetOptions NetOptionsFor(int64_t batch, DeviceType device, const WorkspacePolicy& workspace);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_NET_OPTIONS_H_
