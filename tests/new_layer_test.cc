// A layer type added outside layers/ (tests/testing/softsign_layer.cc: one
// file and its BUILD target, nothing edited anywhere else) is a layer like
// any other: it builds from YAML, its gradients check, and the memory
// policies act on what it declares of itself - Dymem offloads its outputs
// as it offloads ReLU's, the baseline's losses and weights come out bit for
// bit under every mode, and plans equal runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "framework/base/strings.h"
#include "framework/graph/layer_registry.h"
#include "layers/cpu/conv_timer.h"
#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planning/planner.h"
#include "tests/testing/layer_harness.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

// A small network with the activation `type` between two convolutions.
std::string Network(const std::string& type) {
  return "layers:\n"
         "  - {name: data, type: input, shape: [2, 8, 8]}\n"
         "  - {name: conv1, type: convolution, filters: 4, kernel: 3, pad: 1}\n"
         "  - {name: act, type: " +
         type +
         "}\n"
         "  - {name: conv2, type: convolution, filters: 4, kernel: 3, pad: 1}\n"
         "  - {name: fc, type: fully_connected, outputs: 3}\n"
         "  - {name: loss, type: softmax_loss}\n";
}

class NewLayerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""}); }
};

TEST_F(NewLayerTest, ItIsRegisteredAndItsGradientsCheck) {
  EXPECT_THAT(Join(LayerRegistry::Get().Types(DeviceType::kCpu)), HasSubstr("softsign"));
  testing::LayerHarness harness("{type: softsign}", {Shape(2, 3, 4, 4)});
  harness.Randomize(3);
  EXPECT_EQ(testing::CheckGradients(harness), "");
}

// Its outputs are feature maps by its own word: in Dymem's offload set
// exactly where a ReLU's are.
TEST_F(NewLayerTest, DymemOffloadsItsOutputsAsItOffloadsReLUs) {
  auto soft = testing::BuildTrainingNet(testing::MustParse(Network("softsign")), 4);
  auto relu = testing::BuildTrainingNet(testing::MustParse(Network("relu")), 4);
  ASSERT_TRUE(soft.ok() && relu.ok());
  const std::vector<bool> a = DymemOffloadSet((*soft)->view(), 0);
  const std::vector<bool> b = DymemOffloadSet((*relu)->view(), 0);
  EXPECT_EQ(a, b);
  const Schedule& schedule = (*soft)->schedule();
  bool output_offloaded = false;
  for (TensorId t = 0; t < static_cast<TensorId>(schedule.tensors.size()); ++t) {
    const TensorInfo& info = schedule.tensors[t];
    if (info.kind == TensorKind::kActivation && (*soft)->layer(info.layer).name() == "act") {
      output_offloaded = output_offloaded || a[t];
    }
  }
  EXPECT_TRUE(output_offloaded);
}

// Every mode that is not costly trains it bit-identically to the baseline,
// at a roomy budget and at the mode's smallest, and its plan is the run.
TEST_F(NewLayerTest, EveryModeTrainsItBitIdenticallyAsPlanned) {
  const NetSpec spec = testing::MustParse(Network("softsign"));
  testing::SyntheticRun baseline_run = testing::SmallMemoryRun("baseline");
  ASSERT_TRUE(ParseWorkspacePolicy("pin:im2col_image").ok());
  baseline_run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  auto baseline = testing::TrainSynthetic(spec, baseline_run);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  int runs = 0;
  for (const MemoryMode& mode : MemoryModes()) {
    if (mode.costly) continue;
    ++runs;
    testing::SyntheticRun run = testing::SmallMemoryRun(mode.name);
    run.memory.workspace = baseline_run.memory.workspace;
    ASSERT_TRUE(run.memory.settings.Set("min_offload", "0").ok());  // maps of a few KiB
    auto net = testing::BuildTrainingNet(spec, run.batch);
    ASSERT_TRUE(net.ok());
    auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
    ASSERT_TRUE(minimum.ok()) << mode.name << ": " << minimum.status().ToString();
    run.memory.device_budget = *minimum;
    auto plan = Plan((*net)->view(), run.memory);
    ASSERT_TRUE(plan.ok() && plan->fits) << mode.name;
    auto trace = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(trace.ok()) << mode.name << ": " << trace.status().ToString();
    EXPECT_EQ(trace->losses, baseline->losses) << mode.name;
    EXPECT_TRUE(testing::BitEqual(trace->params, baseline->params)) << mode.name;
    EXPECT_EQ(trace->log.peak, plan->peak) << mode.name;
    // At its smallest budget Dymem moves the feature maps, the softsign's too.
    if (std::string(mode.name) == "dymem") {
      EXPECT_GT(trace->to_host, 0u);
    }
  }
  EXPECT_GE(runs, 10);
}

}  // namespace
}  // namespace spill
