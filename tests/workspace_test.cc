// Choosing a convolution algorithm and its workspace per step: the pure
// selector on synthetic candidates, and the runtime under budgets from roomy
// to minimal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "framework/base/logging.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planning/planner.h"
#include "memory/workspace_selector.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

constexpr size_t kMiB = 1 << 20;

WorkspacePolicy Policy(const std::string& text) { return *ParseWorkspacePolicy(text); }

const std::vector<AlgorithmCandidate> kCandidates = {
    {"fast_big", 1.0, 64 * kMiB},
    {"medium", 2.0, 8 * kMiB},
    {"medium_twin", 2.0, 4 * kMiB},  // same time, less workspace
    {"slow_none", 5.0, 0},
};

TEST(SelectorTest, DynamicTakesTheFastestThatFits) {
  EXPECT_EQ(SelectAlgorithm(kCandidates, 100 * kMiB, Policy("dynamic")).index, 0);
  AlgorithmSelection s = SelectAlgorithm(kCandidates, 10 * kMiB, Policy("dynamic"));
  EXPECT_EQ(s.index, 2);  // the tie in time goes to the smaller workspace
  EXPECT_NE(s.reason.find("fastest within"), std::string::npos);
}

TEST(SelectorTest, OnlyTheZeroWorkspaceOneFits) {
  AlgorithmSelection s = SelectAlgorithm(kCandidates, 1 * kMiB, Policy("dynamic"));
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 0, Policy("dynamic")).index, 3);
}

TEST(SelectorTest, NothingFitsGivesTheLeastWorkspace) {
  std::vector<AlgorithmCandidate> hungry = {{"a", 1.0, 10 * kMiB}, {"b", 3.0, 2 * kMiB}};
  AlgorithmSelection s = SelectAlgorithm(hungry, kMiB, Policy("dynamic"));
  EXPECT_EQ(s.index, 1);
  EXPECT_NE(s.reason.find("none fits"), std::string::npos);
}

TEST(SelectorTest, EmptyList) {
  EXPECT_EQ(SelectAlgorithm({}, 100 * kMiB, Policy("dynamic")).index, -1);
}

TEST(SelectorTest, FixedPolicies) {
  EXPECT_EQ(SelectAlgorithm(kCandidates, 0, Policy("fastest")).index, 0);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 100 * kMiB, Policy("memory_optimal")).index, 3);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 100 * kMiB, Policy("cap:8MiB")).index, 2);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 6 * kMiB, Policy("cap:8MiB")).index, 2);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 2 * kMiB, Policy("cap:8MiB")).index, 3);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 0, Policy("pin:medium")).index, 1);
  EXPECT_EQ(SelectAlgorithm(kCandidates, 0, Policy("pin:absent")).index, 3);
  EXPECT_FALSE(ParseWorkspacePolicy("greedy").ok());
  EXPECT_FALSE(ParseWorkspacePolicy("cap:lots").ok());
}

// Equal workspaces are broken by the backend's candidate order, never by
// the times, which are measured anew in every run: whatever times two runs
// measure, they choose the same algorithm.
TEST(SelectorTest, EqualWorkspacesFollowTheCandidateOrderWhateverTheTimes) {
  std::vector<AlgorithmCandidate> candidates = {
      {"big", 1.0, 32 * kMiB},
      {"first_small", 3.0, 2 * kMiB},
      {"second_small", 2.0, 2 * kMiB},
      {"third_small", 4.0, 2 * kMiB},
  };
  std::vector<double> times = {1.0, 2.0, 3.0, 4.0};
  int runs = 0;
  do {
    for (size_t i = 0; i < candidates.size(); ++i) candidates[i].seconds = times[i];
    EXPECT_EQ(SelectAlgorithm(candidates, 0, Policy("memory_optimal")).index, 1);
    // Nothing fits: the least workspace, again by order.
    EXPECT_EQ(SelectAlgorithm(candidates, kMiB, Policy("dynamic")).index, 1);
    // A pinned algorithm that is missing: the least workspace, by order.
    EXPECT_EQ(SelectAlgorithm(candidates, 0, Policy("pin:absent")).index, 1);
    ++runs;
  } while (std::next_permutation(times.begin(), times.end()));
  EXPECT_EQ(runs, 24);
}

