// The fast evaluator against the exact check: on random decision vectors
// over the test networks, its peak and per-step memory equal Plan()'s under
// the `ideal` allocator, its iteration time equals the timeline simulator's
// replay of Plan()'s event log (GPU-like and inline-compute profiles), and
// the plans it emits run. Snapshots replay only the rest of the schedule.
#include "memory/evaluate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "framework/graph/net.h"
#include "memory/planning/planner.h"
#include "memory/scheduler_registry.h"
#include "memory/sim/timeline.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

constexpr int64_t kBatch = 32;
constexpr int kVectorsPerNetwork = 200;  // 1,000 over the five networks
constexpr double kRelativeTolerance = 1e-6;

// The plans a test hands the runtime: a scheduler that returns them.
PhasePlans* given_plans = nullptr;
const bool kGiven =
    RegisterScheduler({"evaluate_test_given", "the plans the evaluator test hands in",
                       [](const NetworkView&, const MemoryOptions&) -> StatusOr<PhasePlans> {
                         return *given_plans;
                       }});

MemoryOptions GivenPlanOptions() {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode("offload", &options).ok());
  options.scheduler = "evaluate_test_given";
  options.allocator = "ideal";
  options.device_budget = kUnlimitedBudget;
  options.record_events = true;
  options.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  return options;
}

DeviceProfile InlineProfile() {
  CpuCalibration c{1e11, 2e10, 5e9, 1e-4};
  return CpuProfile(c, 2e9);
}

// A test network built for training and its evaluator model on a GPU profile.
struct Modelled {
  std::unique_ptr<Net> net;
  EvalModel model;
};
Modelled ModelOf(const char* yaml) {
  auto net = testing::BuildTrainingNet(testing::MustParse(yaml), kBatch);
  SPILL_CHECK(net.ok()) << net.status().ToString();
  auto model =
      BuildEvalModel((*net)->view(), GivenPlanOptions(), *FindDeviceProfile("gtx1080ti-pcie3"), 0);
  SPILL_CHECK(model.ok()) << model.status().ToString();
  return {std::move(*net), std::move(*model)};
}

class EvaluateTest : public ::testing::TestWithParam<testing::Network> {};

TEST_P(EvaluateTest, PeakAndTimeEqualPlanAndSimulatorOnRandomDecisions) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto net = testing::BuildTrainingNet(spec, kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView& view = (*net)->view();
  MemoryOptions options = GivenPlanOptions();
  auto gpu = FindDeviceProfile("gtx1080ti-pcie3");
  ASSERT_TRUE(gpu.ok());
  for (const DeviceProfile& profile : {*gpu, InlineProfile()}) {
    auto model = BuildEvalModel(view, options, profile, 0);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    ASSERT_GT(model->candidates.size(), 2u);
    Evaluator evaluator(*model);
    std::mt19937_64 rng(7);
    int moved = 0, recomputed = 0, gradients_moved = 0, left_again = 0;
    const bool gradient_candidates = std::any_of(
        model->candidates.begin(), model->candidates.end(),
        [&](TensorId t) { return view.schedule->tensors[t].kind == TensorKind::kActivationGrad; });
    for (int i = 0; i < kVectorsPerNetwork / 2; ++i) {
      const Decisions d = i == 0 ? KeepAll(*model) : RandomDecisions(*model, rng);
      ASSERT_EQ(CheckDecisions(*model, d), "");
      const Evaluation e = evaluator.Run(d);
      PhasePlans plans = ToPhasePlans(*model, d);
      given_plans = &plans;
      auto plan = Plan(view, options);
      ASSERT_TRUE(plan.ok() && plan->fits) << plan.status().ToString();
      const std::string what = std::string(GetParam().name) + " vector " + std::to_string(i);
      ASSERT_EQ(e.peak, plan->peak) << what;
      for (size_t s = 0; s < plan->log.steps.size(); ++s) {
        ASSERT_EQ(e.step_peak[s], plan->log.steps[s].peak) << what << " step " << s;
        ASSERT_EQ(e.step_total[s], plan->log.steps[s].total) << what << " step " << s;
      }
      EXPECT_EQ(e.recomputations, plan->recomputations) << what;
      EXPECT_EQ(e.to_host, plan->log.to_host) << what;
      EXPECT_EQ(e.to_device, plan->log.to_device) << what;
      const IterationCosts costs = ModelCosts(view, plan->log, profile, nullptr);
      const Timeline timeline = SimulateIteration(view, plan->events, costs, profile,
                                                  BaseDeviceBytes(plan->log, plan->events));
      ASSERT_NEAR(e.seconds, timeline.seconds, kRelativeTolerance * timeline.seconds) << what;
      moved += e.to_host > 0;
      recomputed += e.recomputations > 0;
      left_again +=
          std::any_of(d.begin(), d.end(), [](const TensorDecision& x) { return x.again_out >= 0; });
      for (TensorId t : model->candidates) {
        if (d[t].choice == TensorChoice::kOffload &&
            view.schedule->tensors[t].kind == TensorKind::kActivationGrad) {
          ++gradients_moved;
          break;
        }
      }
    }
    // Not vacuous: most vectors move and rebuild tensors.
    EXPECT_GT(moved, kVectorsPerNetwork / 4);
    EXPECT_GT(recomputed, kVectorsPerNetwork / 4);
    // Networks that fan out hold a gradient while a branch runs backward.
    if (gradient_candidates) EXPECT_GT(gradients_moved, kVectorsPerNetwork / 8);
    // Networks whose activations are read by two backward steps far apart
    // (a unit's input, by its projection and its first convolution) move
    // them out again between the two.
    if (!model->by_again_need.empty()) EXPECT_GT(left_again, kVectorsPerNetwork / 20);
  }
}

