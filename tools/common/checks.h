// Checks that need a built network together with a tool's options, shared by
// every tool so that each is made once:
//   * `workspace: pin:NAME` must name an algorithm that some operation of the
//     network can run; otherwise the pin would silently fall back to the
//     least-workspace algorithm everywhere.
#ifndef SPILL_TOOLS_COMMON_CHECKS_H_
#define SPILL_TOOLS_COMMON_CHECKS_H_

#include "framework/base/status.h"
#include "framework/graph/net.h"
#include "memory/workspace_selector.h"

namespace spill {

Status CheckPinnedAlgorithm(const Net& net, const WorkspacePolicy& policy);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_CHECKS_H_
