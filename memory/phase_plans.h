// The plans a run executes: the chosen scheduler's (memory/scheduler_registry.h),
// plus the transfers of the parameters that live in host memory; and plans
// made elsewhere (by hand, or by a planner that searches), checked and
// completed before they run.
#ifndef SPILL_MEMORY_PHASE_PLANS_H_
#define SPILL_MEMORY_PHASE_PLANS_H_

#include "framework/base/status.h"
#include "framework/schedule/network_view.h"
#include "framework/schedule/schedule.h"
#include "memory/memory_options.h"
#include "memory/transfer_plan.h"

namespace spill {

// The scheduler's plans, plus the transfers of the parameters that live in
// host memory (memory.params), whatever the scheduler.
StatusOr<PhasePlans> MakeTransferPlans(const NetworkView& view, const MemoryOptions& options);

// The transfers of the parameters that live in host memory (memory.params),
// added to `plans` (MakeTransferPlans adds them to every scheduler's).
void AddParameterTransfers(const Schedule& schedule, const MemoryOptions& options,
                           PhasePlans* plans);

// Checks plans made elsewhere (by hand, or by a planner that searches)
// before they are run: one list per step of each phase, tensors of the
// schedule, prefetches and rebuilds before a step, updates of parameters
// that live in host memory only; an error names the phase, the step and the
// action. What a plan leaves empty is completed: its lifetimes from the
// schedule (AnalyzeLiveness), nothing droppable by the tensor cache.
Status CompletePlans(const Schedule& schedule, const MemoryOptions& options, PhasePlans* plans);

// Whether a persistent tensor lives in host memory between uses under
// `options` (parameters, their gradients and solver state; a gradient that
// is consumed on the device by the update has no home at all).
bool HomeOnHost(const Schedule& schedule, const MemoryOptions& options, TensorId id);

}  // namespace spill

#endif  // SPILL_MEMORY_PHASE_PLANS_H_