// An activation gradient is a candidate over the longest gap between two of
// its uses before anything adds into it again: on a residual network the
// unit's sum gradient, which the shortcut shares - read by the branch's last
// layer and accumulated by the unit's first after the branch's backward
// steps. It may be offloaded, never dropped.
TEST(EvaluateModelTest, ShortcutGradientsAreOffloadCandidates) {
  Modelled m = ModelOf(testing::kResNet);
  const EvalModel* model = &m.model;
  const Schedule& schedule = m.net->schedule();
  int gradients = 0;
  for (TensorId t : model->candidates) {
    if (schedule.tensors[t].kind != TensorKind::kActivationGrad) continue;
    ++gradients;
    EXPECT_TRUE(model->offloadable[t]);
    EXPECT_FALSE(model->droppable[t]);
    const int w = model->leaves_after[t], u = model->needed_at[t];
    const int first = model->liveness.first_use[t];
    EXPECT_GE(w, first);
    EXPECT_GE(first, model->num_layers) << "written in backward";
    for (int s = first + 1; s <= w; ++s) {  // its copy, taken after the first write, is current
      const Step& step = schedule.steps[s];
      EXPECT_EQ(std::count(step.writes.begin(), step.writes.end(), t), 0);
    }
    EXPECT_GE(u - w, 2);
    for (int s = w + 1; s < u; ++s) {
      const Step& step = schedule.steps[s];
      EXPECT_EQ(std::count(step.reads.begin(), step.reads.end(), t), 0);
      EXPECT_EQ(std::count(step.writes.begin(), step.writes.end(), t), 0);
    }
    const Step& next = schedule.steps[u];
    EXPECT_EQ(std::count(next.reads.begin(), next.reads.end(), t), 1) << "accumulated or read";
  }
  EXPECT_GT(gradients, 0);
}

