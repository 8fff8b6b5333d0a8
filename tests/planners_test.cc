// The planners that search, judged on small networks where the exact answer
// is known: at five limits from liveness's peak down to the smallest any plan
// of the DQN planner's actions reaches, the exhaustive optimum over those
// actions, the DQN planner's plan within 5% of its overhead, the MILP's
// bound proven, never above it and above zero wherever it is, greedy's plan
// within the limit, the search's between the optimum and greedy's and at
// the optimum at all limits but one. Then what the planners promise besides: the same seed
// gives the same plan, plans and weights come back from the cache, a trained
// model is a starting point, no plan is an out-of-memory report, and
// lms_count swaps that many tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "framework/config/net_spec.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planners/baselines.h"
#include "memory/planners/dqn/dqn_planner.h"
#include "memory/planners/dqn/learner.h"
#include "memory/planners/exhaustive.h"
#include "memory/planners/milp.h"
#include "memory/planning/planner.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/timeline.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kBatch = 32;
constexpr int kLimits = 5;
constexpr double kDqnGap = 0.05;        // of the optimum's overhead
constexpr double kSlackSeconds = 1e-9;  // float noise in sums of microseconds
constexpr double kMilpSeconds = 60;
constexpr int kSearchEvaluations = 2000;

MemoryOptions PlannerOptions(const std::string& mode) {
  MemoryOptions options;
  SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
  options.allocator = "ideal";
  options.device_budget = kUnlimitedBudget;
  SPILL_CHECK(options.settings.Set("min_offload", "0").ok());
  options.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  return options;
}

// Sets memory.planner.KEY.
void SetPlanner(MemoryOptions* options, const std::string& key, const std::string& value) {
  const Status set = options->settings.Set("planner." + key, value);
  SPILL_CHECK(set.ok()) << set.ToString();
}
void SetPlanner(MemoryOptions* options, const std::string& key, size_t value) {
  SetPlanner(options, key, std::to_string(value));
}
PlannerSettings Planner(const MemoryOptions& options) {
  return ReadPlannerSettings(options.settings);
}

struct Subject {
  std::unique_ptr<Net> net;
  EvalModel model;
};

Subject Load(const char* yaml) {
  Subject s;
  auto net = testing::BuildTrainingNet(testing::MustParse(yaml), kBatch);
  SPILL_CHECK(net.ok());
  s.net = std::move(*net);
  auto model = PlannerModel(s.net->view(), PlannerOptions("dqn"));
  SPILL_CHECK(model.ok()) << model.status().ToString();
  s.model = std::move(*model);
  return s;
}

// The lowest peak any combination of actions reaches (the rules at a limit
// nothing meets are the most frugal).
size_t SmallestPeak(const EvalModel& model) {
  PlanRules rules(model, 0);
  const int k = static_cast<int>(model.candidates.size());
  size_t best = model.base_peak;
  std::vector<int> digit(k, 0);
  Choices choices(model.schedule->tensors.size(), TensorChoice::kKeep);
  for (;;) {
    bool valid = true;
    for (int i = 0; i < k; ++i) {
      const TensorId t = model.candidates[i];
      const TensorChoice c = static_cast<TensorChoice>(digit[i]);
      valid = valid && (c != TensorChoice::kOffload || model.offloadable[t]) &&
              (c != TensorChoice::kDrop || model.droppable[t]);
      choices[t] = c;
    }
    if (valid) best = std::min(best, rules.Evaluate(choices).peak);
    int i = 0;
    while (i < k && ++digit[i] == 3) digit[i++] = 0;
    if (i == k) return best;
  }
}

class SmallNetTest : public ::testing::TestWithParam<testing::Network> {};