// Equal times go to the smaller workspace, then to the earlier candidate.
TEST(SelectorTest, EqualTimesFollowWorkspaceThenCandidateOrder) {
  const std::vector<AlgorithmCandidate> candidates = {
      {"a", 2.0, 8 * kMiB},
      {"b", 2.0, 4 * kMiB},
      {"c", 2.0, 4 * kMiB},
      {"d", 3.0, 0},
  };
  EXPECT_EQ(SelectAlgorithm(candidates, 100 * kMiB, Policy("dynamic")).index, 1);
  EXPECT_EQ(SelectAlgorithm(candidates, 0, Policy("fastest")).index, 1);
  EXPECT_EQ(SelectAlgorithm(candidates, 100 * kMiB, Policy("cap:4MiB")).index, 1);
  const std::vector<AlgorithmCandidate> twins = {{"x", 2.0, kMiB}, {"y", 2.0, kMiB}};
  EXPECT_EQ(SelectAlgorithm(twins, 100 * kMiB, Policy("dynamic")).index, 0);
}

const char kNet[] = R"(
layers:
  - {name: data, type: input, shape: [8, 16, 16]}
  - {name: conv1, type: convolution, filters: 16, kernel: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 16, kernel: 3, pad: 1}
  - {name: pool, type: max_pool, kernel: 2}
  - {name: conv3, type: convolution, filters: 32, kernel: 3, pad: 1}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

// Measured times are what the dynamic policy chooses by, so a run and its
// resumption must see the same ones: in one process when the settings are
// set again, and in a later process through the cache file, digit for digit.
TEST(ConvTimingTest, MeasuredTimesSurviveResettingAndTheCacheFile) {
  const std::string file =
      (std::filesystem::path(::testing::TempDir()) / "spill_conv_timings_test.tsv").string();
  std::remove(file.c_str());
  ConvGeometry g;
  g.batch = 2, g.channels = 3, g.height = g.width = 9, g.filters = 4,
  g.out_height = g.out_width = 9;
  g.kernel = {3, 3}, g.stride = {1, 1}, g.pad = {1, 1}, g.dilation = {1, 1};
  const cpu::ConvAlgorithm* algorithm = cpu::FindConvAlgorithm("im2col_image");
  ASSERT_NE(algorithm, nullptr);
  const cpu::ConvTimingSettings measure{cpu::ConvTimingMode::kMeasure, file};
  cpu::SetConvTiming(measure);
  const double measured = cpu::ConvSeconds(*algorithm, g, cpu::ConvOp::kBackwardData);
  EXPECT_GT(measured, 0);
  cpu::SetConvTiming(measure);  // as a resumed run in the same process
  EXPECT_EQ(cpu::ConvSeconds(*algorithm, g, cpu::ConvOp::kBackwardData), measured);
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});  // forgets
  EXPECT_NE(cpu::ConvSeconds(*algorithm, g, cpu::ConvOp::kBackwardData), measured);
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, file});  // as a later process: reads the file
  EXPECT_EQ(cpu::ConvSeconds(*algorithm, g, cpu::ConvOp::kBackwardData), measured);
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  std::remove(file.c_str());
}

// No step goes over the budget because of its workspace: from a roomy budget
// down to the smallest that runs, the dynamic policy trades speed for
// memory, and the plan agrees with the run.
// Two steps of kNet at batch 8 under liveness, in plain layouts (oneDNN's
// convolutions then reorder in their workspace, so the fastest choice costs
// memory a tight budget cannot give), with modelled convolution times.
testing::SyntheticRun PlainRun() {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  testing::SyntheticRun run;
  run.batch = 8;
  run.steps = 2;
  run.blocked_layouts = false;
  SPILL_CHECK(ApplyMemoryMode("liveness", &run.memory).ok());
  return run;
}

TEST(DynamicWorkspaceTest, NoStepExceedsTheBudgetFromRoomyToMinimal) {
  NetSpec spec = testing::MustParse(kNet);
  testing::SyntheticRun run = PlainRun();
  auto net = testing::BuildTrainingNet(spec, run.batch, DeviceType::kCpu, false);
  ASSERT_TRUE(net.ok());
  MemoryOptions roomy = run.memory;
  roomy.device_budget = 256 * kMiB;
  auto plan = Plan((*net)->view(), roomy);
  ASSERT_TRUE(plan.ok() && plan->fits);
  auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok());
  EXPECT_LT(*minimum, plan->peak);  // smaller workspaces make room
  std::string roomy_choice, tight_choice;
  const size_t budgets[] = {plan->peak + kMiB, (plan->peak + *minimum) / 2, *minimum};
  for (size_t budget : budgets) {
    run.memory.device_budget = budget;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << budget << ": " << trace.status().ToString();
    for (const StepRecord& r : trace->log.steps) ASSERT_LE(r.peak, budget) << "step " << r.step + 1;
    auto planned = Plan((*net)->view(), run.memory);
    ASSERT_TRUE(planned.ok() && planned->fits);
    for (size_t s = 0; s < trace->log.steps.size(); ++s) {
      EXPECT_EQ(planned->log.steps[s].algorithm, trace->log.steps[s].algorithm) << "step " << s + 1;
      EXPECT_EQ(planned->log.steps[s].peak, trace->log.steps[s].peak) << "step " << s + 1;
    }
    const int conv2 = (*net)->schedule().backward_step[(*net)->FindLayer("conv2")];
    (budget == budgets[0] ? roomy_choice : tight_choice) = trace->log.steps[conv2].algorithm;
  }
  EXPECT_NE(roomy_choice, tight_choice);
  EXPECT_NE(roomy_choice.find("dnnl"), std::string::npos);
}

