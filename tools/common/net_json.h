// The expanded network as JSON, for other tools (tools/bench/crosscheck_torch.py
// rebuilds it in PyTorch): every layer in route order with its type, its
// parameters as written, its inputs, output shapes and parameter tensors.
#ifndef SPILL_TOOLS_COMMON_NET_JSON_H_
#define SPILL_TOOLS_COMMON_NET_JSON_H_

#include <string>

#include "framework/graph/net.h"

namespace spill {

std::string NetToJson(const Net& net);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_NET_JSON_H_
