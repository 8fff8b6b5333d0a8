// Precisions (framework/graph/precision.h): which tensors a bf16 network
// stores in 16 bits, what the plan counts for them, and the float32 copies
// each computation converts at the front of its workspace.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "framework/base/random.h"
#include "framework/device/convert.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_layouts.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tools/common/net_options.h"

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

// Random numbers in [low, low + width) for tensors of `shapes` (random
// stream seed + k for the k-th), in their two forms: stored in bfloat16 and
// widened to float32.
struct TwoForms {
  std::vector<std::vector<uint16_t>> half;
  std::vector<std::vector<float>> wide;
};

TwoForms RandomBf16(const std::vector<Shape>& shapes, uint64_t seed, float width, float low) {
  TwoForms v;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const int64_t n = shapes[k].numel();
    v.half.emplace_back(n);
    v.wide.emplace_back(n);
    for (int64_t i = 0; i < n; ++i) {
      v.half[k][i] = FloatToBf16Bits(width * UniformAt(seed + k, i) + low);
      v.wide[k][i] = Bf16BitsToFloat(v.half[k][i]);
    }
  }
  return v;
}

// The first layer of `type`.
int FirstOfType(const Net& net, const std::string& type) {
  int id = 0;
  while (net.layer(id).type() != type) ++id;
  return id;
}

// Each 16-bit result is its float32 twin rounded to nearest even.
void ExpectRounded(const std::vector<uint16_t>& half, const std::vector<float>& wide,
                   const char* what) {
  ASSERT_EQ(half.size(), wide.size()) << what;
  for (size_t i = 0; i < half.size(); ++i) {
    ASSERT_EQ(half[i], FloatToBf16Bits(wide[i])) << what << " " << i;
  }
}

// What one forward and the backward after it take beside the activations.
struct PassTensors {
  std::vector<Tensor> params, param_grads, aux;
  Workspace forward_work, backward_work;
};

