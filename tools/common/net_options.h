// How a program builds its network for a memory configuration.
#ifndef SPILL_TOOLS_COMMON_NET_OPTIONS_H_
#define SPILL_TOOLS_COMMON_NET_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/graph/net.h"
#include "memory/memory_options.h"
#include "memory/workspace_selector.h"

namespace spill {

// Blocked activation layouts (framework/graph/layouts.h) unless the workspace
// policy pins a CPU convolution algorithm that computes on plain tensors, or
// asks for the least memory (memory_optimal): blocked layouts serve the
// algorithms that read them, and every other one would convert each blocked
// tensor to a plain copy and back, the copies as large as the batch (a
// streamed step's slices would still reserve them whole). The copies are
// exact, so a pinned algorithm's results are those of plain layouts.
// `precision` says how activations are stored (framework/graph/precision.h).
NetOptions NetOptionsFor(int64_t batch, DeviceType device, const WorkspacePolicy& workspace,
                         Precision precision = Precision::kFp32);

// An error, naming `what` (the setting) and the device, where `precision`
// cannot run on a device of `type`: tf32 is tensor-core math (CUDA only;
// DeviceConfig::tensor_math). fp16 runs everywhere (on the CPU as 16-bit
// storage around float32 arithmetic); training it needs loss scaling
// (tools/trainer/loss_scale.h).
Status CheckPrecision(Precision precision, DeviceType type, const std::string& what);

// What `precision` asks of the memory runtime, the same in every program that
// plans or trains (plans equal runs): fp16's loss scaling checks every
// gradient before any parameter changes, so parameters in host memory are
// updated after the iteration (MemoryOptions::updates_after_iteration).
void ApplyPrecision(Precision precision, MemoryOptions* memory);

// Whether any activation of `net` is in a blocked layout.
bool HasBlockedLayouts(const Net& net);

// A leaner way to build and plan the network, tried where the plan of the
// configuration as given does not fit its budget. In 16 bits, first the
// larger steps are computed in slices of the batch, whatever the workspace
// policy (NetOptions::slice_copies_from). With the default workspace policy
// (dynamic), attention of `algorithm: auto` then keeps its row statistics
// instead of the probabilities (tiled: backward computes the scores again;
// NetOptions::tiled_attention), blocked layouts give way to plain ones (no whole-batch
// conversion copies), then the algorithms to those of least workspace
// (memory_optimal's - what the planners that search plan for otherwise
// are the fastest, as if memory were free). So the default never
// reaches less than memory_optimal, and it costs speed only where memory
// binds. Every program - train, plan, widest, deepest - tries the same
// builds in the same order, so plans still equal runs.
struct LeanerBuild {
  NetOptions net;             // how to build the network
  WorkspacePolicy workspace;  // the workspace policy to plan and run it with
  std::string note;           // what the programs print when it is used
};
// The builds to try after `net` (built with `options`) does not fit under
// `workspace`, in order; in float32, none unless the policy is dynamic.
std::vector<LeanerBuild> LeanerBuilds(const Net& net, const NetOptions& options,
                                      const WorkspacePolicy& workspace);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_NET_OPTIONS_H_