TEST_P(SmallNetTest, DqnNearTheOptimumSearchAtItAndTheMilpBoundBelowIt) {
  Subject s = Load(GetParam().yaml);
  const EvalModel& m = s.model;
  ASSERT_GE(m.candidates.size(), 4u);
  ASSERT_LE(m.candidates.size(), static_cast<size_t>(kMaxExhaustiveCandidates));
  const size_t floor = SmallestPeak(m);
  ASSERT_LT(floor, m.base_peak);
  int reached = 0, searched = 0;
  for (int i = 0; i < kLimits; ++i) {
    const size_t limit = floor + (m.base_peak - floor) * i / (kLimits - 1);
    const std::string what = std::string(GetParam().name) + " limit " + std::to_string(limit);
    PlanRules rules(m, limit);
    auto best = SolveExhaustive(rules);
    ASSERT_TRUE(best.ok() && best->feasible) << what;
    const double optimum = best->seconds - m.base_seconds;
    EXPECT_GE(optimum, -kSlackSeconds) << what;
    MemoryOptions options = PlannerOptions("dqn");
    SetPlanner(&options, "limit", limit);
    auto dqn = PlanDqn(s.net->view(), options);
    ASSERT_TRUE(dqn.ok()) << dqn.status().ToString();
    ASSERT_TRUE(dqn->feasible) << what;
    EXPECT_LE(dqn->peak, limit) << what;
    EXPECT_LE(dqn->seconds - m.base_seconds, optimum * (1 + kDqnGap) + kSlackSeconds)
        << what << ": dqn " << dqn->seconds << " s, optimum " << best->seconds << " s";
    auto milp = SolveMilp(m, limit, kMilpSeconds, &best->decisions);
    ASSERT_TRUE(milp.ok()) << milp.status().ToString();
    EXPECT_LE(milp->lower_bound, optimum + kSlackSeconds) << what;
    EXPECT_TRUE(milp->optimal) << what << ": CBC did not prove its optimum in " << kMilpSeconds
                               << " s";
    // Copies and rebuilds are not free in the program: where every plan
    // costs time, so does its bound (the copy queue's rows).
    if (optimum > kSlackSeconds) {
      EXPECT_GT(milp->lower_bound, 0) << what;
    }
    if (milp->feasible) {
      EXPECT_GE(milp->seconds - m.base_seconds, milp->lower_bound - kSlackSeconds) << what;
      EXPECT_GE(milp->seconds, best->seconds - kSlackSeconds) << what;
    }
    auto greedy = PlanGreedy(rules);
    if (greedy.ok()) {
      Evaluator evaluator(m);
      const Evaluation g = evaluator.Run(*greedy);
      EXPECT_LE(g.peak, limit) << what;
      // The search starts from greedy's plan and only ever moves to faster
      // plans that fit: never slower than greedy, never below the optimum.
      auto search = PlanSearch(rules, s.model, kSearchEvaluations, 1);
      ASSERT_TRUE(search.ok()) << what << ": " << search.status().ToString();
      EXPECT_EQ(CheckDecisions(m, *search), "") << what;
      const Evaluation e = evaluator.Run(*search);
      EXPECT_LE(e.peak, limit) << what;
      EXPECT_LE(e.seconds, g.seconds + kSlackSeconds) << what;
      EXPECT_GE(e.seconds, best->seconds - kSlackSeconds) << what;
      reached += e.seconds <= best->seconds + kSlackSeconds;
      ++searched;
    }
  }
  // On these small spaces the search finds the optimum almost everywhere.
  EXPECT_GE(reached, searched - 1) << reached << " of " << searched << " limits at the optimum";
}

// Which random plans CheckProgramNeverOverestimates checks.
enum class PlanFilter {
  kAny,
  kMovingGradients,  // those that offload an activation gradient
  kLeavingAgain,     // those that offload a tensor with a second gap, which leaves
                     // again there
};

// Random plans the fixed rules complete (keep, offload or drop per candidate)
// that fit `limit` and pass `filter`, at most `enough` of `tries`: each is a
// point of the program, and the program's time of each is at most its
// simulated time. Returns how many were checked.
int CheckProgramNeverOverestimates(const EvalModel& m, size_t limit, uint64_t seed, int tries,
                                   int enough, PlanFilter filter) {
  PlanRules rules(m, limit);
  Evaluator evaluator(m);
  std::mt19937_64 rng(seed);
  int checked = 0;
  for (int i = 0; i < tries && checked < enough; ++i) {
    Choices choices(m.schedule->tensors.size(), TensorChoice::kKeep);
    int gradients = 0;
    for (TensorId t : m.candidates) {
      const int c = static_cast<int>(rng() % 3);
      if (c == 1 && m.offloadable[t]) {
        choices[t] = TensorChoice::kOffload;
        gradients += m.schedule->tensors[t].kind == TensorKind::kActivationGrad;
      }
      if (c == 2 && m.droppable[t]) choices[t] = TensorChoice::kDrop;
    }
    if (filter == PlanFilter::kMovingGradients && gradients == 0) continue;
    Decisions d;
    Evaluation e = rules.Evaluate(choices, &d);
    if (!rules.Fits(e)) continue;
    if (filter == PlanFilter::kLeavingAgain) {
      bool again = false;
      for (TensorId t : m.candidates) {
        if (d[t].choice != TensorChoice::kOffload || m.again_after[t] < 0) continue;
        // Away from its first read to just after the last step over the
        // limit before its second, as the rules bring tensors back.
        int last_over = -1;
        for (int s = m.again_after[t] + 1; s < m.again_needed_at[t]; ++s) {
          if (m.base_step_peak[s] > limit) last_over = s;
        }
        if (last_over < 0) continue;
        d[t].again_out = m.again_after[t];
        d[t].again_in = last_over + 1;
        again = true;
      }
      if (!again) continue;
      e = evaluator.Run(d);
      if (e.peak > limit) continue;
    }
    auto modelled = MilpOverheadOf(m, limit, d);
    EXPECT_TRUE(modelled.ok()) << "plan " << i << ": " << modelled.status().ToString();
    if (!modelled.ok()) continue;
    EXPECT_LE(*modelled, e.seconds - m.base_seconds + kSlackSeconds) << "plan " << i;
    ++checked;
  }
  return checked;
}