// `layer`'s forward of x into y, then its backward from dy, added into dx.
void ForwardAndBackward(const Layer& layer, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& dx, const PassTensors& t) {
  ForwardArgs f;
  f.inputs = {x};
  f.outputs = {y};
  f.params = t.params;
  f.aux = t.aux;
  f.workspace = t.forward_work;
  layer.Forward(f);
  BackwardArgs b;
  b.inputs = {x};
  b.outputs = {y};
  b.output_grads = {dy};
  b.input_grads = {dx};
  b.accumulate = {true};
  b.params = t.params;
  b.param_grads = t.param_grads;
  b.aux = t.aux;
  b.workspace = t.backward_work;
  layer.Backward(b);
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
  const auto fp32 = Build(testing::kAlexNet, Precision::kFp32, 8);
  const auto bf16 = Build(testing::kAlexNet, Precision::kBf16, 8);
  int with_copies = 0, smaller = 0;
  for (size_t i = 0; i < bf16->schedule().steps.size(); ++i) {
    const Step &a = fp32->schedule().steps[i], &b = bf16->schedule().steps[i];
    if (!b.active) continue;
    // Convolutions count their copies per algorithm (the next test).
    if (bf16->layer(b.layer).type() == "convolution") continue;
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
  EXPECT_GT(with_copies, 6);  // LRN, fully connected, dropout and the loss, both passes
  EXPECT_GT(smaller, with_copies / 2);
}

// Convolutions take 16-bit tensors as they are: bfloat16 arithmetic
// (dnnl_bf16, gemm_bf16) is offered where the processor has it and only to networks
// that store 16 bits, and the float32 algorithms' candidates count the
// float32 copies they compute on.
TEST(PrecisionTest, ConvolutionsCountTheirOwnCopiesPerAlgorithm) {
  const auto fp32 = Build(testing::kResNet, Precision::kFp32, 8);
  const auto bf16 = Build(testing::kResNet, Precision::kBf16, 8);
  int convolutions = 0;
  for (size_t i = 0; i < bf16->schedule().steps.size(); ++i) {
    const Step &a = fp32->schedule().steps[i], &b = bf16->schedule().steps[i];
    if (!b.active || bf16->layer(b.layer).type() != "convolution") continue;
    ++convolutions;
    EXPECT_TRUE(bf16->layer(b.layer).computes_16_bit(b.pass));
    EXPECT_EQ(bf16->ConversionBytes(b.layer, b.pass, 8), 0u);
    for (int op = 0; op < bf16->view().algorithms->NumOps(b.layer, b.pass); ++op) {
      const auto plain = fp32->view().algorithms->Candidates(a.layer, a.pass, op, 8);
      const auto half = bf16->view().algorithms->Candidates(b.layer, b.pass, op, 8);
      const auto sixteen_bit = [](const std::string& name) {
        return name == "dnnl_bf16" || name == "gemm_bf16";
      };
      int offered = 0;
      for (const AlgorithmCandidate& c : plain) EXPECT_FALSE(sixteen_bit(c.name)) << c.name;
      for (const AlgorithmCandidate& c : half) {
        if (sixteen_bit(c.name)) {
          ++offered;
          continue;
        }
        auto same = std::find_if(plain.begin(), plain.end(),
                                 [&](const AlgorithmCandidate& p) { return p.name == c.name; });
        ASSERT_NE(same, plain.end()) << c.name;
        // The input is the float32 image in the first convolution: there
        // only the output is copied.
        EXPECT_GT(c.workspace, same->workspace) << c.name << " in " << bf16->layer(b.layer).name();
      }
      EXPECT_EQ(offered, cpu::Bf16Arithmetic() ? 2 : 0) << bf16->layer(b.layer).name();
      EXPECT_EQ(half.size(), plain.size() + offered);
    }
  }
  EXPECT_GT(convolutions, 4);
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

// Large steps run in slices of the batch, so that their float32 copies are
// an eighth of the whole batch's; small ones, and layers that take 16-bit
// tensors as they are (convolution, ReLU: no copies at all), run whole.
TEST(PrecisionTest, LargeStepsComputeInSlicesAndNativeLayersNeedNoCopies) {
  NetOptions options;
  options.batch = 64;
  options.blocked_layouts = false;
  options.precision = Precision::kBf16;
  options.slice_copies_from = 16 * kKiB;
  auto net = testing::BuildTrainingNet(testing::MustParse(testing::kAlexNet), options);
  ASSERT_TRUE(net.ok());
  int sliced = 0, native = 0;
  for (const Step& step : (*net)->schedule().steps) {
    if (!step.active) continue;
    const Layer& layer = (*net)->layer(step.layer);
    const size_t whole = (*net)->ConversionBytes(step.layer, step.pass, 64);
    const int64_t slice = (*net)->ConversionSlice(step.layer, step.pass);
    if (layer.computes_16_bit(step.pass)) {
      EXPECT_EQ(whole, 0u) << layer.name();
      EXPECT_EQ(slice, 0) << layer.name();
      ++native;
      continue;
    }
    EXPECT_EQ(slice, whole >= options.slice_copies_from ? 8 : 0) << layer.name();
    sliced += slice > 0;
  }
  EXPECT_GT(sliced, 4);
  EXPECT_GT(native, 4);  // convolutions and ReLUs
  // A float32 network has nothing to copy, so nothing to slice.
  options.precision = Precision::kFp32;
  options.slice_copies_from = 0;
  auto fp32 = testing::BuildTrainingNet(testing::MustParse(testing::kAlexNet), options);
  ASSERT_TRUE(fp32.ok());
  for (const Step& step : (*fp32)->schedule().steps) {
    EXPECT_EQ((*fp32)->ConversionSlice(step.layer, step.pass), 0) << step.index;
  }
}

// Layers that take 16-bit tensors as they are compute the bits the float32
// copies would give: the same layer, handed float32 tensors and their
// values rounded afterwards, agrees bit for bit (overlapping pooling windows
// add into the same input gradient).
TEST(PrecisionTest, NativeLayersGiveTheBitsOfFloat32Copies) {
  const std::pair<const char*, const char*> cases[] = {{testing::kResNet, "relu"},
                                                       {testing::kResNet, "add"},
                                                       {testing::kResNet, "global_avg_pool"},
                                                       {testing::kAlexNet, "max_pool"}};
  for (const auto& [yaml, type] : cases) {
    SCOPED_TRACE(type);
    const auto net = Build(yaml, Precision::kBf16, 2);
    const int id = FirstOfType(*net, type);
    const Layer& layer = net->layer(id);
    ASSERT_TRUE(layer.computes_16_bit(Pass::kBackward));
    const LayerTensors& lt = net->schedule().layers[id];
    const Shape in_shape = net->schedule().tensors[lt.inputs[0]].shape;
    const Shape out_shape = net->schedule().tensors[lt.outputs[0]].shape;
    const size_t inputs = lt.inputs.size();
    // Inputs, the output's gradient and the input gradient added into, as
    // bf16 and widened.
    std::vector<Shape> shapes(inputs, in_shape);
    shapes.push_back(out_shape);
    shapes.push_back(in_shape);
    TwoForms values = RandomBf16(shapes, 7, 4, -2);
    auto& half = values.half;
    auto& wide = values.wide;
    auto bf16 = [&](std::vector<uint16_t>& v, const Shape& shape) {
      return Tensor(shape, v.data(), DType::kBF16, Layout::kPlain);
    };
    auto f32 = [&](std::vector<float>& v, const Shape& shape) { return Tensor(shape, v.data()); };
    std::vector<uint16_t> y16(out_shape.numel()), dx16 = half[inputs + 1];
    std::vector<float> y32(out_shape.numel()), dx32 = wide[inputs + 1];
    ForwardArgs forward16, forward32;
    for (size_t k = 0; k < inputs; ++k) {
      forward16.inputs.push_back(bf16(half[k], in_shape));
      forward32.inputs.push_back(f32(wide[k], in_shape));
    }
    forward16.outputs = {bf16(y16, out_shape)};
    forward32.outputs = {f32(y32, out_shape)};
    layer.Forward(forward16);
    layer.Forward(forward32);
    BackwardArgs backward16, backward32;
    backward16.inputs = forward16.inputs;
    backward32.inputs = forward32.inputs;
    backward16.outputs = forward16.outputs;
    backward32.outputs = forward32.outputs;
    backward16.output_grads = {bf16(half[inputs], out_shape)};
    backward32.output_grads = {f32(wide[inputs], out_shape)};
    backward16.input_grads = {bf16(dx16, in_shape)};
    backward32.input_grads = {f32(dx32, in_shape)};
    backward16.accumulate = backward32.accumulate = {true};
    for (size_t k = 1; k < inputs; ++k) {  // the other inputs' gradients: none wanted
      backward16.input_grads.push_back(Tensor());
      backward32.input_grads.push_back(Tensor());
      backward16.accumulate.push_back(false);
      backward32.accumulate.push_back(false);
    }
    layer.Backward(backward16);
    layer.Backward(backward32);
    ExpectRounded(y16, y32, "forward");
    ExpectRounded(dx16, dx32, "backward");
  }
}

// Batch norm reads and writes 16-bit tensors in place, in either layout:
// the bits of float32 tensors holding the same values, its results rounded.
TEST(PrecisionTest, BatchNormGivesTheBitsOfFloat32Copies) {
  constexpr char kNet[] = R"(
layers:
  - {name: data, type: input, shape: [3, 6, 6]}
  - {name: conv, type: convolution, filters: 32, kernel: 3, pad: 1}
  - {name: bn, type: batch_norm}
  - {name: conv2, type: convolution, filters: 16, kernel: 3, pad: 1}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: loss, type: softmax_loss}
)";
  for (const bool blocked : {false, true}) {
    SCOPED_TRACE(blocked ? "blocked" : "plain");
    auto net = testing::BuildTrainingNet(testing::MustParse(kNet), 3, DeviceType::kCpu, blocked,
                                         Precision::kBf16);
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    const int id = (*net)->FindLayer("bn");
    const Layer& layer = (*net)->layer(id);
    EXPECT_TRUE(layer.computes_16_bit(Pass::kForward));
    EXPECT_EQ((*net)->ConversionBytes(id, Pass::kBackward, 3), 0u);
    const TensorInfo& x_info = (*net)->schedule().tensors[(*net)->schedule().layers[id].inputs[0]];
    ASSERT_EQ(x_info.dtype, DType::kBF16);
    const Layout layout = x_info.layout;
    if (blocked && !cpu::BlockedLayoutsPay()) continue;
    // Where the processor has AMX tiles, bfloat16 activations lie
    // channels-last between convolutions.
    const Layout left_plain = cpu::Bf16Tiles() ? Layout::kChannelsLast : Layout::kBlocked16;
    EXPECT_EQ(layout, blocked ? left_plain : Layout::kPlain);
    const Shape shape = x_info.shape;
    const int64_t n = shape.numel(), c = shape.c();
    // x, dy and the gradient added into, as bf16 and widened.
    TwoForms values = RandomBf16({shape, shape, shape}, 11, 4, -1);
    auto& half = values.half;
    auto& wide = values.wide;
    struct Run {
      std::vector<float> gamma, beta, mean, var, aux_mean, aux_istd, dgamma, dbeta;
      std::vector<char> workspace;
    };
    auto prepare = [&](Run& r) {
      r.gamma.assign(c, 0);
      r.beta.assign(c, 0);
      for (int64_t i = 0; i < c; ++i) {
        r.gamma[i] = 0.5f + UniformAt(21, i);
        r.beta[i] = UniformAt(22, i) - 0.5f;
      }
      r.mean.assign(c, 0);
      r.var.assign(c, 1);
      r.aux_mean.assign(c, 0);
      r.aux_istd.assign(c, 0);
      r.dgamma.assign(c, 0);
      r.dbeta.assign(c, 0);
      r.workspace.assign(layer.workspace_bytes(Pass::kForward) + 8, 0);
    };
    auto vec = [&](std::vector<float>& v) { return Tensor(Shape(1, c, 1, 1), v.data()); };
    auto run = [&](Run& r, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
      const Workspace work = {r.workspace.data(), r.workspace.size()};
      ForwardAndBackward(layer, x, y, dy, dx,
                         {{vec(r.gamma), vec(r.beta), vec(r.mean), vec(r.var)},
                          {vec(r.dgamma), vec(r.dbeta)},
                          {vec(r.aux_mean), vec(r.aux_istd)},
                          work,
                          work});
    };
    Run r16, r32;
    prepare(r16);
    prepare(r32);
    std::vector<uint16_t> y16(n), dx16 = half[2];
    std::vector<float> y32(n), dx32 = wide[2];
    run(r16, Tensor(shape, half[0].data(), DType::kBF16, layout),
        Tensor(shape, y16.data(), DType::kBF16, layout),
        Tensor(shape, half[1].data(), DType::kBF16, layout),
        Tensor(shape, dx16.data(), DType::kBF16, layout));
    run(r32, Tensor(shape, wide[0].data(), layout), Tensor(shape, y32.data(), layout),
        Tensor(shape, wide[1].data(), layout), Tensor(shape, dx32.data(), layout));
    ExpectRounded(y16, y32, "forward");
    ExpectRounded(dx16, dx32, "backward");
    EXPECT_EQ(r16.aux_istd, r32.aux_istd);
    EXPECT_EQ(r16.mean, r32.mean);
    EXPECT_EQ(r16.dgamma, r32.dgamma);
    EXPECT_EQ(r16.dbeta, r32.dbeta);
  }
}

