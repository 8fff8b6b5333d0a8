#include "tools/common/scores.h"

#include <algorithm>

#include "framework/device/device_registry.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "framework/graph/net.h"
#include "framework/io/checkpoint.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "memory/workspace_selector.h"

namespace spill {

StatusOr<std::vector<float>> ScoreImages(const NetSpec& spec, const NpzArchive& params,
                                         const std::vector<float>& images, int64_t batch,
                                         const std::string& workspace) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice("cpu", DeviceConfig{}));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, DeviceType::kCpu}));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net, *device));
  MemoryOptions memory;
  // Every tensor kept (the scores are read after the pass), in a budget
  // large enough for them all: the device here is a mapped arena whose
  // untouched pages cost nothing.
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode("baseline", &memory));
  SPILL_ASSIGN_OR_RETURN(memory.workspace, ParseWorkspacePolicy(workspace));
  const size_t fallback = memory.device_budget;
  memory.device_budget = kUnlimitedBudget;
  SPILL_ASSIGN_OR_RETURN(const MemoryPlan needed, Plan(net->view(), memory));
  memory.device_budget = std::max(fallback, needed.peak + needed.peak / 4);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<MemoryRuntime> runtime,
                         MemoryRuntime::Create(net->view(), memory, device.get()));
  Executor executor(*net, device.get(), *runtime);
  SPILL_RETURN_IF_ERROR(InitializeParameters(*net, *runtime, 1));
  SPILL_ASSIGN_OR_RETURN(PartialLoad load, LoadMatchingArrays(params, "weights", *net, *runtime));
  if (!load.fresh.empty() || !load.unused.empty()) {
    return InvalidArgument("the weights do not match the network: " +
                           (load.fresh.empty() ? load.unused[0] : load.fresh[0]));
  }
  if (static_cast<int64_t>(images.size()) != net->input_shape().numel()) {
    return InvalidArgument("the input has " + std::to_string(images.size()) + " values, the net " +
                           net->input_shape().ToString());
  }
  std::vector<float> labels(net->label_shape().numel(), 0.0f);
  HostBatch host{images.data(), labels.data()};
  SPILL_RETURN_IF_ERROR(executor.Run(host, Phase::kEval, 0).status());
  const int loss = net->loss_layers()[0];
  const TensorId scores = net->schedule().layers[loss].inputs[0];
  std::vector<float> out(net->schedule().tensors[scores].shape.numel());
  SPILL_RETURN_IF_ERROR(runtime->ReadTensor(scores, out.data()));
  return out;
}

}  // namespace spill
