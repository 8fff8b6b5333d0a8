// milp as a memory mode: the program of milp.h solved for memory.planner.limit
// (or the device budget), started from greedy's plan when greedy finds one,
// within memory.planner.milp_seconds. Solved once per network, limit and
// settings in a program (plan and run share it). CBC runs on one thread:
// a solve that proves its optimum within the time limit is the same in
// every program; one stopped by the limit keeps the best plan found by then,
// which a faster or slower machine may not share.
#include <map>
#include <mutex>

#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/planners/milp.h"
#include "memory/scheduler_registry.h"
#include "memory/sim/cost_model.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

std::mutex solved_mutex;
std::map<std::string, MilpResult>& Solved() {
  static auto* solved = new std::map<std::string, MilpResult>();
  return *solved;
}

}  // namespace

StatusOr<MilpResult> PlanMilp(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
  const size_t limit = PlannerLimit(options);
  const PlannerSettings planner = ReadPlannerSettings(options.settings);
  const std::string key = NetworkSignature(view) + " " + std::to_string(view.batch) + " " +
                          std::to_string(model.persistent) + " " + std::to_string(limit) + " " +
                          planner.profile + " " + std::to_string(planner.milp_seconds) + " " +
                          std::to_string(options.settings.Bytes(MinOffloadSetting())) + " " +
                          options.workspace.ToString() + " " + options.params.ToString() +
                          (options.update_on_host ? " update-host" : "");
  std::lock_guard<std::mutex> lock(solved_mutex);
  auto found = Solved().find(key);
  if (found != Solved().end()) return found->second;
  PlanRules rules(model, limit);
  StatusOr<Decisions> greedy = PlanGreedy(rules);
  SPILL_ASSIGN_OR_RETURN(MilpResult result, SolveMilp(model, limit, planner.milp_seconds,
                                                      greedy.ok() ? &*greedy : nullptr));
  Solved()[key] = result;
  return result;
}

namespace {

StatusOr<PhasePlans> MilpPlans(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
  if (model.candidates.empty()) {
    // Nothing to offload or drop: the program has no decision to make, and
    // keeping every tensor is the only plan.
    const size_t limit = PlannerLimit(options);
    if (model.base_peak <= limit) return ToPhasePlans(model, KeepAll(model));
    return NoPlanWithin("milp", model, limit, model.base_peak,
                        BelowMinimumAtPeak(model, KeepAll(model)));
  }
  SPILL_ASSIGN_OR_RETURN(MilpResult result, PlanMilp(view, options));
  if (!result.feasible) {
    const Decisions& d = result.decisions.empty() ? KeepAll(model) : result.decisions;
    return NoPlanWithin(
        "milp", model, PlannerLimit(options), result.peak,
        Joined(result.decisions.empty() ? "CBC found no plan of the program"
                                        : "CBC's plan is over the limit when replayed",
               BelowMinimumAtPeak(model, d)));
  }
  return ToPhasePlans(model, result.decisions);
}

const bool kMilp = RegisterScheduler(
    {"milp",
     "the plan of least simulated overhead under memory.planner.limit by a mixed-integer program "
     "(COIN-OR CBC, memory.planner.milp_seconds)",
     [](const NetworkView& view, const MemoryOptions& options) {
       return PlanWidening(view, options,
                           [&view](const MemoryOptions& o) { return MilpPlans(view, o); });
     },
     {PlannerSettingKeys().limit, PlannerSettingKeys().profile, PlannerSettingKeys().milp_seconds,
      MinOffloadSetting()}});

}  // namespace
}  // namespace spill
