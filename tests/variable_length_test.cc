// Variable-length sequences: a network trains at a different sequence length
// every iteration (Net::SetSequenceLength, then MemoryRuntime::Reshape).
// Every memory mode and allocator gives the baseline's losses and parameters
// bit for bit over the same lengths; the plan made from shapes, replaying the
// same lengths, equals the run iteration by iteration; a budget that holds
// the longest length holds every shorter one; plans are made once per
// length and reused; the static allocator serves shorter requests in the
// slots profiled for a longer one and profiles again only when a request
// grows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "framework/graph/net.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "tests/testing/equivalence.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using testing::ExpectBitIdentical;
using ::testing::HasSubstr;

// The test networks are built at length 6; these lengths come back, grow
// past the first and shrink below it.
const std::vector<int64_t> kLengths = {4, 6, 3, 6, 5, 4};

struct Case {
  const char* name;
  const char* yaml;
};
const Case kCases[] = {
    {"sequence", testing::kSequence}, {"seq2seq", testing::kSeq2Seq}, {"gpt", testing::kGpt}};

testing::SyntheticRun LengthsRun(const std::string& mode, const std::string& allocator) {
  testing::SyntheticRun run = testing::SmallMemoryRun(mode);
  SPILL_CHECK(run.memory.settings.Set("min_offload", "0").ok());
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  run.memory.allocator = allocator;
  run.memory.check_allocator = true;
  run.memory.record_events = true;
  run.steps = static_cast<int>(kLengths.size());
  run.lengths = kLengths;
  return run;
}

// The plan of `run`, replaying its lengths on a network built from shapes.
StatusOr<LengthsPlan> PlanRun(const NetSpec& spec, const testing::SyntheticRun& run) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, testing::BuildTrainingNet(spec, run.batch));
  Net* n = net.get();
  const SequenceReshaper reshape = ReshaperOf(*n);
  return PlanLengths(n->view(), run.memory, run.lengths, reshape);
}

// The smallest budget `run`'s lengths train in, found by planning them.
StatusOr<size_t> SmallestBudget(const NetSpec& spec, const testing::SyntheticRun& run) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, testing::BuildTrainingNet(spec, run.batch));
  const int64_t start = net->sequence_length();
  Net* n = net.get();
  const SequenceReshaper reshape = ReshaperOf(*n);
  return MinimumBudgetForLengths(reshape, start, run.memory, run.lengths, kPoolBlockBytes);
}

void ExpectRunAsPlannedPerIteration(const LengthsPlan& plan, const testing::TrainTrace& trace,
                                    const std::string& what) {
  ASSERT_TRUE(plan.fits) << what << ": " << plan.failure;
  ASSERT_EQ(plan.iterations.size(), trace.iteration_logs.size()) << what;
  for (size_t i = 0; i < plan.iterations.size(); ++i) {
    const std::string at = what + " iteration " + std::to_string(i + 1);
    const MemoryLog &p = plan.iterations[i].log, &r = trace.iteration_logs[i];
    ASSERT_EQ(p.steps.size(), r.steps.size()) << at;
    for (size_t s = 0; s < p.steps.size(); ++s) {
      ASSERT_EQ(p.steps[s].total, r.steps[s].total) << at << " step " << s + 1;
      ASSERT_EQ(p.steps[s].peak, r.steps[s].peak) << at << " step " << s + 1;
      ASSERT_EQ(p.steps[s].to_host, r.steps[s].to_host) << at << " step " << s + 1;
      ASSERT_EQ(p.steps[s].recomputed, r.steps[s].recomputed) << at << " step " << s + 1;
    }
    const auto &pe = plan.iterations[i].events, &re = trace.iteration_events[i];
    ASSERT_EQ(pe.size(), re.size()) << at;
    for (size_t e = 0; e < pe.size(); ++e) {
      ASSERT_TRUE(pe[e].type == re[e].type && pe[e].tensor == re[e].tensor &&
                  pe[e].bytes == re[e].bytes && pe[e].offset == re[e].offset)
          << at << ": event " << e << " planned " << MemoryEventName(pe[e].type) << " offset "
          << pe[e].offset << ", ran " << MemoryEventName(re[e].type) << " offset " << re[e].offset;
    }
  }
  EXPECT_EQ(plan.replans, trace.replans) << what;
  EXPECT_EQ(plan.mismatches, trace.mismatches) << what;
  EXPECT_EQ(plan.footprint, trace.footprint) << what;
}

// Distinct lengths other than the one the network was built at: the plans
// a run makes after the first.
int64_t NewLengths() {
  std::set<int64_t> lengths(kLengths.begin(), kLengths.end());
  lengths.erase(6);
  return static_cast<int64_t>(lengths.size());
}

const char* const kModes[] = {
    "baseline", "liveness", "offload", "recompute", "offload_recompute", "superneurons",
    "window",   "lms",      "dymem",   "vdnn",      "memonger",          "greedy"};
const char* const kAllocators[] = {"first_fit", "best_fit", "static", "caching", "va", "gtbm"};

class VariableLengthTest : public ::testing::TestWithParam<Case> {};

