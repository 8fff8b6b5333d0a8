// The runtime without a device: one iteration's decisions with nothing
// computed, for planning (memory/planning/planner.h) and for the profile that
// profile-guided allocators place from.
#include <utility>

#include "memory/runtime/runtime.h"

namespace spill {
namespace {

// Stands in for the executor: with no device nothing runs, but the runtime
// still counts its recomputations.
class PlanningRunner : public StepRunner {
 public:
  explicit PlanningRunner(int64_t* recomputations) : recomputations_(recomputations) {}
  Status Recompute(int) override {
    ++*recomputations_;
    return Status::Ok();
  }

 private:
  int64_t* recomputations_;
};

}  // namespace

Status RunWithoutDevice(MemoryRuntime& runtime, Phase phase, int64_t* recomputations) {
  const Schedule& schedule = *runtime.view().schedule;
  PlanningRunner runner(recomputations);
  SPILL_RETURN_IF_ERROR(runtime.BeginIteration(phase));
  const int steps = phase == Phase::kTrain ? 2 * schedule.num_layers() : schedule.num_layers();
  for (int s = 0; s < steps; ++s) {
    SPILL_RETURN_IF_ERROR(runtime.PrepareStep(schedule.steps[s], runner));
    runtime.FinishStep(schedule.steps[s]);
  }
  SPILL_RETURN_IF_ERROR(runtime.EndIteration());
  // The solver step moves what a run's moves (no arithmetic without a device).
  return phase == Phase::kTrain ? runtime.FinishUpdate() : Status::Ok();
}

StatusOr<AllocationProfile> ProfileAllocations(const NetworkView& view, MemoryOptions options,
                                               Phase phase, size_t budget,
                                               const PhasePlans* plans) {
  options.allocator = "ideal";
  options.device_budget = budget;
  options.record_events = true;
  options.record_live = false;
  GivenPlans given;
  if (plans != nullptr) {
    given.plans = *plans;
    given.complete = true;
  }
  SPILL_ASSIGN_OR_RETURN(auto runtime, MemoryRuntime::Create(view, options, /*device=*/nullptr,
                                                             plans != nullptr ? &given : nullptr));
  int64_t recomputations = 0;
  SPILL_RETURN_IF_ERROR(RunWithoutDevice(*runtime, phase, &recomputations));
  return ProfileFromEvents(runtime->events(), phase, budget);
}

}  // namespace spill
