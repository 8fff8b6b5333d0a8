#include "memory/planning/feasibility.h"

#include <algorithm>

#include "framework/base/units.h"
#include "memory/scheduler_registry.h"

namespace spill {
namespace {

// The bisection for F(B) stops at this fraction of B, as the minimum's does.
constexpr double kRelativeResolution = 1e-4;

}  // namespace

StatusOr<RunnablePlan> PlanRunnable(const NetworkView& view, const MemoryOptions& options) {
  return PlanRunnable(view, options, 0);
}

StatusOr<RunnablePlan> PlanRunnable(const NetworkView& view, const MemoryOptions& options,
                                    size_t known_minimum) {
  RunnablePlan runnable;
  runnable.requested_budget = runnable.layout_budget = options.device_budget;
  SPILL_ASSIGN_OR_RETURN(runnable.plan, Plan(view, options));
  if (runnable.plan.fits) return runnable;
  // The policy's own plan does not fit: from the minimum on, a smaller
  // budget's layout does.
  StatusOr<size_t> minimum =
      known_minimum > 0 ? StatusOr<size_t>(known_minimum) : MinimumBudget(view, options);
  if (!minimum.ok()) {
    if (minimum.status().code() == StatusCode::kOutOfMemory) return runnable;  // none runs
    return minimum.status();
  }
  if (*minimum > options.device_budget) return runnable;  // below the minimum
  // Largest budget in [minimum, B) whose plan fits: lo fits, hi does not.
  MemoryOptions probe = options;
  size_t lo = *minimum, hi = options.device_budget;
  probe.device_budget = lo;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan fitting, Plan(view, probe));
  if (!fitting.fits) return Internal("the minimum budget's plan does not fit: " + fitting.failure);
  const size_t resolution = std::max<size_t>(
      kPoolBlockBytes, static_cast<size_t>(static_cast<double>(hi) * kRelativeResolution));
  while (hi - lo > resolution) {
    const size_t mid = RoundToBlocks(lo + (hi - lo) / 2);
    if (mid >= hi || mid <= lo) break;
    probe.device_budget = mid;
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, probe));
    if (plan.fits) {
      lo = mid;
      fitting = std::move(plan);
    } else {
      hi = mid;
    }
  }
  runnable.plan = std::move(fitting);
  runnable.layout_budget = lo;
  return runnable;
}

StatusOr<size_t> RunnableBudget(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(RunnablePlan runnable, PlanRunnable(view, options));
  if (!runnable.plan.fits) return OutOfMemory(runnable.plan.failure);
  return runnable.layout_budget;
}

std::string HostShortage(const NetworkView& view, const MemoryOptions& options) {
  const std::string tier =
      options.host_tier == "ram" ? "" : " (host tier " + options.host_tier + ")";
  auto as_is = Plan(view, options);
  if (as_is.ok() && as_is->fits) {
    return "; host memory ran out, not device memory: the plan fits, so the host tier" + tier +
           " could not provide the " + FormatBytes(static_cast<double>(as_is->log.host_peak)) +
           " it needs (" +
           (options.host_tier == "ram" ? "is the machine's memory short?"
                                       : "is the disk under the host tier full?") +
           ")";
  }
  MemoryOptions roomy = options;
  roomy.host_budget = kUnlimitedBudget;
  auto plan = Plan(view, roomy);
  if (!plan.ok() || !plan->fits) return "";
  return "; host memory ran out, not device memory: this run needs " +
         FormatBytes(static_cast<double>(plan->log.host_peak)) + " of host memory" + tier +
         " and has " + FormatBytes(static_cast<double>(options.host_budget)) +
         " (raise memory.host_budget or --host-memory)";
}

std::string ShareAdvice(const NetworkView& view, const MemoryOptions& options, size_t minimum) {
  for (const SettingSpec& spec : SearchableSettings(options.scheduler)) {
    const SizeSetting share = options.settings.Size(spec);
    if (share.bytes != 0 || share.factor >= 1) continue;
    MemoryOptions whole = options;
    SPILL_CHECK(whole.settings.Set(spec.key, "1x").ok());
    auto at_one = MinimumBudget(view, whole);
    if (!at_one.ok() || *at_one >= minimum) continue;
    return "; the " + options.scheduler + " scheduler plans in " + share.ToString() +
           " of the device budget (memory." + spec.key + "): with 1x this mode needs " +
           FormatBytes(static_cast<double>(*at_one)) + " (" + std::to_string(*at_one) + " bytes)";
  }
  return "";
}

std::string DescribeFallback(const RunnablePlan& runnable) {
  if (!runnable.fallback() || !runnable.plan.fits) return "";
  return "the " + runnable.plan.log.mode + " plan at " +
         FormatBytes(static_cast<double>(runnable.requested_budget)) +
         " leaves no room where a smaller budget's does: it runs with the layout of " +
         FormatBytes(static_cast<double>(runnable.layout_budget)) + " (" +
         std::to_string(runnable.layout_budget) + " bytes) inside the budget";
}

Status ExplainOutOfMemory(const Status& status, const NetworkView& view,
                          const MemoryOptions& options) {
  if (status.code() != StatusCode::kOutOfMemory) return status;
  const std::string host = HostShortage(view, options);
  if (!host.empty()) return Status(status.code(), "out of host memory " + status.message() + host);
  std::string advice;
  auto minimum = MinimumBudget(view, options);
  if (minimum.ok()) {
    advice = "; memory mode '" + options.mode + "' needs a device budget of at least " +
             FormatBytes(static_cast<double>(*minimum)) + " (" + std::to_string(*minimum) +
             " bytes) for this network at batch " + std::to_string(view.batch) +
             " (raise memory.device_budget or --device-memory, lower the batch, or use a mode that "
             "frees more, such as superneurons)" +
             ShareAdvice(view, options, *minimum);
  }
  return Status(status.code(), "out of device memory " + status.message() + advice);
}

}  // namespace spill