// Every mode under every allocator, with room and at the smallest budget
// the lengths run in (planned over the same lengths).
TEST_P(VariableLengthTest, EveryModeTrainsBitIdenticallyAndAsPlannedAtEveryLength) {
  const NetSpec spec = testing::MustParse(GetParam().yaml);
  testing::SyntheticRun reference = LengthsRun("baseline", "first_fit");
  auto baseline = testing::TrainSynthetic(spec, reference);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  ASSERT_EQ(baseline->losses.size(), kLengths.size());
  for (const char* mode : kModes) {
    for (const char* allocator : kAllocators) {
      for (bool tight : {false, true}) {
        const std::string what =
            std::string(mode) + " " + allocator + (tight ? " at the smallest budget" : "");
        testing::SyntheticRun run = LengthsRun(mode, allocator);
        if (tight) {
          auto minimum = SmallestBudget(spec, run);
          ASSERT_TRUE(minimum.ok()) << what << ": " << minimum.status().ToString();
          run.memory.device_budget = *minimum;
        }
        auto trace = testing::TrainSynthetic(spec, run);
        ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
        ExpectBitIdentical(*baseline, *trace, what);
        auto plan = PlanRun(spec, run);
        ASSERT_TRUE(plan.ok()) << what << ": " << plan.status().ToString();
        ExpectRunAsPlannedPerIteration(*plan, *trace, what);
        // One plan per length, made the first time the length comes.
        EXPECT_EQ(trace->replans, NewLengths()) << what;
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// The static allocator profiles the first iteration (length 4), serves the
// next, longer one by best fit and profiles it: from then on every length
// is served in the profiled slots, without a mismatch.
TEST_P(VariableLengthTest, StaticAllocatorProfilesAgainOnlyWhenARequestGrows) {
  const NetSpec spec = testing::MustParse(GetParam().yaml);
  testing::SyntheticRun run = LengthsRun("liveness", "static");
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  auto plan = PlanRun(spec, run);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(trace->mismatches, 1);
  ASSERT_EQ(plan->replanned.size(), kLengths.size());
  for (size_t i = 0; i < kLengths.size(); ++i) {
    EXPECT_EQ(plan->iterations[i].mismatches, i == 1 ? 1 : 0) << "iteration " << i + 1;
  }
  // Shorter iterations use less of the profiled slots.
  EXPECT_LT(plan->iterations[2].peak, plan->iterations[1].peak);
}

INSTANTIATE_TEST_SUITE_P(Networks, VariableLengthTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(SequenceLengthTest, ShapesFollowTheLengthAndTensorsStay) {
  auto net = testing::BuildTrainingNet(testing::MustParse(testing::kSeq2Seq), 3);
  ASSERT_TRUE(net.ok());
  Net& n = **net;
  const size_t tensors = n.schedule().tensors.size();
  const int loss = n.loss_layers()[0];
  const TensorId scores = n.schedule().layers[loss].inputs[0];
  EXPECT_EQ(n.schedule().tensors[scores].shape, Shape(3, 7, 1, 6));
  ASSERT_TRUE(n.SetSequenceLength(11).ok());
  EXPECT_EQ(n.sequence_length(), 11);
  EXPECT_EQ(n.input_shape(), Shape(3, 2, 1, 11));
  EXPECT_EQ(n.label_shape(), Shape(3, 1, 1, 11));
  EXPECT_EQ(n.schedule().tensors.size(), tensors);
  EXPECT_EQ(n.schedule().tensors[scores].shape, Shape(3, 7, 1, 11));
  EXPECT_EQ(n.schedule().tensors[scores].bytes, 3u * 7 * 11 * sizeof(float));
  for (const TensorInfo& info : n.schedule().tensors) {
    EXPECT_EQ(info.bytes, info.shape.bytes()) << info.name;
  }
}

TEST(SequenceLengthTest, ParametersThatDependOnTheLengthAreAnErrorAndTheLengthStays) {
  auto net = testing::BuildTrainingNet(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 1, 6]}
  - {name: embed, type: embedding, vocabulary: 7, size: 4}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)"),
                                       2);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  Net& n = **net;
  Status status = n.SetSequenceLength(8);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("fc/weight"));
  EXPECT_THAT(status.message(), HasSubstr("must not depend on the length"));
  EXPECT_EQ(n.sequence_length(), 6);
  for (const TensorInfo& info : n.schedule().tensors) {
    EXPECT_EQ(info.bytes, info.shape.bytes()) << info.name;
  }
  EXPECT_THAT(n.SetSequenceLength(0).message(), HasSubstr("outside [1,"));
}

TEST(SequenceLengthTest, AGivenPlanHoldsForItsSizesOnly) {
  const NetSpec spec = testing::MustParse(testing::kSequence);
  auto net = testing::BuildTrainingNet(spec, 3);
  ASSERT_TRUE(net.ok());
  MemoryOptions options = testing::SmallMemoryRun("liveness").memory;
  auto plans = MakeTransferPlans((*net)->view(), options);
  ASSERT_TRUE(plans.ok());
  GivenPlans given;
  given.plans = *plans;
  auto runtime = MemoryRuntime::Create((*net)->view(), options, nullptr, &given);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  EXPECT_TRUE((*runtime)->Reshape((*net)->view()).ok());
  ASSERT_TRUE((*net)->SetSequenceLength(4).ok());
  Status status = (*runtime)->Reshape((*net)->view());
  EXPECT_THAT(status.message(), HasSubstr("a plan per length"));
}

}  // namespace
}  // namespace spill
