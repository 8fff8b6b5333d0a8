#include "memory/schedulers/tensor_sequence.h"

#include <algorithm>

#include "memory/allocators/allocator.h"
#include "memory/heap_pool.h"

namespace spill {

size_t BlockCharge(size_t bytes, bool) { return RoundToBlocks(std::max<size_t>(bytes, 1)); }

TensorSequence BuildTensorSequence(const Schedule& schedule, Phase phase, const Charge& charge) {
  TensorSequence seq;
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  seq.bytes.resize(schedule.tensors.size());
  for (size_t id = 0; id < schedule.tensors.size(); ++id) {
    seq.bytes[id] = charge(schedule.tensors[id].bytes, !IsTransient(schedule.tensors[id].kind));
  }
  for (int s = 0; s < steps; ++s) {
    const Step& step = schedule.steps[s];
    const size_t begin = seq.tensors.size();
    for (const std::vector<TensorId>* list : {&step.reads, &step.writes}) {
      for (TensorId id : *list) {
        if (!IsTransient(schedule.tensors[id].kind)) continue;
        auto first = seq.tensors.begin() + static_cast<std::ptrdiff_t>(begin);
        if (std::find(first, seq.tensors.end(), id) != seq.tensors.end()) continue;
        seq.tensors.push_back(id);
        seq.step.push_back(s);
      }
    }
    seq.step_end.push_back(seq.tensors.size());
  }
  return seq;
}

StatusOr<size_t> PersistentFootprint(const NetworkView& view, const MemoryOptions& options) {
  const Schedule& schedule = *view.schedule;
  AllocatorContext context;
  context.capacity = options.device_budget;
  context.view = &view;
  context.settings = options.settings;
  SPILL_ASSIGN_OR_RETURN(auto allocator, CreateAllocator(options.allocator, context));
  for (TensorId id = 0; id < static_cast<TensorId>(schedule.tensors.size()); ++id) {
    const TensorInfo& t = schedule.tensors[id];
    if (IsTransient(t.kind)) continue;
    AllocRequest request;
    request.bytes = t.bytes;
    request.tensor = id;
    request.category = t.kind == TensorKind::kParam       ? MemoryCategory::kParameters
                       : t.kind == TensorKind::kParamGrad ? MemoryCategory::kParamGradients
                                                          : MemoryCategory::kOptimizerState;
    SPILL_RETURN_IF_ERROR(allocator->Allocate(request).status());
  }
  return allocator->PeakFootprint();
}

size_t WorkspaceReserve(const NetworkView& view, Phase phase, const WorkspacePolicy& policy,
                        const Charge& charge) {
  const Schedule& schedule = *view.schedule;
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  size_t reserve = 0;
  for (int s = 0; s < steps; ++s) {
    const Step& step = schedule.steps[s];
    if (!step.active) continue;
    const int ops = view.algorithms ? view.algorithms->NumOps(step.layer, step.pass) : 0;
    const int64_t images = view.StepImages(step.layer, step.pass);
    size_t bytes = ops == 0 ? view.FixedWorkspace(step, images) : 0;
    for (int op = 0; op < ops; ++op) {
      const auto candidates = view.algorithms->Candidates(step.layer, step.pass, op, images);
      const AlgorithmSelection chosen = SelectAlgorithm(candidates, 0, policy);
      if (chosen.index >= 0) bytes = std::max(bytes, candidates[chosen.index].workspace);
    }
    if (bytes > 0) reserve = std::max(reserve, charge(bytes, false));
  }
  return reserve;
}

}  // namespace spill
