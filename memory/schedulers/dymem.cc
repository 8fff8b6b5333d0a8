// dymem: Dymem's dependency-aware offload and prefetch (HPDC '20, §3.2), and
// vdnn, a vDNN-like baseline with a barrier at every layer.
//
// dymem, training
//   forward   every tensor of the offload set (memory/mobility.h: Dymem's
//             set, or with `offload_set: conv` the inputs of convolutions)
//             starts copying to host right after the step that writes it;
//             the next step does not wait for the copy. Its device block:
//               release: lazy (default) - after its last forward use it
//                 joins a FIFO of offloads given back when an allocation
//                 does not fit, oldest first; those left go at the end of
//                 forward, where the paper synchronises its two streams;
//               release: eager - goes right after its last forward use
//                 (waiting for the copy there if it still runs);
//               barrier: true - besides, the copy is waited for at the end
//                 of the step it overlapped (vDNN's per-layer
//                 synchronisation); the tensor keeps its device block, with
//                 a current host copy, until it is released.
//   backward  prefetch: dymem (default) - Algorithm 2, with the loop bound
//               of the design notes: before the step of layer L, the saved
//               tensors of the layers ahead, up to and including the second
//               convolution ahead (the first when L is a convolution), come
//               back in backward order where they fit without evicting; one
//               that does not fit holds back the rest, which are listed
//               again at the next step;
//             prefetch: ahead - each comes back at the step before its first
//               use (vDNN), so that step's end is where its compute waits.
//   everywhere, each tensor is released after its last use (liveness).
// vdnn: dymem with the conv offload set, eager release, prefetch ahead and
// the barrier (its mode places with best fit, as the paper's baseline).
// Evaluation: liveness releases only. Neither recomputes nor caches.
#include <algorithm>

#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

const SettingSpec kOffloadSet = {
    "offload_set",
    SettingKind::kChoice,
    "dymem",
    "dymem: what is offloaded, dymem (large feature maps) or conv (convolution inputs, as vDNN)",
    0,
    0,
    {"dymem", "conv"}};
const SettingSpec kRelease = {
    "release",
    SettingKind::kChoice,
    "lazy",
    "dymem: when offloaded tensors give their block back, lazy (when room is needed) or eager",
    0,
    0,
    {"lazy", "eager"}};
const SettingSpec kPrefetch = {"prefetch",
                               SettingKind::kChoice,
                               "dymem",
                               "dymem: how offloaded tensors come back, dymem (Algorithm 2) or "
                               "ahead (one layer ahead, as vDNN)",
                               0,
                               0,
                               {"dymem", "ahead"}};
const SettingSpec kBarrier = {
    "barrier", SettingKind::kBool, "false",
    "dymem: wait for every copy at the end of the step it overlapped (vDNN's barrier)"};

// The scheduler's switches, from the settings (dymem) or fixed (vdnn).
struct Switches {
  bool conv_set = false;  // offload_set: conv
  bool lazy = true;       // release: lazy
  bool window = true;     // prefetch: dymem (Algorithm 2)
  bool barrier = false;
  size_t min_offload = 0;
};

void AddReleases(const Liveness& liveness, TransferPlan* plan) {
  for (int s = 0; s < plan->num_steps(); ++s) {
    for (TensorId id : liveness.dies_after[s]) plan->after[s].push_back({TransferOp::kRelease, id});
  }
}

TransferPlan EvalPlan(const Schedule& schedule) {
  TransferPlan plan;
  plan.phase = Phase::kEval;
  plan.liveness = AnalyzeLiveness(schedule, Phase::kEval);
  plan.Resize(plan.liveness.num_steps);
  AddReleases(plan.liveness, &plan);
  return plan;
}

// The forward copy of `t`, written at `producer` and last used in forward at
// `last`, and when its device block goes.
void AddOffload(TensorId t, int producer, int last, int n, const Switches& options,
                TransferPlan* plan) {
  plan->after[producer].push_back({TransferOp::kBeginOffload, t});
  int release = last;
  if (options.barrier) {
    // The copy overlaps the next step; the compute waits for it at its end.
    const int wait = std::min(producer + 1, n - 1);
    plan->after[wait].push_back({TransferOp::kCancelOffload, t});
    release = std::max(last, wait);
    plan->after[release].push_back({TransferOp::kBeginOffload, t});  // host copy current: no copy
  }
  plan->after[release].push_back(
      {options.lazy ? TransferOp::kFinishOffloadLazily : TransferOp::kFinishOffload, t});
}

// Forward offloads, in the order the tensors are written.
void AddOffloads(const Schedule& schedule, const std::vector<bool>& set, const Switches& options,
                 TransferPlan* plan) {
  const int n = schedule.num_layers();
  std::vector<int> producer(schedule.tensors.size(), -1), last(schedule.tensors.size(), -1);
  std::vector<TensorId> order;
  for (int s = 0; s < n; ++s) {
    for (TensorId t : schedule.steps[s].writes) {
      if (producer[t] < 0) {
        producer[t] = s;
        order.push_back(t);
      }
      last[t] = s;
    }
    for (TensorId t : schedule.steps[s].reads) last[t] = s;
  }
  for (TensorId t : order) {
    if (set[t]) AddOffload(t, producer[t], last[t], n, options, plan);
  }
  // The end of forward: every offload still in flight gives its block back.
  if (options.lazy) {
    for (TensorId t : order) {
      if (set[t]) plan->after[n - 1].push_back({TransferOp::kFinishOffload, t});
    }
  }
}

