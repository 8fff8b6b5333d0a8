#include "memory/liveness.h"

namespace spill {

Liveness AnalyzeLiveness(const Schedule& schedule, Phase phase) {
  Liveness live;
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  live.num_steps = steps;
  live.first_use.assign(schedule.tensors.size(), -1);
  live.last_use.assign(schedule.tensors.size(), -1);
  live.dies_after.resize(steps);
  auto touch = [&](TensorId id, int step) {
    if (!IsTransient(schedule.tensors[id].kind)) return;
    if (live.first_use[id] < 0) live.first_use[id] = step;
    live.last_use[id] = step;
  };
  for (int s = 0; s < steps; ++s) {
    const Step& step = schedule.steps[s];
    for (TensorId id : step.writes) touch(id, s);
    for (TensorId id : step.reads) touch(id, s);
  }
  for (TensorId id = 0; id < static_cast<TensorId>(schedule.tensors.size()); ++id) {
    if (live.last_use[id] >= 0) live.dies_after[live.last_use[id]].push_back(id);
  }
  return live;
}

std::vector<TensorId> Liveness::InSet(int step) const {
  std::vector<TensorId> ids;
  for (TensorId id = 0; id < static_cast<TensorId>(first_use.size()); ++id) {
    if (first_use[id] >= 0 && first_use[id] < step && last_use[id] >= step) ids.push_back(id);
  }
  return ids;
}

std::vector<TensorId> Liveness::OutSet(int step) const {
  std::vector<TensorId> ids;
  for (TensorId id = 0; id < static_cast<TensorId>(first_use.size()); ++id) {
    if (first_use[id] >= 0 && first_use[id] <= step && last_use[id] > step) ids.push_back(id);
  }
  return ids;
}

}  // namespace spill
