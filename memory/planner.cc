#include "memory/planner.h"

#include <algorithm>

#include "framework/executor.h"
#include "memory/runtime.h"

namespace spill {
namespace {

constexpr double kRelativeResolution = 1e-4;  // bisection stops at 0.01% of the budget

}  // namespace

StatusOr<MemoryPlan> Plan(const Net& net, const MemoryOptions& options) {
  MemoryPlan plan;
  auto runtime = MemoryRuntime::Create(net, options, /*device=*/nullptr);
  if (!runtime.ok()) {
    if (runtime.status().code() != StatusCode::kOutOfMemory) return runtime.status();
    plan.fits = false;
    plan.failure = runtime.status().message();
    return plan;
  }
  // No device: the executor asks the runtime for every step, runs nothing.
  Executor executor(net, /*device=*/nullptr, **runtime);
  HostBatch none;
  for (int iteration = 0; iteration < 2; ++iteration) {
    auto result = executor.Run(none, Phase::kTrain, 0);
    if (!result.ok()) {
      if (result.status().code() != StatusCode::kOutOfMemory) return result.status();
      plan.fits = false;
      plan.failure = result.status().message();
      return plan;
    }
  }
  plan.log = (*runtime)->log();
  plan.peak = plan.log.peak;
  plan.peak_step = plan.log.peak_step;
  plan.persistent = plan.log.persistent;
  plan.high_water = (*runtime)->device_pool().stats().high_water;
  plan.recomputations = executor.recomputations() / 2;
  return plan;
}

StatusOr<size_t> MinimumBudget(const Net& net, MemoryOptions options, size_t resolution) {
  MemoryOptions roomy = options;
  roomy.device_budget = kUnlimitedBudget;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan unlimited, Plan(net, roomy));
  if (!unlimited.fits)
    return OutOfMemory("does not run even without a budget: " + unlimited.failure);
  // With the high-water mark as budget the run places every block exactly as
  // it did without a limit, so it fits; below the persistent tensors nothing
  // can. Search in between.
  size_t hi = RoundToBlocks(unlimited.high_water), lo = unlimited.persistent;
  if (resolution == 0) {
    resolution = std::max<size_t>(kPoolBlockBytes, static_cast<size_t>(hi * kRelativeResolution));
  }
  while (hi - lo > resolution) {
    size_t mid = RoundToBlocks(lo + (hi - lo) / 2);
    if (mid >= hi) break;
    options.device_budget = mid;
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(net, options));
    if (plan.fits) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

Status ExplainOutOfMemory(const Status& status, const Net& net, const MemoryOptions& options) {
  if (status.code() != StatusCode::kOutOfMemory) return status;
  std::string advice;
  auto minimum = MinimumBudget(net, options);
  if (minimum.ok()) {
    advice = "; memory mode '" + options.mode + "' needs a device budget of at least " +
             FormatBytes(static_cast<double>(*minimum)) + " (" + std::to_string(*minimum) +
             " bytes) for this network at batch " + std::to_string(net.batch()) +
             " (raise memory.device_budget or --device-memory, lower the batch, or use a mode that "
             "frees more, such as superneurons)";
  }
  return Status(status.code(), "out of device memory " + status.message() + advice);
}

}  // namespace spill
