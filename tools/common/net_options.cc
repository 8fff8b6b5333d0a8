#include "tools/common/net_options.h"

#include "layers/cpu/conv_algorithm.h"

namespace spill {

NetOptions NetOptionsFor(int64_t batch, DeviceType device, const WorkspacePolicy& workspace,
                         Precision precision) {
  NetOptions options;
  options.batch = batch;
  options.device = device;
  options.precision = precision;
  // Least memory keeps attention's row statistics; every other policy the
  // probabilities until a plan does not fit (LeanerBuilds).
  options.tiled_attention = workspace.kind == WorkspacePolicy::Kind::kMemoryOptimal;
  if (device != DeviceType::kCpu) return options;
  if (workspace.kind == WorkspacePolicy::Kind::kPin) {
    const cpu::ConvAlgorithm* pinned = cpu::FindConvAlgorithm(workspace.name);
    options.blocked_layouts = pinned == nullptr || pinned->computes_blocked();
  } else if (workspace.kind == WorkspacePolicy::Kind::kMemoryOptimal) {
    options.blocked_layouts = false;
  }
  return options;
}

Status CheckPrecision(Precision precision, DeviceType type, const std::string& what) {
  if (precision == Precision::kTf32 && type != DeviceType::kCuda) {
    return InvalidArgument(what + ": tf32 is tensor-core math for convolutions and matrix " +
                           "products on a GPU (run.device: cuda); the " + DeviceTypeName(type) +
                           " device computes exact float32 (use fp32, or bf16 for memory)");
  }
  return Status::Ok();
}

void ApplyPrecision(Precision precision, MemoryOptions* memory) {
  memory->updates_after_iteration = precision == Precision::kFp16;
}

bool HasBlockedLayouts(const Net& net) {
  for (const TensorInfo& t : net.schedule().tensors) {
    if (t.layout != Layout::kPlain) return true;
  }
  return false;
}

std::vector<LeanerBuild> LeanerBuilds(const Net& net, const NetOptions& options,
                                      const WorkspacePolicy& workspace) {
  std::vector<LeanerBuild> builds;
  // In 16 bits, first the large steps in slices: their float32 copies shrink
  // eightfold, at a little speed (framework/graph/precision.h).
  NetOptions lean = options;
  std::string sliced;
  if (ActivationType(options.precision) != DType::kF32 && options.slice_copies_from == SIZE_MAX) {
    lean.slice_copies_from = kSliceCopiesFrom;
    sliced = "the larger steps computed in eighths of the batch (smaller float32 copies)";
    builds.push_back({lean, workspace, sliced + ": the plan with whole steps does not fit"});
  }
  if (workspace.kind != WorkspacePolicy::Kind::kDynamic) return builds;
  if (net.chooses_attention() && !lean.tiled_attention) {
    lean.tiled_attention = true;
    sliced += std::string(sliced.empty() ? "" : ", and ") +
              "attention of algorithm auto keeping 2 floats per query (tiled) instead of the "
              "probabilities";
    builds.push_back({lean, workspace, sliced + ": the plan with the probabilities does not fit"});
  }
  const std::string also = sliced.empty() ? "" : sliced + ", and ";
  lean.blocked_layouts = false;
  const bool blocked = HasBlockedLayouts(net);
  if (blocked) {
    builds.push_back(
        {lean, workspace,
         also + "every activation layout plain: the plan with blocked layouts does " + "not fit"});
  }
  WorkspacePolicy least;
  least.kind = WorkspacePolicy::Kind::kMemoryOptimal;
  builds.push_back({lean, least,
                    also +
                        "every activation layout plain and the algorithms of least workspace "
                        "(memory_optimal): the plan with the default policy" +
                        (blocked ? "'s layouts and algorithms" : "") + " does not fit"});
  return builds;
}

}  // namespace spill
