// The rules of the schedulers that swap any tensor (window, lms), on
// schedules written by hand step by step - no network, no layer code:
// what enters the window comes in, what leaves it goes out or is released,
// waits are first in first out and only under pressure, a pending swap-out
// is cancelled rather than undone, the budget holds at every point, and the
// runtime executes the plans as the scheduler accounted for them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "memory/schedulers/window.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

constexpr size_t kKiB = 1024;

// A schedule written step by step: tensors by name with sizes in KiB, steps
// by the names they read and write. The first half of the steps is the
// forward pass (the evaluation phase runs only those).
class HandSchedule {
 public:
  TensorId Tensor(const std::string& name, int64_t kib, TensorKind kind = TensorKind::kActivation) {
    TensorInfo info;
    info.name = name;
    info.kind = kind;
    info.shape = Shape(kib * 256, 1, 1, 1);  // floats
    info.layer = 0;
    ids_[name] = schedule_.AddTensor(info);
    return ids_[name];
  }
  void AddStep(const std::vector<std::string>& reads, const std::vector<std::string>& writes) {
    Step step;
    step.index = static_cast<int>(schedule_.steps.size());
    step.pass = Pass::kForward;
    step.layer = 0;
    for (const auto& n : reads) step.reads.push_back(ids_.at(n));
    for (const auto& n : writes) step.writes.push_back(ids_.at(n));
    schedule_.steps.push_back(step);
  }
  // Call once every step is written.
  const Schedule& Done() {
    const int n = static_cast<int>(schedule_.steps.size()) / 2;
    schedule_.route.resize(n);
    for (int i = 0; i < n; ++i) schedule_.route[i] = i;
    for (int s = n; s < 2 * n; ++s) schedule_.steps[s].pass = Pass::kBackward;
    schedule_.layers.resize(1);
    schedule_.forward_step = {0};
    schedule_.backward_step = {2 * n - 1};
    return schedule_;
  }
  TensorId operator[](const std::string& name) const { return ids_.at(name); }
  const Schedule& schedule() const { return schedule_; }

 private:
  Schedule schedule_;
  std::map<std::string, TensorId> ids_;
};

// A chain with a long skip, 100 KiB tensors except the small e:
//   forward:  a; b = f(a); c = f(b); d = f(c); e = f(d, a)
//   backward: each step reads the gradient of its forward's output and what
//             its forward read; a.grad is born at e's backward (step 7) and
//             added into at b's (step 10), three big steps later.
HandSchedule SkipChain() {
  HandSchedule h;
  for (const char* n : {"a", "b", "c", "d"}) h.Tensor(n, 100);
  h.Tensor("e", 10);
  h.Tensor("e.grad", 10, TensorKind::kActivationGrad);
  for (const char* n : {"d.grad", "c.grad", "b.grad", "a.grad"}) {
    h.Tensor(n, 100, TensorKind::kActivationGrad);
  }
  h.AddStep({}, {"a"});
  h.AddStep({"a"}, {"b"});
  h.AddStep({"b"}, {"c"});
  h.AddStep({"c"}, {"d"});
  h.AddStep({"d", "a"}, {"e"});
  h.AddStep({"e"}, {"e.grad"});
  h.AddStep({"e.grad", "d"}, {"d.grad", "a.grad"});
  h.AddStep({"d.grad", "c"}, {"c.grad"});
  h.AddStep({"c.grad", "b"}, {"b.grad"});
  h.AddStep({"b.grad", "a", "a.grad"}, {"a.grad"});
  h.Done();
  return h;
}

// Replays a plan the way the runtime executes it, with every block exactly
// its size (no fragmentation), and checks the scheduler's promises.
struct Replay {
  size_t peak = 0;               // device bytes, offloads pending included
  std::vector<TensorId> begun;   // swap-outs in the order they began
  std::vector<TensorId> waited;  // swap-outs in the order they were waited for
  int prefetches = 0, cancels = 0, on_demand = 0;
  std::string failure;  // the first broken promise
};