// Parameters living in host memory (memory.params: host) are on the device
// only over the steps their transfers bring them in for, and from a rebuild
// of their layer to its backward; persistent memory is what stays. With
// every activation kept the evaluator's memory of every step is Plan()'s;
// on random decisions it is never below it, so that a plan the planners
// think fits does. Updated on the device or in host memory. (Parameter
// copies are not timed.)
TEST_P(EvaluateTest, HostHomedParametersCountWhereTheyAre) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto net = testing::BuildTrainingNet(spec, kBatch);
  ASSERT_TRUE(net.ok());
  const NetworkView& view = (*net)->view();
  for (bool update_on_host : {false, true}) {
    MemoryOptions options = GivenPlanOptions();
    options.params = *ParseParamPlacement("host");
    options.update_on_host = update_on_host;
    auto model = BuildEvalModel(view, options, *FindDeviceProfile("gtx1080ti-pcie3"), 0);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Evaluator evaluator(*model);
    const Evaluation e = evaluator.Run(KeepAll(*model));
    PhasePlans plans = ToPhasePlans(*model, KeepAll(*model));
    given_plans = &plans;
    auto plan = Plan(view, options);
    ASSERT_TRUE(plan.ok() && plan->fits) << plan.status().ToString();
    const std::string what =
        std::string(GetParam().name) + (update_on_host ? ", update on host" : ", on the device");
    EXPECT_EQ(plan->persistent, model->persistent) << what;
    auto on_device =
        BuildEvalModel(view, GivenPlanOptions(), *FindDeviceProfile("gtx1080ti-pcie3"), 0);
    ASSERT_TRUE(on_device.ok());
    EXPECT_LT(model->persistent, on_device->persistent) << what;
    EXPECT_GT(*std::max_element(model->visiting.begin(), model->visiting.end()), 0u) << what;
    ASSERT_EQ(e.peak, plan->peak) << what;
    for (size_t s = 0; s < plan->log.steps.size(); ++s) {
      ASSERT_EQ(e.step_peak[s], plan->log.steps[s].peak) << what << " step " << s;
    }
    // Every prefetch of a parameter left out (each step reads its own in):
    // lower where they came a step ahead, and still the run's, step by step.
    Decisions late = KeepAll(*model);
    for (const std::vector<TensorId>& params : model->host_params) {
      for (TensorId p : params) late[p].late = kLateForward | kLateBackward;
    }
    ASSERT_EQ(CheckDecisions(*model, late), "");
    const Evaluation e_late = evaluator.Run(late);
    PhasePlans late_plans = ToPhasePlans(*model, late);
    given_plans = &late_plans;
    auto late_run = Plan(view, options);
    ASSERT_TRUE(late_run.ok() && late_run->fits) << late_run.status().ToString();
    int lower = 0;
    for (size_t s = 0; s < late_run->log.steps.size(); ++s) {
      ASSERT_EQ(e_late.step_peak[s], late_run->log.steps[s].peak) << what << " step " << s;
      lower += e_late.step_peak[s] < e.step_peak[s];
    }
    EXPECT_GT(lower, 0) << what;
    // Moved activations, and parameters late at random: never under the run
    // at any step, and within 10 % of its peak.
    std::mt19937_64 rng(11);
    for (int i = 0; i < kVectorsPerNetwork / 8; ++i) {
      const Decisions d = RandomDecisions(*model, rng);
      const Evaluation moved = evaluator.Run(d);
      PhasePlans random = ToPhasePlans(*model, d);
      given_plans = &random;
      auto run = Plan(view, options);
      ASSERT_TRUE(run.ok() && run->fits) << run.status().ToString();
      for (size_t s = 0; s < run->log.steps.size(); ++s) {
        ASSERT_GE(moved.step_peak[s], run->log.steps[s].peak)
            << what << " vector " << i << " step " << s;
      }
      EXPECT_LE(static_cast<double>(moved.peak), 1.1 * static_cast<double>(run->peak))
          << what << " vector " << i;
    }
  }
}