// Layer norm too: the bits of float32 copies, its statistics and parameter
// gradients those of the float32 values.
TEST(PrecisionTest, LayerNormGivesTheBitsOfFloat32Copies) {
  const auto net = Build(testing::kGpt, Precision::kBf16, 2);
  const int id = FirstOfType(*net, "layer_norm");
  const Layer& layer = net->layer(id);
  ASSERT_TRUE(layer.computes_16_bit(Pass::kBackward));
  const TensorInfo& x_info = net->schedule().tensors[net->schedule().layers[id].inputs[0]];
  ASSERT_EQ(x_info.dtype, DType::kBF16);
  const Shape shape = x_info.shape;
  const int64_t n = shape.numel(), c = shape.c();
  TwoForms values = RandomBf16({shape, shape, shape}, 31, 4, -2);
  auto& half = values.half;
  auto& wide = values.wide;
  std::vector<float> gamma(c), beta(c);
  for (int64_t i = 0; i < c; ++i) {
    gamma[i] = 0.5f + UniformAt(41, i);
    beta[i] = UniformAt(42, i) - 0.5f;
  }
  auto vec = [&](std::vector<float>& v) { return Tensor(Shape(1, c, 1, 1), v.data()); };
  struct Grads {
    std::vector<float> dgamma, dbeta;
    std::vector<char> workspace;
  };
  auto run = [&](Grads& g, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
    g.dgamma.assign(c, 0);
    g.dbeta.assign(c, 0);
    g.workspace.assign(layer.workspace_bytes(Pass::kBackward) + 8, 0);
    ForwardAndBackward(layer, x, y, dy, dx,
                       {{vec(gamma), vec(beta)},
                        {vec(g.dgamma), vec(g.dbeta)},
                        {},
                        {},
                        {g.workspace.data(), g.workspace.size()}});
  };
  Grads g16, g32;
  std::vector<uint16_t> y16(n), dx16 = half[2];
  std::vector<float> y32(n), dx32 = wide[2];
  const auto t16 = [&](auto& v) { return Tensor(shape, v.data(), DType::kBF16, Layout::kPlain); };
  run(g16, t16(half[0]), t16(y16), t16(half[1]), t16(dx16));
  run(g32, Tensor(shape, wide[0].data()), Tensor(shape, y32.data()), Tensor(shape, wide[1].data()),
      Tensor(shape, dx32.data()));
  ExpectRounded(y16, y32, "forward");
  ExpectRounded(dx16, dx32, "backward");
  EXPECT_EQ(g16.dgamma, g32.dgamma);
  EXPECT_EQ(g16.dbeta, g32.dbeta);
}