Replay ReplayPlan(const Schedule& schedule, const TransferPlan& plan, size_t budget) {
  enum class At { kNone, kDevice, kOffloading, kHost };
  std::vector<At> at(schedule.tensors.size(), At::kNone);
  size_t device = 0;
  Replay r;
  auto size = [&](TensorId t) { return RoundToBlocks(schedule.tensors[t].bytes); };
  auto fail = [&](const std::string& why) {
    if (r.failure.empty()) r.failure = why;
  };
  auto check = [&](int s) {
    r.peak = std::max(r.peak, device);
    if (device > budget) fail("over budget at step " + std::to_string(s));
  };
  auto run = [&](const std::vector<TransferAction>& actions, int s) {
    for (const TransferAction& a : actions) {
      const TensorId t = a.tensor;
      switch (a.op) {
        case TransferOp::kBeginOffload:
          if (at[t] != At::kDevice) fail("offload of a tensor not on the device");
          at[t] = At::kOffloading;
          r.begun.push_back(t);
          break;
        case TransferOp::kFinishOffload:
          if (at[t] != At::kOffloading) fail("wait for a swap-out not pending");
          at[t] = At::kHost;
          device -= size(t);
          r.waited.push_back(t);
          break;
        case TransferOp::kCancelOffload:
          if (at[t] != At::kOffloading) fail("cancel of a swap-out not pending");
          at[t] = At::kDevice;
          r.cancels++;
          break;
        case TransferOp::kPrefetch:
          if (at[t] != At::kHost) fail("prefetch of a tensor not on the host");
          at[t] = At::kDevice;
          device += size(t);
          r.prefetches++;
          break;
        case TransferOp::kRelease:
          if (at[t] == At::kDevice || at[t] == At::kOffloading) device -= size(t);
          at[t] = At::kNone;
          break;
        default:
          fail("unexpected action");
      }
      check(s);
    }
  };
  for (int s = 0; s < plan.num_steps(); ++s) {
    const Step& step = schedule.steps[s];
    for (TensorId t : step.reads) {
      if (at[t] == At::kHost) {  // the runtime would load it on demand
        r.on_demand++;
        at[t] = At::kDevice;
        device += size(t);
      }
      if (at[t] != At::kDevice) fail(schedule.tensors[t].name + " not resident when read");
    }
    for (TensorId t : step.writes) {
      if (at[t] == At::kNone) {
        at[t] = At::kDevice;
        device += size(t);
      }
    }
    check(s);
    run(plan.before[s], s);
    run(plan.after[s], s);
  }
  if (device != 0) fail("tensors outlive the phase");
  return r;
}

WindowSettings Settings(size_t budget_kib, double window) {
  return {budget_kib * kKiB, static_cast<size_t>(window * budget_kib * kKiB)};
}

// Waits come first in, first out, and only as far as the budget needs;
// every step finds its tensors on the device; the budget holds throughout.
TEST(WindowSchedulerTest, KeepsTheBudgetWithFifoWaits) {
  HandSchedule h = SkipChain();
  for (size_t budget : {320, 350, 420, 600}) {
    WindowStats stats;
    auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(budget, 1.5), &stats);
    ASSERT_TRUE(plan.ok()) << budget << ": " << plan.status().ToString();
    Replay r = ReplayPlan(h.schedule(), *plan, budget * kKiB);
    EXPECT_EQ(r.failure, "") << budget;
    EXPECT_EQ(r.on_demand, 0) << budget;
    EXPECT_EQ(r.peak, stats.peak) << budget;
    // FIFO: swap-outs are waited for in the order they began.
    std::vector<TensorId> order;
    for (TensorId t : r.begun) {
      if (std::find(r.waited.begin(), r.waited.end(), t) != r.waited.end() &&
          std::find(order.begin(), order.end(), t) == order.end()) {
        order.push_back(t);
      }
    }
    EXPECT_EQ(order, r.waited) << budget;
    EXPECT_EQ(static_cast<int>(r.waited.size()), stats.waits) << budget;
  }
}

// With room for everything, nothing is waited for or prefetched: tensors
// leave only at their last use (as liveness frees them) or are swapped out
// and cancelled again, never brought back.
TEST(WindowSchedulerTest, WithRoomNothingComesBack) {
  HandSchedule h = SkipChain();
  WindowStats stats;
  auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(100000, 1.5), &stats);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(stats.waits, 0);
  EXPECT_EQ(stats.prefetches, 0);
  EXPECT_EQ(plan->Count(TransferOp::kRelease), 10);  // every transient tensor, once
}