TEST_P(EvaluateTest, SnapshotsReplayOnlyTheRestOfTheSchedule) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto net = testing::BuildTrainingNet(spec, kBatch);
  ASSERT_TRUE(net.ok());
  auto model =
      BuildEvalModel((*net)->view(), GivenPlanOptions(), *FindDeviceProfile("gtx1080ti-pcie3"), 0);
  ASSERT_TRUE(model.ok());
  Evaluator evaluator(*model), fresh(*model);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20; ++i) {
    Decisions d = RandomDecisions(*model, rng);
    // Undecide the candidates written from a step on; the snapshot before
    // it serves every vector that differs only there.
    const TensorId pivot = model->candidates[rng() % model->candidates.size()];
    const int from = model->liveness.first_use[pivot];
    int at = from;
    for (TensorId t : model->candidates) {
      if (model->liveness.first_use[t] < from) continue;
      d[t] = TensorDecision();
      at = std::min(at, FirstAffectedStep(*model, t));
    }
    Evaluator::Snapshot snapshot;
    evaluator.Run(d, nullptr, at, &snapshot);
    Decisions changed = RandomDecisions(*model, rng);
    for (TensorId t : model->candidates) {
      if (model->liveness.first_use[t] < from) changed[t] = d[t];
    }
    const Evaluation incremental = evaluator.Run(changed, &snapshot, -1, nullptr);
    const Evaluation& whole = fresh.Run(changed);
    EXPECT_EQ(incremental.peak, whole.peak);
    EXPECT_EQ(incremental.step_peak, whole.step_peak);
    EXPECT_EQ(incremental.seconds, whole.seconds);
    EXPECT_EQ(incremental.to_host, whole.to_host);
  }
}

TEST(EvaluateChecksTest, BadDecisionsNameTheTensor) {
  Modelled m = ModelOf(testing::kLeNet);
  const EvalModel* model = &m.model;
  const Schedule& schedule = m.net->schedule();
  Decisions d = KeepAll(*model);
  const TensorId t = model->candidates.front();
  d[t] = {TensorChoice::kOffload, model->leaves_after[t] - 1, model->needed_at[t]};
  EXPECT_NE(CheckDecisions(*model, d).find(schedule.tensors[t].name), std::string::npos);
  d = KeepAll(*model);
  const TensorId data = schedule.layers[schedule.route[0]].outputs[0];
  d[data] = {TensorChoice::kDrop, model->leaves_after[data], model->needed_at[data]};
  EXPECT_NE(CheckDecisions(*model, d).find("cannot be dropped"), std::string::npos);
  EXPECT_NE(CheckDecisions(*model, Decisions(3)).find("decisions for 3 tensors"),
            std::string::npos);
}

// A second gap: the longest between two backward uses past the first, with
// no use inside it; only an offloaded tensor leaves over it, and within it.
TEST(EvaluateModelTest, SecondGapsLieBetweenTwoBackwardReads) {
  Modelled m = ModelOf(testing::kResNet);
  const EvalModel& model = m.model;
  const Schedule& schedule = m.net->schedule();
  ASSERT_FALSE(model.by_again_need.empty());
  for (TensorId t : model.by_again_need) {
    const int a = model.again_after[t], v = model.again_needed_at[t];
    EXPECT_TRUE(model.offloadable[t]);
    EXPECT_GE(a, model.needed_at[t]);
    EXPECT_GE(v - a, 2);
    for (int s : {a, v}) {
      const Step& step = schedule.steps[s];
      EXPECT_GE(std::count(step.reads.begin(), step.reads.end(), t), 1) << s;
    }
    for (int s = a + 1; s < v; ++s) {
      const Step& step = schedule.steps[s];
      EXPECT_EQ(std::count(step.reads.begin(), step.reads.end(), t), 0);
      EXPECT_EQ(std::count(step.writes.begin(), step.writes.end(), t), 0);
    }
  }
  const TensorId t = model.by_again_need.front();
  const int a = model.again_after[t], v = model.again_needed_at[t];
  Decisions d = KeepAll(model);
  d[t] = {TensorChoice::kOffload, model.leaves_after[t], model.needed_at[t], a, v};
  EXPECT_EQ(CheckDecisions(model, d), "");
  d[t].again_out = a - 1;
  EXPECT_NE(CheckDecisions(model, d).find("leaves again after step"), std::string::npos);
  d[t] = {TensorChoice::kKeep, -1, -1, a, v};
  EXPECT_NE(CheckDecisions(model, d).find("only an offloaded tensor leaves again"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Networks, EvaluateTest, ::testing::ValuesIn(testing::kNetworks),
                         [](const ::testing::TestParamInfo<testing::Network>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace spill
