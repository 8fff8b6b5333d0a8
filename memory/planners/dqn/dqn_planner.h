// dqn: the learned swap and recompute planner (the DQN planner's paper, on
// spill's runtime and simulator). `memory.mode: dqn` plans with it; `plan
// --memory dqn` reports its training. A plan is a pure function of the
// network, the limit and memory.planner's settings, so it is trained once
// and cached - in memory for the program's life, and in memory.planner.cache
// (a directory) as a plan file and a weights file, keyed by all three -
// and `plan` and `train` make the same one. No plan within the limit is an
// out-of-memory error, never a fallback.
#ifndef SPILL_MEMORY_PLANNERS_DQN_DQN_PLANNER_H_
#define SPILL_MEMORY_PLANNERS_DQN_DQN_PLANNER_H_

#include <string>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/evaluate.h"
#include "memory/memory_options.h"

namespace spill {

struct DqnPlan {
  Decisions decisions;
  bool feasible = false;
  double seconds = 0;  // simulated iteration time on memory.planner.profile
  size_t peak = 0;     // ideal accounting
  size_t limit = 0;
  int candidates = 0, nodes = 0;
  int episodes = 0, best_episode = 0, updates = 0;
  double train_seconds = 0;   // when it was trained
  bool from_cache = false;    // read back rather than trained by this call
  std::string weights_file;   // in memory.planner.cache ("" without one)
  std::vector<double> curve;  // per episode: its plan's time (negative: over the limit)
};

// The dqn plan of `view` under `options` (memory.planner.limit, or the
// device budget): cached, or trained now.
StatusOr<DqnPlan> PlanDqn(const NetworkView& view, const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_DQN_DQN_PLANNER_H_
