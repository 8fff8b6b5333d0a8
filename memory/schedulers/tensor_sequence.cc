#include "memory/schedulers/tensor_sequence.h"

#include <algorithm>

#include "memory/heap_pool.h"

namespace spill {

size_t BlockCharge(size_t bytes) { return RoundToBlocks(std::max<size_t>(bytes, 1)); }

TensorSequence BuildTensorSequence(const Schedule& schedule, Phase phase, const Charge& charge) {
  TensorSequence seq;
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  seq.bytes.resize(schedule.tensors.size());
  for (size_t id = 0; id < schedule.tensors.size(); ++id) {
    seq.bytes[id] = charge(schedule.tensors[id].bytes);
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

size_t PersistentBytes(const Schedule& schedule, const Charge& charge) {
  size_t bytes = 0;
  for (const TensorInfo& t : schedule.tensors) {
    if (!IsTransient(t.kind)) bytes += charge(t.bytes);
  }
  return bytes;
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
    size_t bytes = ops == 0 ? step.workspace_bytes : 0;
    for (int op = 0; op < ops; ++op) {
      const auto candidates = view.algorithms->Candidates(step.layer, step.pass, op);
      const AlgorithmSelection chosen = SelectAlgorithm(candidates, 0, policy);
      if (chosen.index >= 0) bytes = std::max(bytes, candidates[chosen.index].workspace);
    }
    if (bytes > 0) reserve = std::max(reserve, charge(bytes));
  }
  return reserve;
}

}  // namespace spill