// A swapped-out tensor that re-enters the window before its swap-out was
// waited for is cancelled - its device copy is still there - instead of
// being brought back.
TEST(WindowSchedulerTest, CancelsAPendingSwapOutThatReentersTheWindow) {
  HandSchedule h = SkipChain();
  // A window of 420 KiB: after step 4, c's next use (step 8) lies beyond
  // it, so c is swapped out; it re-enters two steps later, before the
  // budget needed its memory.
  WindowStats stats;
  auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(600, 0.7), &stats);
  ASSERT_TRUE(plan.ok());
  Replay r = ReplayPlan(h.schedule(), *plan, 600 * kKiB);
  EXPECT_EQ(r.failure, "");
  EXPECT_GT(stats.cancels, 0);
  EXPECT_EQ(r.cancels, stats.cancels);
  EXPECT_EQ(std::count(plan->after[4].begin(), plan->after[4].end(),
                       TransferAction{TransferOp::kCancelOffload, h["c"]}),
            1);
}

// Activation gradients swap like any tensor: a.grad, born early in backward
// and added into late, goes to the host in between under a tight budget and
// is back before it is added into.
TEST(WindowSchedulerTest, SwapsActivationGradients) {
  HandSchedule h = SkipChain();
  auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(320, 1.5));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  bool out = false, back = false;
  for (int s = 0; s < plan->num_steps(); ++s) {
    for (const TransferAction& a : plan->after[s]) {
      out = out || (a.tensor == h["a.grad"] && a.op == TransferOp::kFinishOffload);
      back = back || (a.tensor == h["a.grad"] && a.op == TransferOp::kPrefetch);
    }
  }
  EXPECT_TRUE(out);
  EXPECT_TRUE(back);
  EXPECT_EQ(ReplayPlan(h.schedule(), *plan, 320 * kKiB).failure, "");
}

// The look-ahead adapts to sizes: a tensor comes back (prefetched, or its
// swap-out cancelled) as many steps ahead of its use as the window's bytes
// reach, so a larger window brings it back earlier.
TEST(WindowSchedulerTest, LargerWindowsBringTensorsBackEarlier) {
  HandSchedule h = SkipChain();
  const Schedule& schedule = h.schedule();
  auto earliest = [&](double window) {
    auto plan = PlanWindow(schedule, Phase::kTrain, Settings(500, window));
    SPILL_CHECK(plan.ok()) << plan.status().ToString();
    int most = 0;  // steps from a tensor's return to its next read
    for (int s = 0; s < plan->num_steps(); ++s) {
      for (const TransferAction& a : plan->after[s]) {
        if (a.op != TransferOp::kPrefetch && a.op != TransferOp::kCancelOffload) continue;
        int use = s + 1;
        while (std::count(schedule.steps[use].reads.begin(), schedule.steps[use].reads.end(),
                          a.tensor) == 0) {
          ++use;
        }
        most = std::max(most, use - s);
      }
    }
    return most;
  };
  EXPECT_EQ(earliest(0.1), 1);  // only what the next step reads
  EXPECT_LT(earliest(0.1), earliest(1.5));
}

// When the prefetches it let in leave no room for what a later step
// creates, the scheduler backtracks: those prefetches wait until after
// that step, and the plan keeps the budget.
TEST(WindowSchedulerTest, BacktracksWhenACreatedTensorCannotFit) {
  HandSchedule h;
  h.Tensor("x", 100);
  h.Tensor("y", 100);
  h.Tensor("big", 250);
  h.Tensor("z", 50);
  h.Tensor("w", 50);
  h.AddStep({}, {"x"});
  h.AddStep({"x"}, {"y"});
  h.AddStep({"y"}, {"z"});
  h.AddStep({"z"}, {"big"});
  h.AddStep({"big"}, {"w"});
  h.AddStep({"w", "y"}, {});
  h.AddStep({"x"}, {});
  h.AddStep({}, {});
  h.Done();
  WindowStats stats;
  auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(400, 3), &stats);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_GT(stats.backtracks, 0);
  Replay r = ReplayPlan(h.schedule(), *plan, 400 * kKiB);
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(r.on_demand, 0);
}

