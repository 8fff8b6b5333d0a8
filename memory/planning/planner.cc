#include "memory/planning/planner.h"

#include <algorithm>

#include "memory/runtime/runtime.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/timeline.h"

namespace spill {
namespace {

constexpr double kRelativeResolution = 1e-4;  // bisection stops at 0.01% of the budget
// An upper end that does not fit grows by 1/16, then by steps that double.
constexpr size_t kGrowthDivisor = 16;

// Two iterations of `phase` in a fresh runtime without a device (the second
// lists the tensors live at the peak and gives the records).
StatusOr<MemoryPlan> PlanIterations(const NetworkView& view, const MemoryOptions& options,
                                    const GivenPlans* given,
                                    const std::function<void(const MemoryRuntime&)>& inspect,
                                    Phase phase = Phase::kTrain) {
  MemoryPlan plan;
  auto runtime = MemoryRuntime::Create(view, options, /*device=*/nullptr, given);
  if (!runtime.ok()) {
    if (runtime.status().code() != StatusCode::kOutOfMemory) return runtime.status();
    plan.fits = false;
    plan.failure = runtime.status().message();
    return plan;
  }
  int64_t recomputations = 0;
  for (int iteration = 0; iteration < 2; ++iteration) {
    Status status = RunWithoutDevice(**runtime, phase, &recomputations);
    if (!status.ok()) {
      if (status.code() != StatusCode::kOutOfMemory) return status;
      plan.fits = false;
      plan.failure = status.message();
      return plan;
    }
  }
  const MemoryRuntime& r = **runtime;
  plan.log = r.log();
  plan.peak = plan.log.peak;
  plan.peak_step = plan.log.peak_step;
  plan.persistent = plan.log.persistent;
  plan.footprint = r.allocator().PeakFootprint();
  plan.compacted = plan.log.compacted;
  plan.recomputations = recomputations / 2;
  plan.mismatches = r.allocator().mismatches();
  plan.events = r.events();
  plan.overshoot = plan.log.overshoot;
  if (inspect) inspect(r);
  return plan;
}

// "step 7 (backward conv2): 3.0 MiB past the budget" for the worst step.
std::string DescribeOvershoot(const NetworkView& view, const MemoryLog& log) {
  const StepRecord* worst = nullptr;
  int steps = 0;
  for (const StepRecord& r : log.steps) {
    if (r.overshoot == 0) continue;
    ++steps;
    if (worst == nullptr || r.overshoot > worst->overshoot) worst = &r;
  }
  if (worst == nullptr) return "";
  return std::to_string(steps) + " steps go past the budget, the most at step " +
         std::to_string(worst->step + 1) + " (" +
         (worst->pass == Pass::kForward ? "forward " : "backward ") +
         view.layer(worst->layer).name +
         "): " + FormatBytes(static_cast<double>(worst->overshoot)) + " past it";
}

}  // namespace

StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options) {
  return Plan(view, options, nullptr);
}

StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const std::function<void(const MemoryRuntime&)>& inspect) {
  return PlanIterations(view, options, nullptr, inspect);
}

StatusOr<LengthsPlan> PlanLengths(const NetworkView& view, const MemoryOptions& options,
                                  const std::vector<int64_t>& lengths,
                                  const std::function<StatusOr<NetworkView>(int64_t)>& reshape,
                                  Phase phase) {
  LengthsPlan plan;
  auto created = MemoryRuntime::Create(view, options, /*device=*/nullptr);
  if (!created.ok()) {
    if (created.status().code() != StatusCode::kOutOfMemory) return created.status();
    plan.fits = false;
    plan.failure = created.status().message();
    return plan;
  }
  MemoryRuntime& runtime = **created;
  int64_t recomputations = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    SPILL_ASSIGN_OR_RETURN(NetworkView reshaped, reshape(lengths[i]));
    const int64_t replans = runtime.replans();
    const int64_t mismatches = runtime.allocator().mismatches();
    SPILL_RETURN_IF_ERROR(runtime.Reshape(reshaped));
    Status status = RunWithoutDevice(runtime, phase, &recomputations);
    if (!status.ok()) {
      if (status.code() != StatusCode::kOutOfMemory) return status;
      plan.fits = false;
      plan.failure = "at length " + std::to_string(lengths[i]) + ": " + status.message();
      break;
    }
    MemoryPlan it;
    it.log = runtime.log();
    it.peak = it.log.peak;
    it.peak_step = it.log.peak_step;
    it.persistent = it.log.persistent;
    it.events = runtime.events();
    it.footprint = runtime.allocator().PeakFootprint();
    it.mismatches = runtime.allocator().mismatches() - mismatches;
    plan.peak = std::max(plan.peak, it.peak);
    plan.replanned.push_back(runtime.replans() > replans || it.mismatches > 0);
    plan.iterations.push_back(std::move(it));
  }
  plan.replans = runtime.replans();
  plan.mismatches = runtime.allocator().mismatches();
  plan.footprint = runtime.allocator().PeakFootprint();
  return plan;
}

