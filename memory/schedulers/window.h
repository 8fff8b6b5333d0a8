// window: out-of-core scheduling with a locally adaptive window (the window
// paper, §3; the details as nnabla's SwapInOutScheduler settles them).
//
// A window measured in bytes slides over the tensor sequence of the phase
// (tensor_sequence.h). Each tensor counts once, from the step it enters the
// window until its last use inside it. Before step s:
//   (a) tensors newly entering the window come in: one on the host is
//       prefetched, one whose swap-out is still pending is cancelled (its
//       device copy is still there), one not yet created only counts;
//   (b) while the scheduled device bytes - tensors resident or on their way
//       in, plus swap-outs not yet waited for - would exceed the budget, the
//       oldest swap-out is waited for and its device memory freed (FIFO);
//   (c) the tensors step s creates get their memory; if even waiting for
//       every swap-out cannot make room, the scheduler backtracks: it stops
//       the latest prefetches until after step s and plans the phase again.
// After step s, each of its tensors that does not occur again in the window
// is swapped out - or released when step s was its last use. A tensor is
// never transferred twice for one purpose: a swap-out of an unchanged tensor
// whose host copy is current copies nothing (the residency machine's rule),
// and a pending swap-out is cancelled rather than followed by a swap-in.
//
// The look-ahead of a step is never cut short of the step's own tensors:
// the window bounds only how far beyond them tensors are brought in, so the
// swap-in distance adapts to tensor sizes - large tensors make the window
// short in steps, small ones long.
//
// Everything is computed ahead, a pure function of the schedule, sizes and
// settings, and emitted as a transfer plan: the actions of "before step s"
// go at the end of step s-1's list (after its swap-outs), so the waits free
// memory before step s allocates anything. The runtime executes them at
// those fixed points, so a plan made without a device equals the run.
//
// Invariant (checked by tests): at every point of the phase, the bytes of
// tensors on the device or on their way there, plus those whose swap-out is
// pending, stay within the budget - except when the tensors of one step do
// not fit it at all, which is an out-of-memory error naming the step.
#ifndef SPILL_MEMORY_SCHEDULERS_WINDOW_H_
#define SPILL_MEMORY_SCHEDULERS_WINDOW_H_

#include <cstddef>

#include "framework/schedule/network_view.h"
#include "framework/schedule/schedule.h"
#include "memory/memory_options.h"
#include "memory/schedulers/tensor_sequence.h"
#include "memory/transfer_plan.h"

namespace spill {

struct WindowSettings {
  size_t budget = 0;  // device bytes the scheduled tensors may fill
  size_t window = 0;  // look-ahead, in bytes of distinct tensors
};

struct WindowStats {
  int backtracks = 0;  // phases planned again after stopping prefetches
  int prefetches = 0;
  int offloads = 0;  // swap-outs begun
  int waits = 0;     // swap-outs waited for (memory freed)
  int cancels = 0;
  size_t peak = 0;  // most bytes scheduled at once
};

// The plan of one phase, with tensors taking what `charge` says. kOutOfMemory
// when a step's own tensors exceed the budget (the message names the step
// and the sizes).
StatusOr<TransferPlan> PlanWindow(const Schedule& schedule, Phase phase,
                                  const WindowSettings& settings, WindowStats* stats = nullptr,
                                  const Charge& charge = BlockCharge);

// Its keys of the memory: section: the budget (window_budget, which the
// tools that search step down themselves) and the look-ahead (window).
const SettingSpec& WindowBudgetSetting();
const SettingSpec& WindowSetting();

// The settings `options` give for `view`: the budget is `window_budget` of
// the device budget less the persistent tensors and the workspace reserve,
// all counted as the allocator takes them; the window is `window` of that
// budget. kOutOfMemory when nothing is left.
StatusOr<WindowSettings> WindowSettingsFor(const NetworkView& view, Phase phase,
                                           const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_SCHEDULERS_WINDOW_H_
