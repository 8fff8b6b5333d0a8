// Plans made elsewhere, scored exactly: Plan(view, options, plans) runs a
// given transfer plan instead of the scheduler's. A scheduler's own plan
// replays event for event as planning by mode does; a plan that needs more
// than the budget plays to the end with its overshoot per step, its memory
// curve and its simulated time; a plan built by hand that drops a
// convolution output and rebuilds it trains bit-identically to the baseline,
// and runs as planned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "framework/graph/net.h"
#include "memory/liveness.h"
#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/transfer_plan.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBatch = 3;

testing::SyntheticRun SmallRun(const std::string& mode) {
  testing::SyntheticRun run;
  run.batch = kBatch;
  run.steps = 3;
  run.learning_rate = 0.05f;
  SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok());
  run.memory.device_budget = 64 << 20;
  run.memory.host_budget = 16 << 20;
  run.memory.poison_freed = true;  // a read after free turns into NaN
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  run.memory.record_events = true;
  return run;
}

void ExpectSameEvents(const std::vector<MemoryEvent>& a, const std::vector<MemoryEvent>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].type == b[i].type && a[i].tensor == b[i].tensor && a[i].step == b[i].step &&
                a[i].bytes == b[i].bytes && a[i].offset == b[i].offset)
        << "event " << i << ": " << MemoryEventName(a[i].type) << " at step " << a[i].step
        << " offset " << a[i].offset << " against " << MemoryEventName(b[i].type) << " at step "
        << b[i].step << " offset " << b[i].offset;
  }
}

// A scheduler's plan, handed in, is planned exactly as its mode plans it.
TEST(PlanReplayTest, SchedulersPlanReplaysAsItsMode) {
  for (const char* mode : {"liveness", "offload_recompute", "window"}) {
    SCOPED_TRACE(mode);
    auto net = testing::BuildTrainingNet(testing::MustParse(testing::kResNet), kBatch);
    ASSERT_TRUE(net.ok());
    const NetworkView view = (*net)->view();
    MemoryOptions options = SmallRun(mode).memory;
    auto by_mode = Plan(view, options);
    ASSERT_TRUE(by_mode.ok() && by_mode->fits);
    auto plans = MakeTransferPlans(view, options);
    ASSERT_TRUE(plans.ok());
    // MakeTransferPlans added the parameter transfers; with parameters on
    // the device there are none to add twice.
    auto replayed = Plan(view, options, *plans);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    EXPECT_TRUE(replayed->fits);
    EXPECT_EQ(replayed->overshoot, 0u);
    EXPECT_EQ(replayed->peak, by_mode->peak);
    EXPECT_EQ(replayed->footprint, by_mode->footprint);
    ExpectSameEvents(replayed->events, by_mode->events);
    EXPECT_GT(replayed->seconds, 0);
  }
}

