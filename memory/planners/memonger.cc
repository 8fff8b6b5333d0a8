// memonger: MXNet's sublinear-memory recomputation (Chen et al. 2016) as a
// baseline: split the route into segments of k layers (k = ceil(sqrt(N)) by
// default, memory.planner.segment otherwise), keep the output of each
// segment's last layer, drop every other output that can be rebuilt -
// convolutions' too - after its last forward use. Backward's first read of a
// dropped tensor reruns its segment's layers from the kept output before it
// (the runtime rebuilds a dropped tensor's dropped inputs first). The plan
// does not depend on the budget: a budget too small for it is out of memory
// where an allocation fails.
#include <cmath>

#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {

Decisions PlanMemonger(const EvalModel& m, int segment) {
  const int k =
      segment > 0 ? segment : std::max(1, static_cast<int>(std::ceil(std::sqrt(m.num_layers))));
  Decisions d = KeepAll(m);
  const Schedule& schedule = *m.schedule;
  for (TensorId t : m.candidates) {
    if (!m.droppable[t]) continue;
    const int position = schedule.forward_step[schedule.tensors[t].layer];
    if ((position + 1) % k == 0) continue;  // a segment's boundary: kept
    d[t] = {TensorChoice::kDrop, m.leaves_after[t], m.needed_at[t]};
  }
  return d;
}

namespace {

const bool kMemonger = RegisterScheduler(
    {"memonger",
     "drops every output but each segment's last (segments of memory.planner.segment layers, "
     "sqrt(N) by default) and reruns segments in backward (MXNet memonger)",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
       return ToPhasePlans(model,
                           PlanMemonger(model, ReadPlannerSettings(options.settings).segment));
     },
     {PlannerSettingKeys().segment, MinOffloadSetting()}});

}  // namespace
}  // namespace spill