// The program is a relaxation: its time of any plan the fixed rules make is
// at most the simulated time, and every such plan that fits is one of its
// points.
TEST_P(SmallNetTest, TheProgramNeverOverestimatesAPlan) {
  Subject s = Load(GetParam().yaml);
  const EvalModel& m = s.model;
  const size_t limit = (SmallestPeak(m) + m.base_peak) / 2;
  EXPECT_GT(CheckProgramNeverOverestimates(m, limit, 5, 60, 60, PlanFilter::kAny), 5);
}

// The same on a network whose residual gradients are candidates (a shortcut's
// gradient leaves while its branch runs backward), and where an offloaded
// activation may leave again between two backward reads and come back for
// the second (rules.h, "again"): the program's rows for those offloads and
// second gaps do not overestimate either. Its 48 candidates are too many for
// the exhaustive floor: the limit is a quarter below liveness's peak.
TEST(MilpProgramTest, NeverOverestimatesPlansThatOffloadGradientsOrLeaveAgain) {
  Subject s = Load(testing::kResNet);
  const EvalModel& m = s.model;
  const size_t limit = m.base_peak * 3 / 4;
  EXPECT_GE(CheckProgramNeverOverestimates(m, limit, 7, 200, 12, PlanFilter::kMovingGradients), 6)
      << "plans that offload gradients and fit";
  EXPECT_GE(CheckProgramNeverOverestimates(m, limit, 11, 400, 12, PlanFilter::kLeavingAgain), 6)
      << "plans that leave again and fit";
}