// A plan over the budget plays to the end: every step has its record, the
// steps that do not fit say by how much, and the iteration has a time.
TEST(PlanReplayTest, PlanOverTheBudgetGivesOvershootPerStepCurveAndTime) {
  auto net = testing::BuildTrainingNet(testing::MustParse(testing::kAlexNet), kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  for (const char* allocator : {"first_fit", "ideal"}) {
    SCOPED_TRACE(allocator);
    MemoryOptions options = SmallRun("liveness").memory;
    options.allocator = allocator;
    auto roomy = Plan(view, options);
    ASSERT_TRUE(roomy.ok() && roomy->fits);
    // Room for the persistent tensors and a quarter of the rest.
    options.device_budget =
        RoundToBlocks(roomy->persistent + (roomy->footprint - roomy->persistent) / 4);
    auto planned = Plan(view, options);
    ASSERT_TRUE(planned.ok());
    EXPECT_FALSE(planned->fits);  // planning by mode stops at the first failure
    auto plans = MakeTransferPlans(view, options);
    ASSERT_TRUE(plans.ok());
    auto replayed = Plan(view, options, *plans);
    ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
    EXPECT_FALSE(replayed->fits);
    EXPECT_THAT(replayed->failure, HasSubstr("past the budget"));
    const MemoryLog& log = replayed->log;
    ASSERT_EQ(log.steps.size(), view.schedule->steps.size());
    int over = 0, within = 0;
    for (const StepRecord& r : log.steps) {
      (r.overshoot > 0 ? over : within)++;
      // What the step's placements needed fits the budget plus its overshoot.
      EXPECT_LE(r.peak, options.device_budget + r.overshoot) << "step " << r.step + 1;
      // Accounting alone (ideal): the overshoot is the live bytes past the budget.
      if (std::string(allocator) == "ideal") {
        EXPECT_EQ(r.overshoot, r.peak > options.device_budget ? r.peak - options.device_budget : 0)
            << "step " << r.step + 1;
      }
    }
    EXPECT_GT(over, 0);
    EXPECT_GT(within, 0);
    EXPECT_EQ(replayed->overshoot, log.overshoot);
    EXPECT_GT(replayed->peak, options.device_budget);
    EXPECT_GT(replayed->seconds, 0);
    // The same plan with room: same decisions, no overshoot.
    options.device_budget = roomy->footprint;
    auto fits = Plan(view, options, *plans);
    ASSERT_TRUE(fits.ok());
    EXPECT_TRUE(fits->fits);
    EXPECT_EQ(fits->overshoot, 0u);
    EXPECT_EQ(fits->peak, roomy->peak);
  }
}

// The first convolution output that backward reads again, the last forward
// step that reads it, and the first backward step that does.
struct DropCandidate {
  TensorId tensor = kNoTensor;
  int last_forward = -1;
  int first_backward = -1;
};

DropCandidate FindConvolutionOutput(const NetworkView& view) {
  const Schedule& schedule = *view.schedule;
  const int layers = schedule.num_layers();
  for (int layer : schedule.route) {
    if (view.layer(layer).type != "convolution") continue;
    DropCandidate c;
    c.tensor = schedule.layers[layer].outputs[0];
    for (int s = 0; s < static_cast<int>(schedule.steps.size()); ++s) {
      const auto& reads = schedule.steps[s].reads;
      if (std::find(reads.begin(), reads.end(), c.tensor) == reads.end()) continue;
      if (s < layers) c.last_forward = s;
      if (s >= layers && c.first_backward < 0) c.first_backward = s;
    }
    if (c.last_forward >= 0 && c.first_backward > c.last_forward + 1) return c;
  }
  return {};
}

// By hand: liveness releases, and one convolution output dropped after its
// last forward reader and rebuilt by recomputation the step before backward
// reads it (none with no candidate: liveness releases alone).
PhasePlans DropAndRebuild(const Schedule& schedule, const DropCandidate& c) {
  PhasePlans plans;
  plans.train.liveness = AnalyzeLiveness(schedule, Phase::kTrain);
  plans.train.Resize(plans.train.liveness.num_steps);
  for (int s = 0; s < plans.train.num_steps(); ++s) {
    if (s == c.last_forward) plans.train.after[s].push_back({TransferOp::kDrop, c.tensor});
    for (TensorId id : plans.train.liveness.dies_after[s]) {
      plans.train.after[s].push_back({TransferOp::kRelease, id});
    }
  }
  if (c.tensor != kNoTensor) {
    plans.train.before[c.first_backward - 1].push_back({TransferOp::kRebuild, c.tensor});
  }
  plans.eval.liveness = AnalyzeLiveness(schedule, Phase::kEval);
  plans.eval.Resize(plans.eval.liveness.num_steps);
  for (int s = 0; s < plans.eval.num_steps(); ++s) {
    for (TensorId id : plans.eval.liveness.dies_after[s]) {
      plans.eval.after[s].push_back({TransferOp::kRelease, id});
    }
  }
  return plans;
}

TEST(PlanReplayTest, HandBuiltDropAndRebuildTrainsBitIdenticallyAndAsPlanned) {
  for (const char* yaml : {testing::kResNet, testing::kInception}) {
    const NetSpec spec = testing::MustParse(yaml);
    auto baseline = testing::TrainSynthetic(spec, SmallRun("baseline"));
    ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
    auto net = testing::BuildTrainingNet(spec, kBatch);
    ASSERT_TRUE(net.ok());
    const NetworkView view = (*net)->view();
    const DropCandidate c = FindConvolutionOutput(view);
    ASSERT_NE(c.tensor, kNoTensor);
    testing::SyntheticRun run = SmallRun("liveness");
    run.plans = DropAndRebuild(*view.schedule, c);
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    // Dropped and rebuilt once per iteration.
    EXPECT_EQ(trace->recomputations, run.steps);
    ASSERT_EQ(trace->losses.size(), baseline->losses.size());
    for (size_t i = 0; i < trace->losses.size(); ++i) {
      EXPECT_EQ(trace->losses[i], baseline->losses[i]) << "step " << i;
    }
    EXPECT_TRUE(testing::BitEqual(baseline->params, trace->params));
    // The plan of the same plan is the run, event by event.
    auto plan = Plan(view, run.memory, *run.plans);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->fits);
    EXPECT_EQ(plan->recomputations, 1);
    EXPECT_EQ(plan->peak, trace->log.peak);
    ExpectSameEvents(plan->events, trace->events);
    // And it needs less than liveness alone at the peak it lowers, or the same.
    auto liveness = Plan(view, run.memory);
    ASSERT_TRUE(liveness.ok());
    EXPECT_LE(plan->peak, liveness->peak);
  }
}

