// Precisions (framework/graph/precision.h): which tensors a bf16 network
// stores in 16 bits, what the plan counts for them, and the float32 copies
// each computation converts at the front of its workspace.
#include <gtest/gtest.h>

#include <string>

#include "framework/graph/net.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

std::unique_ptr<Net> Build(const char* yaml, Precision precision, int64_t batch = 4) {
  auto net = testing::BuildTrainingNet(testing::MustParse(yaml), batch, DeviceType::kCpu,
                                       /*blocked_layouts=*/false, precision);
  SPILL_CHECK(net.ok()) << net.status().ToString();
  return std::move(net).value();
}

bool Activation(TensorKind kind) {
  return kind == TensorKind::kActivation || kind == TensorKind::kActivationGrad;
}

// Activations and their gradients take half the bytes, apart from the
// input layer's outputs and the losses'; parameters, their gradients,
// solver state and saved tensors keep theirs.
TEST(PrecisionTest, Bf16HalvesActivationsAndTheirGradientsOnly) {
  const auto fp32 = Build(testing::kResNet, Precision::kFp32);
  const auto bf16 = Build(testing::kResNet, Precision::kBf16);
  const Schedule &a = fp32->schedule(), &b = bf16->schedule();
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  int halved = 0;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    const TensorInfo &x = a.tensors[t], &y = b.tensors[t];
    EXPECT_EQ(x.dtype, DType::kF32) << x.name;
    const LayerDecl& producer = bf16->decl(y.layer);
    const bool kept = !Activation(y.kind) || producer.is_input || producer.is_loss;
    EXPECT_EQ(y.dtype, kept ? DType::kF32 : DType::kBF16) << y.name;
    EXPECT_EQ(y.bytes, kept ? x.bytes : x.bytes / 2) << y.name;
    halved += !kept;
  }
  EXPECT_GT(halved, 10);
}

// An embedding's ids and a loss's labels, and every tensor they are
// computed from, stay float32: ids above 256 are not exact in bfloat16.
TEST(PrecisionTest, IndicesAndWhatTheyAreComputedFromStayFloat32) {
  const auto net = Build(testing::kSeq2Seq, Precision::kBf16);
  const Schedule& s = net->schedule();
  int checked = 0;
  for (int id = 0; id < net->num_layers(); ++id) {
    const std::string type = net->layer(id).type();
    const std::vector<TensorId>& inputs = s.layers[id].inputs;
    if (type == "embedding") {
      EXPECT_EQ(s.tensors[inputs[0]].dtype, DType::kF32) << s.tensors[inputs[0]].name;
      ++checked;
    }
    if (net->decl(id).is_loss) {
      EXPECT_EQ(s.tensors[inputs.back()].dtype, DType::kF32) << s.tensors[inputs.back()].name;
      EXPECT_EQ(s.tensors[inputs[0]].dtype, DType::kBF16) << s.tensors[inputs[0]].name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 3);  // two embeddings and a loss
}

// Each step's workspace grows by the float32 copies of the 16-bit tensors
// it touches, each rounded up to kConversionAlign; a slice of the batch
// needs a slice's copies.
TEST(PrecisionTest, WorkspacesHoldTheFloat32CopiesOfEachStep) {
  const auto fp32 = Build(testing::kResNet, Precision::kFp32, 8);
  const auto bf16 = Build(testing::kResNet, Precision::kBf16, 8);
  int with_copies = 0, smaller = 0;
  for (size_t i = 0; i < bf16->schedule().steps.size(); ++i) {
    const Step &a = fp32->schedule().steps[i], &b = bf16->schedule().steps[i];
    if (!b.active) continue;
    const size_t copies = bf16->ConversionBytes(b.layer, b.pass, 8);
    EXPECT_EQ(fp32->ConversionBytes(a.layer, a.pass, 8), 0u);
    EXPECT_EQ(b.workspace_bytes, a.workspace_bytes + copies) << i;
    EXPECT_EQ(copies % kConversionAlign, 0u);
    if (copies == 0) continue;
    ++with_copies;
    const size_t slice = bf16->ConversionBytes(b.layer, b.pass, 2);
    EXPECT_LE(slice, copies) << i;  // equal where each copy rounds up to kConversionAlign
    smaller += slice < copies;
    const NetworkView view = bf16->view();
    for (int op = 0; op < view.algorithms->NumOps(b.layer, b.pass); ++op) {
      const auto plain = fp32->view().algorithms->Candidates(a.layer, a.pass, op, 8);
      const auto copied = view.algorithms->Candidates(b.layer, b.pass, op, 8);
      ASSERT_EQ(plain.size(), copied.size());
      for (size_t c = 0; c < plain.size(); ++c) {
        EXPECT_EQ(copied[c].workspace, plain[c].workspace + copies);
      }
    }
  }
  EXPECT_GT(with_copies, 10);
  EXPECT_GT(smaller, with_copies / 2);
}

// Liveness keeps the activations backward needs: in bf16 they take half the
// bytes, so a deep network's planned peak falls well below float32's.
TEST(PrecisionTest, LivenessPlansLessMemoryInBf16) {
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("liveness", &options).ok());
  options.device_budget = size_t{4} << 30;
  options.workspace = *ParseWorkspacePolicy("memory_optimal");
  const auto fp32 = Build(testing::kResNet, Precision::kFp32, 64);
  const auto bf16 = Build(testing::kResNet, Precision::kBf16, 64);
  auto a = Plan(fp32->view(), options);
  auto b = Plan(bf16->view(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(b->peak, a->peak * 3 / 4) << a->peak << " vs " << b->peak;
}

TEST(PrecisionTest, NamesParseAndBadOnesAreListed) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16, Precision::kTf32}) {
    auto parsed = ParsePrecision(PrecisionName(p), "run.precision");
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParsePrecision("half", "--precision");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "--precision: 'half' is not a precision; expected fp32, bf16, fp16 or tf32");
  EXPECT_EQ(ActivationType(Precision::kBf16), DType::kBF16);
  EXPECT_EQ(ActivationType(Precision::kTf32), DType::kF32);
}

}  // namespace
}  // namespace spill