// The MILP's plan is the ordered program's, whose copies in are issued as the
// run issues them: on the U-Net-like network (b32) at the lowest limit greedy
// reaches, where rebuilds need sources that were offloaded, the plan replays
// through the evaluator at the program's own estimate, within half a percent
// of the iteration, and never below the bound proven over the whole space.
TEST(MilpProgramTest, ItsPlanReplaysAtItsObjectiveOnTheUNetAtGreedysFloor) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  auto spec = LoadNetFile("models/unet_like.yaml", {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {kBatch, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("milp", &options).ok());
  options.allocator = "ideal";
  options.device_budget = kUnlimitedBudget;
  auto model = PlannerModel((*net)->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const EvalModel& m = *model;
  size_t lo = m.persistent, hi = m.base_peak;  // greedy's floor, within 1 MiB
  while (hi - lo > (size_t{1} << 20)) {
    const size_t mid = lo + (hi - lo) / 2;
    PlanRules rules(m, mid);
    (PlanGreedy(rules).ok() ? hi : lo) = mid;
  }
  ASSERT_LT(hi, m.base_peak * 6 / 10);
  PlanRules rules(m, hi);
  auto greedy = PlanGreedy(rules);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  auto milp = SolveMilp(m, hi, kMilpSeconds, &*greedy);
  ASSERT_TRUE(milp.ok()) << milp.status().ToString();
  ASSERT_TRUE(milp->feasible);
  EXPECT_TRUE(milp->optimal);
  EXPECT_NEAR(milp->seconds - m.base_seconds, milp->objective, 0.005 * m.base_seconds);
  EXPECT_GE(milp->seconds - m.base_seconds, milp->lower_bound - kSlackSeconds);
}

// Under params: host a plan of the rules may bring a layer's parameters with
// its step instead of one step ahead (rules.h, "late"): greedy's plans near
// its floor on the residual test network that fit only so are points of the
// program too, and it does not overestimate them.
TEST(MilpProgramTest, PlansThatFitOnlyWithParametersLateArePoints) {
  Subject s = Load(testing::kResNet);
  MemoryOptions options = PlannerOptions("milp");
  options.params = *ParseParamPlacement("host");
  auto model = PlannerModel(s.net->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const EvalModel& m = *model;
  ASSERT_TRUE(m.has_host_params);
  // Greedy's plans from its floor up: those that need a late visit.
  size_t lo = m.persistent, hi = m.base_peak;
  while (hi - lo > kPoolBlockBytes) {
    const size_t mid = lo + (hi - lo) / 2;
    PlanRules rules(m, mid);
    (PlanGreedy(rules).ok() ? hi : lo) = mid;
  }
  Evaluator evaluator(m);
  int checked = 0;
  for (size_t limit = hi; limit < hi + hi / 20 && checked < 3; limit += hi / 200) {
    PlanRules rules(m, limit);
    auto greedy = PlanGreedy(rules);
    ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
    Decisions early = *greedy;
    for (TensorDecision& x : early) x.late = 0;
    if (evaluator.Run(early).peak <= limit) continue;
    auto modelled = MilpOverheadOf(m, limit, *greedy);
    ASSERT_TRUE(modelled.ok()) << limit << " bytes: " << modelled.status().ToString();
    EXPECT_LE(*modelled, evaluator.Run(*greedy).seconds - m.base_seconds + kSlackSeconds);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no plan of greedy's from its floor needs a parameter late";
}

INSTANTIATE_TEST_SUITE_P(Networks, SmallNetTest,
                         ::testing::Values(testing::kNetworks[0], testing::kNetworks[3]),
                         [](const ::testing::TestParamInfo<testing::Network>& i) {
                           return std::string(i.param.name);
                         });

// A limit between liveness's peak and the floor, where the planner must act.
size_t MiddleLimit(const EvalModel& m) { return (SmallestPeak(m) + m.base_peak) / 2; }

TEST(DqnPlannerTest, SameSeedSamePlanAndTheCacheGivesItBack) {
  Subject s = Load(testing::kLeNet);
  MemoryOptions options = PlannerOptions("dqn");
  SetPlanner(&options, "limit", MiddleLimit(s.model));
  SetPlanner(&options, "episodes", "30");
  const std::string dir = ::testing::TempDir() + "/dqn_cache";
  std::filesystem::remove_all(dir);
  SetPlanner(&options, "cache", dir);
  auto first = PlanDqn(s.net->view(), options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->episodes, 30);
  ASSERT_FALSE(first->weights_file.empty());
  // Another seed trains anew; the first seed's plan comes back from memory
  // and from the files alike.
  SetPlanner(&options, "seed", "2");
  auto other = PlanDqn(s.net->view(), options);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->from_cache);
  SetPlanner(&options, "seed", "1");
  auto again = PlanDqn(s.net->view(), options);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->seconds, first->seconds);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    files += entry.is_regular_file();
  EXPECT_EQ(files, 4);  // a plan and weights per seed
  // Training again from scratch (another program: nothing in memory) makes
  // the same plan: same weights, same exploration.
  auto model = PlannerModel(s.net->view(), options);
  ASSERT_TRUE(model.ok());
  std::unique_ptr<QNetwork> net1, net2;
  std::unique_ptr<OpGraph> g1, g2;
  auto t1 = TrainDqn(*model, Planner(options).limit, Planner(options), "", &net1, &g1);
  auto t2 = TrainDqn(*model, Planner(options).limit, Planner(options), "", &net2, &g2);
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_EQ(t1->seconds, t2->seconds);
  EXPECT_EQ(t1->curve, t2->curve);
  EXPECT_EQ(net1->weights().w2, net2->weights().w2);
  EXPECT_EQ(t1->seconds, first->seconds);
}

// Learning from greedy's plan (memory.planner.demonstrations: greedy): at
// every limit where greedy finds a plan, the DQN's is at least as fast and
// within the limit, its episode 0 is the demonstration, and the setting is
// part of what the plan is cached by.
TEST(DqnPlannerTest, ADemonstrationIsAPlanToBeatAndPartOfTheKey) {
  Subject s = Load(testing::kAlexNet);
  const EvalModel& m = s.model;
  const size_t floor = SmallestPeak(m);
  int demonstrated = 0;
  for (int i = 0; i < kLimits; ++i) {
    const size_t limit = floor + (m.base_peak - floor) * i / (kLimits - 1);
    PlanRules rules(m, limit);
    auto greedy = PlanGreedy(rules);
    if (!greedy.ok()) continue;
    ++demonstrated;
    Evaluator evaluator(m);
    const Evaluation g = evaluator.Run(*greedy);
    MemoryOptions options = PlannerOptions("dqn");
    SetPlanner(&options, "limit", limit);
    SetPlanner(&options, "episodes", "20");
    SetPlanner(&options, "demonstrations", "greedy");
    auto dqn = PlanDqn(s.net->view(), options);
    ASSERT_TRUE(dqn.ok()) << dqn.status().ToString();
    ASSERT_TRUE(dqn->feasible) << limit;
    EXPECT_LE(dqn->peak, limit);
    EXPECT_LE(dqn->seconds, g.seconds + kSlackSeconds) << limit;
    if (dqn->seconds == g.seconds) {
      EXPECT_EQ(dqn->best_episode, 0) << limit;
    }
    // From scratch is another training, not the cached one.
    SetPlanner(&options, "demonstrations", "none");
    auto scratch = PlanDqn(s.net->view(), options);
    ASSERT_TRUE(scratch.ok());
    EXPECT_FALSE(scratch->from_cache);
  }
  EXPECT_GT(demonstrated, 1);
}

TEST(DqnPlannerTest, ATrainedModelIsAStartAndBadModelsAreReported) {
  Subject s = Load(testing::kAlexNet);
  MemoryOptions options = PlannerOptions("dqn");
  SetPlanner(&options, "limit", MiddleLimit(s.model));
  SetPlanner(&options, "episodes", "20");
  SetPlanner(&options, "cache", ::testing::TempDir() + "/dqn_models");
  std::filesystem::remove_all(Planner(options).cache);
  auto trained = PlanDqn(s.net->view(), options);
  ASSERT_TRUE(trained.ok());
  // One episode from the trained weights applies them: the plan of their
  // greedy policy, which a rollout by hand reproduces.
  SetPlanner(&options, "model", trained->weights_file);
  SetPlanner(&options, "episodes", "1");
  auto applied = PlanDqn(s.net->view(), options);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_FALSE(applied->from_cache);
  EXPECT_EQ(applied->episodes, 1);
  EXPECT_EQ(applied->updates, 0);
  const OpGraph graph = BuildOpGraph(s.model, Planner(options).limit);
  QNetwork net(graph, Planner(options).embedding, /*seed=*/99);
  ASSERT_TRUE(net.Load(trained->weights_file).ok());
  DqnEnvironment env(s.model, Planner(options).limit, graph);
  env.Reset();
  std::vector<float> open;
  Embedding e;
  double best = -1;
  while (!env.done()) {
    env.OpenFeatures(env.prefix(), env.k(), &open);
    net.Embed(open, env.CurrentNode(env.k()), &e);
    TensorChoice choice = TensorChoice::kKeep;
    float q = 0;
    const std::vector<TensorChoice> actions = env.Actions(env.k());
    for (size_t i = 0; i < actions.size(); ++i) {
      const float value = net.Q(e, env.ActionNode(env.k(), actions[i]));
      if (i == 0 || value > q) {
        q = value;
        choice = actions[i];
      }
    }
    env.Step(choice);
    if (env.fits() && (best < 0 || env.seconds() < best)) best = env.seconds();
  }
  EXPECT_EQ(applied->feasible, best >= 0);
  if (best >= 0) {
    EXPECT_EQ(applied->seconds, best);
  }
  SetPlanner(&options, "embedding", "16");  // the file's is 32
  EXPECT_THAT(PlanDqn(s.net->view(), options).status().message(),
              HasSubstr("has embedding 32; memory.planner.embedding is 16"));
  SetPlanner(&options, "embedding", "32");
  const std::string bad = ::testing::TempDir() + "/not_weights.txt";
  std::ofstream(bad) << "hello\n";
  SetPlanner(&options, "model", bad);
  EXPECT_THAT(PlanDqn(s.net->view(), options).status().message(),
              HasSubstr("is not a DQN planner's weights file"));
  SetPlanner(&options, "model", ::testing::TempDir() + "/missing");
  EXPECT_THAT(PlanDqn(s.net->view(), options).status().message(), HasSubstr("cannot read"));
}

// Where only the runtime's heuristics used to fit: ResNet-50 at batch 964,
// 6.5 times what fits 12 GiB in core. At its peak a rebuild of a dropped
// unit output brings its sources back and they stay until read, so no single
// move frees a byte there; greedy then turns the dropped tensor into an
// offloaded one, or offloads a source with the tensors that hold it. Its
// plan, run from shapes, keeps within the budget.
// ResNet-50 (224x224) at `batch` on the CPU device's layers, convolution
// times modelled, under `mode` in 12 GiB.
std::unique_ptr<Net> ResNet50At(int64_t batch, const std::string& mode, MemoryOptions* options) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  auto spec = LoadNetFile("models/resnet50.yaml", {});
  SPILL_CHECK(spec.ok()) << spec.status().ToString();
  auto net = Net::Build(*spec, {batch, DeviceType::kCpu});
  SPILL_CHECK(net.ok()) << net.status().ToString();
  SPILL_CHECK(ApplyMemoryMode(mode, options).ok());
  options->device_budget = size_t{12} << 30;
  options->host_budget = size_t{128} << 30;
  return std::move(*net);
}

TEST(PlannerModesTest, GreedyReachesResNet50AtSixAndAHalfTimesTheInCoreBatch) {
  MemoryOptions options;
  auto net = ResNet50At(964, "greedy", &options);
  auto plan = Plan(net->view(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits) << plan->failure;
  EXPECT_LE(plan->footprint, options.device_budget);
  EXPECT_GT(plan->recomputations, 0);
  EXPECT_GT(plan->log.to_host, 0u);
}

// At 6.5x the in-core batch on an H100's profile, greedy's offloads - each
// free where it was taken - together need more link time than the forward
// pass has; from greedy's plan the search moves to one at least 5% faster in
// simulation, within the same limit.
TEST(PlannerModesTest, SearchIsFasterThanGreedyOnResNet50AtSixAndAHalfTimesTheInCoreBatch) {
  MemoryOptions options;
  auto net = ResNet50At(964, "search", &options);
  SetPlanner(&options, "profile", "h100-pcie5");
  auto model = PlannerModel(net->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PlanRules rules(*model, PlannerLimit(options));
  auto greedy = PlanGreedy(rules);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  Evaluator evaluator(*model);
  const Evaluation g = evaluator.Run(*greedy);
  auto search = PlanSearch(rules, *model, Planner(options).evaluations, Planner(options).seed);
  ASSERT_TRUE(search.ok()) << search.status().ToString();
  const Evaluation e = evaluator.Run(*search);  // with the algorithms the search gave each step
  EXPECT_LE(e.peak, rules.limit());
  EXPECT_LT(e.seconds, 0.95 * g.seconds) << "search " << e.seconds << " s, greedy " << g.seconds;
}

// At 7.5x the in-core batch, stage 1's backward steps hold three 3.3 GiB
// tensors, one of them the unit's sum gradient, which the shortcut shares
// and which waits while the branch runs backward. The search's plan moves
// such gradients out and, run from shapes with its best-fit placement,
// keeps within the budget.
TEST(PlannerModesTest, SearchReachesResNet50AtSevenAndAHalfTimesTheInCoreBatch) {
  MemoryOptions options;
  auto net = ResNet50At(1102, "search", &options);
  SetPlanner(&options, "profile", "h100-pcie5");
  SetPlanner(&options, "evaluations", "2000");
  auto model = PlannerModel(net->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PlanRules rules(*model, PlannerLimit(options));
  auto search = PlanSearch(rules, *model, Planner(options).evaluations, Planner(options).seed);
  ASSERT_TRUE(search.ok()) << search.status().ToString();
  size_t gradients = 0;
  for (TensorId t : model->candidates) {
    if ((*search)[t].choice == TensorChoice::kOffload &&
        net->schedule().tensors[t].kind == TensorKind::kActivationGrad) {
      gradients += net->schedule().tensors[t].bytes;
    }
  }
  EXPECT_GT(gradients, size_t{1} << 30);
  auto plan = Plan(net->view(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits) << plan->failure;
  EXPECT_LE(plan->footprint, options.device_budget);
}

// The evaluator counts live bytes, not where they go: a plan at the very
// limit leaves best fit no room, and the run pays in compaction. search
// places the plans of a few limits as the run will and keeps the fastest:
// on ResNet-50 at batch 32 under 1.1 GiB (40 % of liveness's peak), its
// plan compacts less and runs faster in simulation than the plan of its
// limit alone.
TEST(PlannerModesTest, SearchPlacesItsPlans) {
  MemoryOptions options;
  auto net = ResNet50At(32, "search", &options);
  options.device_budget = static_cast<size_t>(1.1 * static_cast<double>(kGiB));
  options.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  options.record_events = true;
  const DeviceProfile profile = *FindDeviceProfile("gtx1080ti-pcie3");
  struct Run {
    double seconds = 0;
    size_t compacted = 0;
  };
  auto run = [&](int placements) {
    SetPlanner(&options, "placements", std::to_string(placements));
    auto plan = Plan(net->view(), options);
    SPILL_CHECK(plan.ok() && plan->fits) << plan.status().ToString();
    const IterationCosts costs = ModelCosts(net->view(), plan->log, profile, nullptr);
    const Timeline timeline = SimulateIteration(net->view(), plan->events, costs, profile,
                                                BaseDeviceBytes(plan->log, plan->events));
    return Run{timeline.seconds, plan->compacted};
  };
  const Run alone = run(1), placed = run(6);
  EXPECT_LT(placed.compacted, alone.compacted);
  EXPECT_LT(placed.seconds, 0.95 * alone.seconds)
      << "placed " << placed.seconds << " s, at the limit alone " << alone.seconds << " s";
}

// ResNet-50 at 64x64, batch 32, plain layouts, convolution times modelled.
StatusOr<std::unique_ptr<Net>> PlainResNet50At64() {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  SPILL_ASSIGN_OR_RETURN(NetSpec spec,
                         LoadNetFile("models/resnet50.yaml", {{"size", YAML::Node(64)}}));
  NetOptions plain{32, DeviceType::kCpu};
  plain.blocked_layouts = false;
  return Net::Build(spec, plain);
}

// Parameters living in host memory are counted where they live: on the
// device only over the steps their transfers bring them in for. ResNet-50's
// parameters, gradients and solver state take 195 MiB; at 64x64 greedy's
// plan then trains in 120 MiB with them in host memory. Plain layouts and
// the algorithms of least workspace (memory_optimal), which do not depend
// on the processor's vector units - what a run falls back to where the
// default's plan does not fit (tools/common/net_options.h).
TEST(PlannerModesTest, GreedyCountsHostHomedParametersWhereTheyLive) {
  auto net = PlainResNet50At64();
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("greedy", &options).ok());
  options.workspace.kind = WorkspacePolicy::Kind::kMemoryOptimal;
  auto host = ParseParamPlacement("host");
  ASSERT_TRUE(host.ok());
  options.params = *host;
  options.device_budget = size_t{120} << 20;
  auto model = PlannerModel((*net)->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->persistent, 0u);
  EXPECT_GT(*std::max_element(model->visiting.begin(), model->visiting.end()), 0u);
  auto plan = Plan((*net)->view(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits) << plan->failure;
  EXPECT_LE(plan->footprint, options.device_budget);
}

// Under params: host the planners go as low as the heuristics: at the
// smallest budget superneurons runs ResNet-50 (64x64, batch 32) in, greedy
// and search run it too. It takes the tensors under memory.min_offload
// (left at its default, the planners take them when nothing else fits), a
// unit's input sent out again between the two backward steps that read it
// (its projection's and its first convolution's), and the parameters a
// rebuild brings in counted until their layer's backward.
TEST(PlannerModesTest, UnderHostParametersThePlannersFitWhereSuperneuronsDoes) {
  auto net = PlainResNet50At64();
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  auto options_for = [&](const char* mode, size_t budget) {
    MemoryOptions options;
    SPILL_CHECK(ApplyMemoryMode(mode, &options).ok());
    options.workspace.kind = WorkspacePolicy::Kind::kMemoryOptimal;
    options.params = *ParseParamPlacement("host");
    options.device_budget = budget;
    return options;
  };
  // superneurons' smallest budget, to the pool block (plan --minimum).
  auto superneurons_fits = [&](size_t budget) {
    auto plan = Plan((*net)->view(), options_for("superneurons", budget));
    SPILL_CHECK(plan.ok()) << plan.status().ToString();
    return plan->fits;
  };
  size_t low = size_t{8} << 20, high = size_t{64} << 20;
  ASSERT_FALSE(superneurons_fits(low));
  ASSERT_TRUE(superneurons_fits(high));
  while (high - low > kPoolBlockBytes) {
    const size_t mid = (low + high) / 2 / kPoolBlockBytes * kPoolBlockBytes;
    (superneurons_fits(mid) ? high : low) = mid;
  }
  // At it: where the step ahead of a layer's is over the limit, the plans
  // bring its parameters in with the step itself (the `late` rule), as the
  // run does for superneurons when their prefetch finds no room.
  const size_t budget = high;
  for (const char* mode : {"greedy", "search"}) {
    auto plan = Plan((*net)->view(), options_for(mode, budget));
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->fits) << mode << " at " << budget << " bytes: " << plan->failure;
    // Those steps read the parameters in themselves: on demand, counted.
    EXPECT_GT(plan->log.on_demand, 0u) << mode;
    EXPECT_LT(plan->log.on_demand, plan->log.to_device) << mode;
  }
  // With room, every parameter is prefetched a step ahead.
  auto roomy = Plan((*net)->view(), options_for("greedy", size_t{1} << 30));
  ASSERT_TRUE(roomy.ok() && roomy->fits);
  EXPECT_GT(roomy->log.to_device, 0u);
  EXPECT_EQ(roomy->log.on_demand, 0u);
}

// memory.min_offload left at its default (1 MiB) bounds the planners'
// search, not what fits: at LeNet's lowest peak (batch 32) every searching
// planner moves tensors under it, and finds no plan where the setting is
// given.
TEST(PlannerModesTest, LeftAtItsDefaultTheMinimumOffloadBoundsTheSearchNotWhatFits) {
  Subject s = Load(testing::kLeNet);
  const size_t limit = SmallestPeak(s.model);
  for (const char* mode : {"dqn", "greedy", "milp", "search"}) {
    MemoryOptions options;
    ASSERT_TRUE(ApplyMemoryMode(mode, &options).ok());
    options.allocator = "ideal";
    options.workspace = *ParseWorkspacePolicy("pin:im2col_image");
    options.device_budget = limit;
    if (mode == std::string("dqn")) SetPlanner(&options, "episodes", "20");
    if (mode == std::string("milp")) SetPlanner(&options, "milp_seconds", "10");
    auto wide = Plan(s.net->view(), options);
    ASSERT_TRUE(wide.ok()) << wide.status().ToString();
    EXPECT_TRUE(wide->fits) << mode << ": " << wide->failure;
    ASSERT_TRUE(options.settings.Set("min_offload", "1MiB").ok());
    auto narrow = Plan(s.net->view(), options);
    ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
    EXPECT_FALSE(narrow->fits) << mode;
    EXPECT_THAT(narrow->failure, HasSubstr("memory.min_offload")) << mode;
  }
}

TEST(PlannerModesTest, NoPlanWithinTheLimitIsOutOfMemory) {
  Subject s = Load(testing::kLeNet);
  for (const char* mode : {"dqn", "greedy", "search"}) {
    MemoryOptions options = PlannerOptions(mode);
    if (mode == std::string("dqn")) SetPlanner(&options, "episodes", "5");
    options.device_budget = s.model.persistent + kPoolBlockBytes;  // nothing transient fits
    auto plan = Plan(s.net->view(), options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_FALSE(plan->fits) << mode;
    EXPECT_THAT(plan->failure, HasSubstr(std::string(mode) + " found no plan within its limit"));
    // Every tensor is a candidate here (memory.min_offload 0).
    EXPECT_THAT(plan->failure, Not(HasSubstr("memory.min_offload"))) << mode;
  }
}

// Where only memory.min_offload keeps tensors on the device at the peak, the
// report says how many and how large, and which setting moves them.
TEST(PlannerModesTest, NoPlanNamesTheTensorsTheMinimumKeeps) {
  Subject s = Load(testing::kResNet);
  for (const char* mode : {"greedy", "search"}) {
    MemoryOptions options = PlannerOptions(mode);
    ASSERT_TRUE(options.settings.Set("min_offload", "1GiB").ok());  // no candidate at all
    options.device_budget = s.model.base_peak * 3 / 4;
    auto plan = Plan(s.net->view(), options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_FALSE(plan->fits) << mode;
    EXPECT_THAT(plan->failure, HasSubstr("tensors under memory.min_offload")) << mode;
    EXPECT_THAT(plan->failure, HasSubstr("a lower memory.min_offload lets the planners move them"))
        << mode;
  }
}

// memory.planner.profile: cpu times plans on this machine's profile as the
// program calibrated it and handed it over; without one it is an error that
// says so, never a spec sheet in its place.
TEST(PlannerModesTest, TheCpuProfileIsTheOneTheProgramMeasured) {
  Subject s = Load(testing::kAlexNet);
  MemoryOptions options = PlannerOptions("search");
  SetPlanner(&options, "profile", "cpu");
  EXPECT_THAT(PlannerModel(s.net->view(), options).status().message(),
              HasSubstr("'cpu' is this machine, measured"));
  const DeviceProfile cpu = CpuProfile({2e10, 1e10, 4e9, 1e-5}, 2e9);
  options.measured_profile = std::make_shared<const DeviceProfile>(cpu);
  auto model = PlannerModel(s.net->view(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->profile.name, "cpu");
  EXPECT_TRUE(model->profile.inline_compute);
  EXPECT_EQ(model->profile.link.d2h_bytes_per_second, 2e9);
  options.device_budget = (SmallestPeak(*model) + model->base_peak) / 2;
  auto plan = Plan(s.net->view(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->fits) << plan->failure;
}

TEST(PlannerModesTest, MemongerDropsAllButSegmentBoundariesAndLmsCountsTensors) {
  Subject s = Load(testing::kAlexNet);
  const Decisions d = PlanMemonger(s.model, 3);
  const Schedule& schedule = s.net->schedule();
  int dropped = 0;
  for (TensorId t : s.model.candidates) {
    if (!s.model.droppable[t]) continue;
    const bool boundary = (schedule.forward_step[schedule.tensors[t].layer] + 1) % 3 == 0;
    EXPECT_EQ(d[t].choice == TensorChoice::kDrop, !boundary) << schedule.tensors[t].name;
    dropped += d[t].choice == TensorChoice::kDrop;
  }
  EXPECT_GT(dropped, 0);
  MemoryOptions lms = PlannerOptions("lms");
  lms.record_events = true;
  size_t all = 0;
  for (int count : {0, 1, 2}) {
    SPILL_CHECK(lms.settings.Set("lms_count", std::to_string(count)).ok());
    auto plan = Plan(s.net->view(), lms);
    ASSERT_TRUE(plan.ok() && plan->fits);
    std::set<TensorId> swapped;
    for (const MemoryEvent& e : plan->events) {
      if (e.type == MemoryEventType::kBeginOffload) swapped.insert(e.tensor);
    }
    if (count == 0) {
      all = swapped.size();
      EXPECT_GT(all, 2u);
    } else {
      EXPECT_EQ(swapped.size(), static_cast<size_t>(count));
    }
  }
}

}  // namespace
}  // namespace spill