bool IsConvolution(const NetworkView& view, int step) {
  return view.layer(view.schedule->steps[step].layer).traits.convolution;
}

// Algorithm 2 before every backward step k: the saved tensors of the
// offload set read by the active steps after k, up to the second active
// convolution after k when k is one, the third otherwise (exclusive), each
// listed once, in backward order. Linear in the steps plus the actions
// listed: the window's end moves forward with k (the convolutions are found
// once), and steps that save nothing of the set are skipped in one jump.
void AddWindowPrefetches(const NetworkView& view, const std::vector<bool>& set,
                         TransferPlan* plan) {
  const Schedule& schedule = *view.schedule;
  const int n = schedule.num_layers(), end = 2 * n;
  std::vector<int> convolutions;  // active backward steps of convolutions, in order
  // Per step: the next active step at or after it that saves a tensor of the set.
  std::vector<int> next_saving(end + 1, end);
  for (int j = end - 1; j >= n; --j) {
    next_saving[j] = next_saving[j + 1];
    if (!schedule.steps[j].active) continue;
    for (TensorId t : schedule.steps[j].saved) {
      if (set[t]) next_saving[j] = j;
    }
  }
  for (int j = n; j < end; ++j) {
    if (schedule.steps[j].active && IsConvolution(view, j)) convolutions.push_back(j);
  }
  std::vector<int> listed(schedule.tensors.size(), -1);  // the last window listing each
  size_t after = 0;                                      // the first convolution after k
  for (int k = n; k < end; ++k) {
    while (after < convolutions.size() && convolutions[after] <= k) ++after;
    const size_t stop = after + (IsConvolution(view, k) ? 1 : 2);
    const int window_end = stop < convolutions.size() ? convolutions[stop] : end;
    for (int j = next_saving[k + 1]; j < window_end; j = next_saving[j + 1]) {
      for (TensorId t : schedule.steps[j].saved) {
        if (!set[t] || listed[t] == k) continue;
        listed[t] = k;
        plan->before[k].push_back({TransferOp::kPrefetch, t});
      }
    }
  }
  plan->prefetch_in_order = true;
}

// vDNN: each at the step before the first that needs it.
void AddPrefetchesAhead(const Schedule& schedule, const std::vector<bool>& set,
                        TransferPlan* plan) {
  const int n = schedule.num_layers();
  std::vector<bool> done(schedule.tensors.size(), false);
  for (int s = n; s < 2 * n; ++s) {
    for (TensorId t : schedule.steps[s].reads) {
      if (!set[t] || done[t]) continue;
      done[t] = true;
      if (s - 1 >= n) plan->before[s - 1].push_back({TransferOp::kPrefetch, t});
    }
  }
}

StatusOr<PhasePlans> Plans(const NetworkView& view, const MemoryOptions& options,
                           const Switches& switches) {
  if (options.recompute || options.cache) {
    return InvalidArgument("memory: the " + options.scheduler +
                           " scheduler neither recomputes nor caches (recompute and cache must be "
                           "off; the superneurons scheduler has both)");
  }
  const Schedule& schedule = *view.schedule;
  PhasePlans plans;
  plans.eval = EvalPlan(schedule);
  TransferPlan& plan = plans.train;
  plan.phase = Phase::kTrain;
  plan.liveness = AnalyzeLiveness(schedule, Phase::kTrain);
  plan.Resize(plan.liveness.num_steps);
  if (options.offload) {
    const std::vector<bool> set = switches.conv_set
                                      ? ConvInputOffloadSet(view, switches.min_offload)
                                      : DymemOffloadSet(view, switches.min_offload);
    AddOffloads(schedule, set, switches, &plan);
    if (switches.window) {
      AddWindowPrefetches(view, set, &plan);
    } else {
      AddPrefetchesAhead(schedule, set, &plan);
    }
  }
  if (options.liveness) AddReleases(plan.liveness, &plan);
  return plans;
}

const bool kDymem = RegisterScheduler(
    {"dymem",
     "Dymem: large feature maps offloaded without barriers, lazy or eager release, prefetch by "
     "Algorithm 2 or one layer ahead",
     [](const NetworkView& view, const MemoryOptions& options) {
       const PolicySettings& s = options.settings;
       Switches dymem;
       dymem.conv_set = s.Choice(kOffloadSet) == "conv";
       dymem.lazy = s.Choice(kRelease) == "lazy";
       dymem.window = s.Choice(kPrefetch) == "dymem";
       dymem.barrier = s.Bool(kBarrier);
       dymem.min_offload = s.Bytes(MinOffloadSetting());
       return Plans(view, options, dymem);
     },
     {kOffloadSet, kRelease, kPrefetch, kBarrier, MinOffloadSetting()}});

const bool kVdnn = RegisterScheduler(
    {"vdnn",
     "vDNN-like: convolution inputs offloaded, every copy waited for at the end of its step, "
     "prefetch one layer ahead",
     [](const NetworkView& view, const MemoryOptions& options) {
       Switches vdnn;
       vdnn.conv_set = true;
       vdnn.lazy = false;
       vdnn.window = false;
       vdnn.barrier = true;
       vdnn.min_offload = options.settings.Bytes(MinOffloadSetting());
       return Plans(view, options, vdnn);
     },
     {MinOffloadSetting()}});

}  // namespace
}  // namespace spill