// By hand: liveness releases, and two convolutions' steps streamed through
// host memory with the slice and the buffers given: the forward of the
// first in slices of one image, double-buffered, the backward of the last
// in slices of two, single-buffered.
PhasePlans Streamed(const NetworkView& view, int* forward, int* backward) {
  const Schedule& schedule = *view.schedule;
  PhasePlans plans = DropAndRebuild(schedule, DropCandidate{});
  plans.train.streamed.assign(plans.train.num_steps(), StreamedStep{});
  *forward = *backward = -1;
  for (int layer : schedule.route) {
    if (view.layer(layer).type != "convolution") continue;
    if (*forward < 0) *forward = schedule.forward_step[layer];
    *backward = schedule.backward_step[layer];
  }
  plans.train.streamed[*forward] = {1, 2};
  plans.train.streamed[*backward] = {2, 1};
  return plans;
}

// A plan says which steps stream, in which slices, with how many buffers;
// the run does exactly that - neither the runtime's own choice (memory.chunk
// is off) nor a smaller slice - computes bit-identically to the baseline,
// and the plan of the same plan is the run, event by event.
TEST(PlanReplayTest, HandBuiltStreamedStepsRunWithTheGivenSliceAndBuffers) {
  const NetSpec spec = testing::MustParse(testing::kResNet);
  auto baseline = testing::TrainSynthetic(spec, SmallRun("baseline"));
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  auto net = testing::BuildTrainingNet(spec, kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  testing::SyntheticRun run = SmallRun("liveness");
  int forward = -1, backward = -1;
  run.plans = Streamed(view, &forward, &backward);
  ASSERT_GE(forward, 0);
  ASSERT_GT(backward, forward);
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->losses.size(), baseline->losses.size());
  for (size_t i = 0; i < trace->losses.size(); ++i) {
    EXPECT_EQ(trace->losses[i], baseline->losses[i]) << "step " << i;
  }
  EXPECT_TRUE(testing::BitEqual(baseline->params, trace->params));
  EXPECT_EQ(trace->log.streamed, 2);
  const StepRecord& f = trace->log.steps[forward];
  const StepRecord& b = trace->log.steps[backward];
  EXPECT_EQ(f.slice_images, 1);
  EXPECT_EQ(f.stream_buffers, 2);
  EXPECT_EQ(b.slice_images, 2);
  EXPECT_EQ(b.stream_buffers, 1);
  auto plan = Plan(view, run.memory, *run.plans);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits);
  EXPECT_EQ(plan->log.steps[forward].slice_images, 1);
  EXPECT_EQ(plan->log.steps[backward].stream_buffers, 1);
  ExpectSameEvents(plan->events, trace->events);
  // Streaming needs host memory: without it the plan is an error naming the step.
  MemoryOptions no_host = run.memory;
  no_host.host_budget = 0;
  auto refused = Plan(view, no_host, *run.plans);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("step " + std::to_string(forward + 1) + " ("));
}