// And attention (either algorithm): widened as it gathers each head, rounded
// as it scatters.
TEST(PrecisionTest, AttentionGivesTheBitsOfFloat32Copies) {
  const auto net = Build(testing::kGpt, Precision::kBf16, 2);
  const int id = FirstOfType(*net, "attention");
  const Layer& layer = net->layer(id);
  ASSERT_TRUE(layer.computes_16_bit(Pass::kForward));
  const LayerTensors& lt = net->schedule().layers[id];
  const Shape in = net->schedule().tensors[lt.inputs[0]].shape;
  const Shape out = net->schedule().tensors[lt.outputs[0]].shape;
  ASSERT_EQ(net->schedule().tensors[lt.inputs[0]].dtype, DType::kBF16);
  std::vector<Shape> shapes = {in, out, in};  // x, dy, the gradient added into
  TwoForms values = RandomBf16(shapes, 51, 2, -1);
  auto& half = values.half;
  auto& wide = values.wide;
  struct Run {
    std::vector<float> saved;
    std::vector<char> forward_work, backward_work;
  };
  auto run = [&](Run& r, const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& dx) {
    r.saved.assign(layer.aux()[0].shape.numel(), 0);
    r.forward_work.assign(layer.workspace_bytes(Pass::kForward) + 8, 0);
    r.backward_work.assign(layer.workspace_bytes(Pass::kBackward) + 8, 0);
    ForwardAndBackward(layer, x, y, dy, dx,
                       {{},
                        {},
                        {Tensor(layer.aux()[0].shape, r.saved.data())},
                        {r.forward_work.data(), r.forward_work.size()},
                        {r.backward_work.data(), r.backward_work.size()}});
  };
  Run r16, r32;
  std::vector<uint16_t> y16(out.numel()), dx16 = half[2];
  std::vector<float> y32(out.numel()), dx32 = wide[2];
  const auto t16 = [](auto& v, const Shape& s) {
    return Tensor(s, v.data(), DType::kBF16, Layout::kPlain);
  };
  run(r16, t16(half[0], in), t16(y16, out), t16(half[1], out), t16(dx16, in));
  run(r32, Tensor(in, wide[0].data()), Tensor(out, y32.data()), Tensor(out, wide[1].data()),
      Tensor(in, dx32.data()));
  ExpectRounded(y16, y32, "forward");
  ExpectRounded(dx16, dx32, "backward");
  EXPECT_EQ(r16.saved, r32.saved);
}