// A streamed step computes its batch slice by slice, and its workspace is a
// slice's: with im2col_batch, whose column matrix holds every image of a
// call, the smallest budget under memory.chunk auto is below the workspace
// one call on the whole batch needs, each streamed step gets the workspace
// of its slices (the larger of a full slice and the last), and the run
// agrees with the plan.
TEST(DynamicWorkspaceTest, StreamedStepsGetTheWorkspaceOfTheirSlices) {
  NetSpec spec = testing::MustParse(kNet);
  testing::SyntheticRun run = PlainRun();
  run.memory.workspace = Policy("pin:im2col_batch");
  run.memory.batch_chunk = kBatchChunkAuto;
  run.memory.host_budget = 64 * kMiB;
  auto net = testing::BuildTrainingNet(spec, run.batch, DeviceType::kCpu, false);
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  // The im2col_batch workspace of each step with algorithms, for calls of n images.
  auto workspace = [&](const Step& step, int64_t n) {
    size_t bytes = 0;
    for (int op = 0; op < view.algorithms->NumOps(step.layer, step.pass); ++op) {
      for (const AlgorithmCandidate& c :
           view.algorithms->Candidates(step.layer, step.pass, op, n)) {
        if (c.name == "im2col_batch") bytes = std::max(bytes, c.workspace);
      }
    }
    return bytes;
  };
  const Schedule& schedule = (*net)->schedule();
  size_t whole = 0;
  for (const Step& step : schedule.steps) whole = std::max(whole, workspace(step, run.batch));
  auto minimum = MinimumBudget(view, run.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
  EXPECT_LT(*minimum, whole);
  run.memory.device_budget = *minimum;
  auto planned = Plan(view, run.memory);
  ASSERT_TRUE(planned.ok() && planned->fits);
  int streamed = 0;
  for (const StepRecord& r : planned->log.steps) {
    const Step& step = schedule.steps[r.step];
    if (r.slice_images == 0 || view.algorithms->NumOps(step.layer, step.pass) == 0) continue;
    ++streamed;
    const int64_t last = run.batch % r.slice_images;
    EXPECT_EQ(r.workspace,
              std::max(workspace(step, r.slice_images), last ? workspace(step, last) : 0))
        << "step " << r.step + 1;
    EXPECT_LT(r.workspace, workspace(step, run.batch)) << "step " << r.step + 1;
  }
  EXPECT_GT(streamed, 0);
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->log.steps.size(), planned->log.steps.size());
  for (size_t s = 0; s < trace->log.steps.size(); ++s) {
    EXPECT_EQ(trace->log.steps[s].workspace, planned->log.steps[s].workspace) << "step " << s + 1;
    EXPECT_EQ(trace->log.steps[s].peak, planned->log.steps[s].peak) << "step " << s + 1;
  }
  EXPECT_LE(trace->log.peak, *minimum);
}

TEST(DynamicWorkspaceTest, FastestPolicyNeedsMoreMemoryThanDynamic) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  NetSpec spec = testing::MustParse(kNet);
  auto net = Net::Build(spec, {8, DeviceType::kCpu, /*blocked_layouts=*/false});
  ASSERT_TRUE(net.ok());
  MemoryOptions dynamic, fastest, frugal;
  fastest.workspace = Policy("fastest");
  frugal.workspace = Policy("memory_optimal");
  auto a = MinimumBudget((*net)->view(), dynamic, kPoolBlockBytes);
  auto b = MinimumBudget((*net)->view(), fastest, kPoolBlockBytes);
  auto c = MinimumBudget((*net)->view(), frugal, kPoolBlockBytes);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_LT(*a, *b);
  EXPECT_EQ(*a, *c);  // at its minimum, dynamic is as frugal as it gets
}

}  // namespace
}  // namespace spill
