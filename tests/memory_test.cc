// The memory runtime's promises: every mode trains bit-identically to the
// baseline; the plan computed from shapes equals the memory measured in a
// run, step by step; liveness on a linear network peaks at the paper's
// sum(l_f) + l_b(N); a budget that is too small gives a report with the
// smallest budget that works.
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework/net.h"
#include "memory/liveness.h"
#include "memory/planner.h"
#include "memory/runtime.h"
#include "tests/net_harness.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

const char kLeNet[] = R"(
layers:
  - {name: data, type: input, shape: [1, 12, 12]}
  - {name: conv1, type: convolution, filters: 4, kernel: 3}
  - {name: pool1, type: max_pool, kernel: 2}
  - {name: conv2, type: convolution, filters: 6, kernel: 3}
  - {name: fc1, type: fully_connected, outputs: 16}
  - {name: relu1, type: relu}
  - {name: drop, type: dropout, ratio: 0.3}
  - {name: fc2, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

const char kResNet[] = R"(
include: [models/blocks/resnet.yaml]
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, block: cifar_stem, args: {width: 4}}
  - {name: stage1, block: basic, repeat: 2, args: {filters: 4}}
  - {name: stage2, block: basic_stage, args: {filters: 8, units: 2}}
  - {name: head, block: head, args: {classes: 5}}
)";

const char kInception[] = R"(
blocks:
  unit:
    params: {width: 4}
    layers:
      - {name: pool, type: avg_pool, inputs: [$in], kernel: 3, stride: 1, pad: 1}
      - {name: b1, type: convolution, filters: $width, kernel: 1}
      - {name: b2, type: convolution, inputs: [$in], filters: $width, kernel: 1}
      - {name: b3_1, type: convolution, inputs: [$in], filters: $width, kernel: 1}
      - {name: b3_2, type: convolution, filters: $width, kernel: 3, pad: 1}
      - {name: b3_bn, type: batch_norm}
      - {name: b3_a, type: relu, inputs: [b3_bn]}
      - {name: b3_b, type: lrn, size: 3, inputs: [b3_bn]}
      - {name: concat, type: concat, inputs: [b1, b2, b3_a, b3_b]}
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: stem, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: a, block: unit, repeat: 2, args: {width: 2}}
  - {name: pool, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 5}
  - {name: loss, type: softmax_loss}
)";

struct Network {
  const char* name;
  const char* yaml;
};
const Network kNetworks[] = {{"lenet", kLeNet}, {"resnet", kResNet}, {"inception", kInception}};

testing::SyntheticRun SmallRun(const std::string& mode) {
  testing::SyntheticRun run;
  run.batch = 3;
  run.steps = 3;
  run.learning_rate = 0.05f;
  SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok());
  run.memory.device_budget = 64 << 20;
  run.memory.poison_freed = true;  // a read after free turns into NaN
  return run;
}

bool BitEqual(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

class ModeTest : public ::testing::TestWithParam<Network> {};

TEST_P(ModeTest, LivenessTrainsBitIdenticallyToBaseline) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  auto baseline = testing::TrainSynthetic(spec, SmallRun("baseline"));
  auto liveness = testing::TrainSynthetic(spec, SmallRun("liveness"));
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  ASSERT_TRUE(liveness.ok()) << liveness.status().ToString();
  ASSERT_EQ(baseline->losses.size(), 3u);
  for (size_t i = 0; i < baseline->losses.size(); ++i) {
    EXPECT_EQ(baseline->losses[i], liveness->losses[i]) << "step " << i;
    EXPECT_TRUE(std::isfinite(liveness->losses[i]));
  }
  EXPECT_TRUE(BitEqual(baseline->params, liveness->params));
  EXPECT_LT(liveness->log.peak, baseline->log.peak);
}