// Slices cost speed, so a bf16 network computes whole steps until memory
// binds: where the plan does not fit, the programs' first leaner build
// slices the large steps (whatever the workspace policy), and it needs
// less memory than the whole steps.
TEST(PrecisionTest, SlicesAreTheFirstLeanerBuildInBf16) {
  WorkspacePolicy pinned = *ParseWorkspacePolicy("pin:im2col_image");
  NetOptions options = NetOptionsFor(64, DeviceType::kCpu, pinned, Precision::kBf16);
  EXPECT_EQ(options.slice_copies_from, SIZE_MAX);
  auto whole = testing::BuildTrainingNet(testing::MustParse(testing::kAlexNet), options);
  ASSERT_TRUE(whole.ok());
  const std::vector<LeanerBuild> builds = LeanerBuilds(**whole, options, pinned);
  ASSERT_EQ(builds.size(), 1u);
  EXPECT_EQ(builds[0].net.slice_copies_from, kSliceCopiesFrom);
  EXPECT_NE(builds[0].note.find("eighths of the batch"), std::string::npos) << builds[0].note;
  NetOptions sliced = builds[0].net;
  sliced.slice_copies_from = 16 * kKiB;  // this small network's steps are small
  auto lean = testing::BuildTrainingNet(testing::MustParse(testing::kAlexNet), sliced);
  ASSERT_TRUE(lean.ok());
  MemoryOptions memory;
  ASSERT_TRUE(ApplyMemoryMode("liveness", &memory).ok());
  memory.workspace = pinned;
  auto a = MinimumBudget((*whole)->view(), memory);
  auto b = MinimumBudget((*lean)->view(), memory);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(*b, *a);
  // With the default policy the layouts and algorithms follow, sliced too;
  // float32 has no slices to try.
  for (const LeanerBuild& build :
       LeanerBuilds(**whole, options, *ParseWorkspacePolicy("dynamic"))) {
    EXPECT_EQ(build.net.slice_copies_from, kSliceCopiesFrom) << build.note;
  }
  EXPECT_TRUE(LeanerBuilds(**whole, NetOptionsFor(64, DeviceType::kCpu, pinned), pinned).empty());
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