// A plan names a step's algorithms: the run computes with exactly those,
// whatever the workspace policy would pick (here it pins another), and the
// plan of the same plan is the run, event by event. An algorithm the step
// does not have is an error naming the step.
TEST(PlanReplayTest, HandBuiltAlgorithmsRunAsGiven) {
  auto net = testing::BuildTrainingNet(testing::MustParse(testing::kResNet), kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  const Schedule& schedule = *view.schedule;
  testing::SyntheticRun run = SmallRun("liveness");
  PhasePlans plans = DropAndRebuild(schedule, DropCandidate{});
  plans.train.algorithms.assign(plans.train.num_steps(), {});
  int given = -1;
  std::string name;
  for (int layer : schedule.route) {
    const int step = schedule.backward_step[layer];
    if (view.layer(layer).type != "convolution" || given >= 0) continue;
    const int ops = view.algorithms->NumOps(layer, Pass::kBackward);
    ASSERT_GT(ops, 0);
    for (int op = 0; op < ops; ++op) {
      const auto candidates = view.algorithms->Candidates(layer, Pass::kBackward, op, kBatch);
      ASSERT_GE(candidates.size(), 2u) << view.layer(layer).name;
      const int last = static_cast<int>(candidates.size()) - 1;
      ASSERT_NE(candidates[last].name, "im2col_image");
      plans.train.algorithms[step].push_back(last);
      name += (name.empty() ? "" : " ") + candidates[last].name;
    }
    given = step;
  }
  ASSERT_GE(given, 0);
  run.plans = plans;
  auto trace = testing::TrainSynthetic(testing::MustParse(testing::kResNet), run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->log.steps[given].algorithm, name);
  auto plan = Plan(view, run.memory, plans);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits);
  EXPECT_EQ(plan->log.steps[given].algorithm, name);
  ExpectSameEvents(plan->events, trace->events);

  plans.train.algorithms[given].assign(plans.train.algorithms[given].size(), 99);
  auto refused = Plan(view, run.memory, plans);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(" backward operation 0 has "));
  plans.train.algorithms.resize(3);
  refused = Plan(view, run.memory, plans);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("gives algorithms for 3 steps"));
}

TEST(PlanReplayTest, MalformedPlansAreErrorsNamingTheStepAndAction) {
  auto net = testing::BuildTrainingNet(testing::MustParse(testing::kLeNet), kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  const MemoryOptions options = SmallRun("liveness").memory;
  PhasePlans short_plan;
  short_plan.train.Resize(3);
  auto status = Plan(view, options, short_plan);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.status().message(), HasSubstr("the schedule has"));

  PhasePlans bad_tensor;
  bad_tensor.train.Resize(static_cast<int>(view.schedule->steps.size()));
  bad_tensor.train.after[2].push_back({TransferOp::kDrop, 100000});
  status = Plan(view, options, bad_tensor);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.status().message(), HasSubstr("train step 3 after: drop of tensor 100000"));

  PhasePlans late_prefetch;
  late_prefetch.train.Resize(static_cast<int>(view.schedule->steps.size()));
  late_prefetch.train.after[1].push_back({TransferOp::kPrefetch, 0});
  status = Plan(view, options, late_prefetch);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.status().message(), HasSubstr("acts before a step only"));

  PhasePlans update;
  update.train.Resize(static_cast<int>(view.schedule->steps.size()));
  update.train.after[1].push_back({TransferOp::kUpdate, view.schedule->parameters[0].param});
  status = Plan(view, options, update);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.status().message(), HasSubstr("live in host memory"));
}

}  // namespace
}  // namespace spill