StatusOr<MemoryPlan> PlanInference(const NetworkView& view, const MemoryOptions& options) {
  return PlanIterations(view, options, nullptr, nullptr, Phase::kEval);
}

StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const PhasePlans& plans, const DeviceProfile& profile) {
  MemoryOptions replay = options;
  replay.record_events = true;
  GivenPlans given;
  given.plans = plans;
  given.overdraft = true;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, PlanIterations(view, replay, &given, nullptr));
  if (plan.overshoot > 0) {
    plan.fits = false;
    plan.failure = DescribeOvershoot(view, plan.log);
  }
  if (!plan.log.steps.empty()) {
    const IterationCosts costs = ModelCosts(view, plan.log, profile, /*measured=*/nullptr);
    plan.seconds =
        SimulateIteration(view, plan.events, costs, profile, BaseDeviceBytes(plan.log, plan.events))
            .seconds;
  }
  return plan;
}

StatusOr<MemoryPlan> Plan(const NetworkView& view, const MemoryOptions& options,
                          const PhasePlans& plans) {
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, FindDeviceProfile("k40-pcie3"));
  return Plan(view, options, plans, profile);
}

namespace {

// What a budget search needs of one probe.
struct BudgetProbe {
  bool fits = false;
  size_t footprint = 0;   // without a limit: where the search starts
  size_t persistent = 0;  // below this nothing runs
  std::string failure;
};
using ProbeAt = std::function<StatusOr<BudgetProbe>(size_t budget)>;

StatusOr<size_t> SearchBudget(const ProbeAt& probe, size_t resolution) {
  SPILL_ASSIGN_OR_RETURN(BudgetProbe unlimited, probe(kUnlimitedBudget));
  if (!unlimited.fits) {
    return OutOfMemory("does not run even without a budget: " + unlimited.failure);
  }
  // With the footprint as budget a run places every block as it did without
  // a limit, so it fits - unless the allocator's choices depend on the
  // region's size (GTBM hangs its high end from the top; best fit may take
  // the last segment once it is the smallest) or the scheduler plans by the
  // budget (window decides differently under that footprint than without a
  // limit): then grow until it fits, by steps that start small (allocators
  // need a little more) and double (a scheduler may need much more).
  // Below the persistent tensors nothing can. Search in between.
  size_t hi = RoundToBlocks(unlimited.footprint), lo = unlimited.persistent;
  size_t growth = std::max<size_t>(kPoolBlockBytes, hi / kGrowthDivisor);
  for (;;) {
    SPILL_ASSIGN_OR_RETURN(BudgetProbe plan, probe(hi));
    if (plan.fits) break;
    if (hi >= kUnlimitedBudget / 2) return OutOfMemory("no budget runs: " + plan.failure);
    lo = hi;
    hi = RoundToBlocks(hi + growth);
    growth *= 2;
  }
  if (resolution == 0) {
    resolution = std::max<size_t>(kPoolBlockBytes, static_cast<size_t>(hi * kRelativeResolution));
  }
  while (hi - lo > resolution) {
    size_t mid = RoundToBlocks(lo + (hi - lo) / 2);
    if (mid >= hi) break;
    SPILL_ASSIGN_OR_RETURN(BudgetProbe plan, probe(mid));
    if (plan.fits) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

}  // namespace

StatusOr<size_t> MinimumBudget(const NetworkView& view, MemoryOptions options, size_t resolution) {
  return SearchBudget(
      [&](size_t budget) -> StatusOr<BudgetProbe> {
        options.device_budget = budget;
        SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
        return BudgetProbe{plan.fits, plan.footprint, plan.persistent, plan.failure};
      },
      resolution);
}

StatusOr<size_t> MinimumBudgetForLengths(
    const std::function<StatusOr<NetworkView>(int64_t)>& reshape, int64_t start,
    MemoryOptions options, const std::vector<int64_t>& lengths, size_t resolution) {
  return SearchBudget(
      [&](size_t budget) -> StatusOr<BudgetProbe> {
        options.device_budget = budget;
        SPILL_ASSIGN_OR_RETURN(NetworkView view, reshape(start));
        SPILL_ASSIGN_OR_RETURN(LengthsPlan plan, PlanLengths(view, options, lengths, reshape));
        const size_t persistent = plan.iterations.empty() ? 0 : plan.iterations.front().persistent;
        return BudgetProbe{plan.fits, plan.footprint, persistent, plan.failure};
      },
      resolution);
}

}  // namespace spill