TEST_P(ModeTest, PlannedMemoryEqualsMeasuredMemoryAtEveryStep) {
  NetSpec spec = testing::MustParse(GetParam().yaml);
  for (const char* mode : {"baseline", "liveness"}) {
    testing::SyntheticRun run = SmallRun(mode);
    auto measured = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(measured.ok()) << measured.status().ToString();
    auto net = Net::Build(spec, {run.batch, DeviceType::kCpu});
    ASSERT_TRUE(net.ok());
    auto plan = Plan(**net, run.memory);
    ASSERT_TRUE(plan.ok() && plan->fits);
    const MemoryLog& m = measured->log;
    ASSERT_EQ(plan->log.steps.size(), m.steps.size());
    for (size_t s = 0; s < m.steps.size(); ++s) {
      ASSERT_EQ(plan->log.steps[s].total, m.steps[s].total) << mode << " step " << s + 1;
      ASSERT_EQ(plan->log.steps[s].peak, m.steps[s].peak) << mode << " step " << s + 1;
      ASSERT_EQ(plan->log.steps[s].in_use, m.steps[s].in_use) << mode << " step " << s + 1;
      ASSERT_EQ(plan->log.steps[s].live_tensors, m.steps[s].live_tensors) << mode << " step " << s + 1;
    }
    EXPECT_EQ(plan->peak, m.peak) << mode;
    EXPECT_EQ(plan->peak_step, m.peak_step) << mode;
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, ModeTest, ::testing::ValuesIn(kNetworks),
                         [](const ::testing::TestParamInfo<Network>& i) { return std::string(i.param.name); });

// A linear network (SuperNeurons §3.2): liveness keeps every forward output
// that backward needs - here all but fc3's, which only the loss's forward
// reads - and the peak comes at the first backward step, with
// sum(l_f) + l_b(N) on top of the persistent tensors. The widths make later
// backward steps smaller, as the paper's analysis assumes.
TEST(LivenessTest, LinearNetworkPeaksAtSumOfForwardPlusLastBackward) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [4, 16, 16]}
  - {name: fc1, type: fully_connected, outputs: 256}
  - {name: fc2, type: fully_connected, outputs: 128}
  - {name: fc3, type: fully_connected, outputs: 256}
  - {name: loss, type: softmax_loss}
)"),
                        {8, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  const TensorId fc3 = s.layers[(*net)->FindLayer("fc3")].outputs[0];
  size_t persistent = 0, forward = 0;
  for (TensorId id = 0; id < static_cast<TensorId>(s.tensors.size()); ++id) {
    const TensorInfo& t = s.tensors[id];
    size_t b = RoundToBlocks(t.bytes);
    if (!IsTransient(t.kind)) persistent += b;
    else if (t.kind == TensorKind::kActivation && id != fc3) forward += b;
  }
  // l_b(N): what the loss layer's backward creates, the gradient of fc3.
  const Step& first_backward = s.steps[s.num_layers()];
  size_t last_backward = 0;
  for (TensorId t : first_backward.writes) last_backward += RoundToBlocks(s.tensors[t].bytes);
  EXPECT_EQ(last_backward, RoundToBlocks(s.tensors[fc3].bytes));
  MemoryOptions options;
  options.device_budget = kUnlimitedBudget;
  auto plan = Plan(**net, options);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->peak, persistent + forward + last_backward);
  // Reached at the first backward step (the loss's forward ties with it:
  // there fc3's output holds the place its gradient takes next).
  EXPECT_EQ(plan->log.steps[s.num_layers()].peak, plan->peak);
  // Baseline: every tensor of the iteration at once.
  ASSERT_TRUE(ApplyMemoryMode("baseline", &options).ok());
  auto baseline = Plan(**net, options);
  size_t all = 0;
  for (const TensorInfo& t : s.tensors) all += RoundToBlocks(t.bytes);
  EXPECT_EQ(baseline->peak, all);
}

TEST(LivenessTest, InAndOutSetsOfAFan) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 4, 4]}
  - {name: a, type: convolution, filters: 1, kernel: 1}
  - {name: b, type: relu, inputs: [a]}
  - {name: c, type: relu, inputs: [a]}
  - {name: j, type: add, inputs: [b, c]}
  - {name: fc, type: fully_connected, outputs: 2}
  - {name: loss, type: softmax_loss}
)"),
                        {1, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  Liveness eval = AnalyzeLiveness(s, Phase::kEval);
  auto name = [&](const std::vector<TensorId>& ids) {
    std::vector<std::string> out;
    for (TensorId id : ids) out.push_back(s.tensors[id].name);
    return out;
  };
  // In evaluation, a dies once both of its readers b and c have run.
  EXPECT_EQ(name(eval.OutSet(s.forward_step[(*net)->FindLayer("b")])),
            (std::vector<std::string>{"data:1", "a", "b"}));
  EXPECT_EQ(name(eval.OutSet(s.forward_step[(*net)->FindLayer("c")])),
            (std::vector<std::string>{"data:1", "b", "c"}));
  // In training, a's gradient is born in c's backward (c comes first in
  // reverse), receives b's contribution and dies after a's backward.
  Liveness train = AnalyzeLiveness(s, Phase::kTrain);
  TensorId grad = s.layers[(*net)->FindLayer("a")].output_grads[0];
  EXPECT_EQ(train.first_use[grad], s.backward_step[(*net)->FindLayer("c")]);
  EXPECT_EQ(train.last_use[grad], s.backward_step[(*net)->FindLayer("a")]);
  // a itself is not needed by any backward step (relu reads its output,
  // convolution its input), so it dies in the forward pass.
  TensorId a = s.layers[(*net)->FindLayer("a")].outputs[0];
  EXPECT_EQ(train.last_use[a], s.forward_step[(*net)->FindLayer("c")]);
}

TEST(OutOfMemoryTest, ReportNamesStepLiveTensorsAndTheSmallestBudget) {
  NetSpec spec = testing::MustParse(kResNet);
  testing::SyntheticRun run = SmallRun("liveness");
  auto net = Net::Build(spec, {run.batch, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  auto minimum = MinimumBudget(**net, run.memory, kPoolBlockBytes);
  ASSERT_TRUE(minimum.ok()) << minimum.status().ToString();
  // One block short of the minimum fails; the minimum itself trains.
  run.memory.device_budget = *minimum - kPoolBlockBytes;
  auto too_small = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.status().code(), StatusCode::kOutOfMemory);
  Status report = ExplainOutOfMemory(too_small.status(), **net, run.memory);
  EXPECT_THAT(report.message(), HasSubstr("at step "));
  EXPECT_THAT(report.message(), HasSubstr("transient tensors live"));
  EXPECT_THAT(report.message(), HasSubstr("needs a device budget of at least"));
  run.memory.device_budget = *minimum;
  auto enough = testing::TrainSynthetic(spec, run);
  EXPECT_TRUE(enough.ok()) << enough.status().ToString();
}

TEST(OutOfMemoryTest, ParametersThatDoNotFitAreReportedAtCreation) {
  NetSpec spec = testing::MustParse(kLeNet);
  testing::SyntheticRun run = SmallRun("liveness");
  run.memory.device_budget = 2 * kPoolBlockBytes;
  auto result = testing::TrainSynthetic(spec, run);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(result.status().message(), HasSubstr("while allocating parameters"));
}

}  // namespace
}  // namespace spill