// A step whose own tensors exceed the budget is an out-of-memory error that
// names the step and its largest tensor.
TEST(WindowSchedulerTest, AStepLargerThanTheBudgetIsOutOfMemory) {
  HandSchedule h = SkipChain();
  auto plan = PlanWindow(h.schedule(), Phase::kTrain, Settings(250, 1.5));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(plan.status().message(), HasSubstr("step 7 (backward"));
  EXPECT_THAT(plan.status().message(), HasSubstr("memory.window_budget"));
}

NetworkView ViewOf(const Schedule& schedule) {
  NetworkView view;
  view.schedule = &schedule;
  view.batch = 1;
  view.layers.push_back({"l", "hand", LayerCost::kCheckpoint, false, false});
  return view;
}

// The runtime executes the window plan exactly as accounted: planned
// without a device under the ideal allocator at the scheduler's budget, no
// step loads anything on demand, every activation is copied to the host at
// most once (it is written once), and the peak is the scheduler's.
TEST(WindowSchedulerTest, TheRuntimeExecutesThePlanAsAccounted) {
  HandSchedule h = SkipChain();
  const NetworkView view = ViewOf(h.schedule());
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("window", &options).ok());
  options.allocator = "ideal";
  options.device_budget = 330 * kKiB;
  options.record_events = true;
  auto settings = WindowSettingsFor(view, Phase::kTrain, options);
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->budget, 330 * kKiB);  // nothing persistent, no workspace
  WindowStats stats;
  ASSERT_TRUE(PlanWindow(h.schedule(), Phase::kTrain, *settings, &stats).ok());
  auto plan = Plan(view, options);
  ASSERT_TRUE(plan.ok() && plan->fits) << (plan.ok() ? plan->failure : "");
  EXPECT_EQ(plan->peak, stats.peak);
  std::map<TensorId, int> copies;
  int prefetches = 0;  // the plan's, and loads on demand if there were any
  for (const MemoryEvent& e : plan->events) {
    if (e.type == MemoryEventType::kBeginOffload && e.bytes > 0) copies[e.tensor]++;
    prefetches += e.type == MemoryEventType::kBeginPrefetch;
  }
  EXPECT_EQ(prefetches, stats.prefetches);
  for (const auto& [t, n] : copies) {
    if (h.schedule().tensors[t].kind == TensorKind::kActivation) {
      EXPECT_EQ(n, 1) << t;
    }
  }
  EXPECT_GT(plan->log.to_host, 0u);
}

// LMS-like: a tensor leaves after a use when its next use is at least the
// threshold away, is waited for one step later and prefetched `ahead` steps
// before its next use; nearer uses keep it.
TEST(LmsSchedulerTest, SwapsAtFixedDistances) {
  HandSchedule h = SkipChain();
  const NetworkView view = ViewOf(h.schedule());
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("lms", &options).ok());
  ASSERT_TRUE(options.settings.Set("lms_threshold", "4").ok());
  ASSERT_TRUE(options.settings.Set("lms_ahead", "1").ok());
  auto plans = MakeTransferPlans(view, options);
  ASSERT_TRUE(plans.ok());
  const TransferPlan& p = plans->train;
  auto has = [&](int step, TransferOp op, const char* name) {
    const auto& list = p.after[step];
    return std::count(list.begin(), list.end(), TransferAction{op, h[name]}) == 1;
  };
  // (Steps one-based.) b, used at 2, 3 and 9: out after step 3, waited
  // after step 4, back before step 8. c (3, 4, 8) and a (1, 2, 5, 10) leave
  // likewise after steps 4 and 5; d (4, 5, 7) and a.grad (7, 10) stay.
  EXPECT_TRUE(has(2, TransferOp::kBeginOffload, "b"));
  EXPECT_TRUE(has(3, TransferOp::kFinishOffload, "b"));
  EXPECT_TRUE(has(6, TransferOp::kPrefetch, "b"));
  EXPECT_TRUE(has(3, TransferOp::kBeginOffload, "c"));
  EXPECT_TRUE(has(4, TransferOp::kBeginOffload, "a"));
  EXPECT_TRUE(has(7, TransferOp::kPrefetch, "a"));
  EXPECT_EQ(p.Count(TransferOp::kBeginOffload), 3);
  Replay r = ReplayPlan(h.schedule(), p, SIZE_MAX);
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(r.on_demand, 0);
}

}  // namespace
}  // namespace spill
