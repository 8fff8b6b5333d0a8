#include "tests/testing/layer_harness.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <sstream>

#include "framework/base/random.h"
#include "framework/config/net_spec.h"
#include "framework/graph/layer_registry.h"
#include "layers/cpu/blocked.h"

namespace spill {
namespace testing {

LayerHarness::LayerHarness(const std::string& entry, const std::vector<Shape>& input_shapes,
                           DeviceType device)
    : input_shapes_(input_shapes) {
  YAML::Node node = YAML::Load(entry);
  LayerSpec spec;
  spec.name = "under_test";
  spec.type = node["type"].Scalar();
  spec.where = SourceLocation{"test", 1, ""};
  spec.params = YAML::Node(YAML::NodeType::Map);
  for (const auto& item : node) {
    if (item.first.Scalar() != "type") spec.params[item.first.Scalar()] = item.second;
  }
  auto created = LayerRegistry::Get().Create(spec, device);
  SPILL_CHECK(created.ok()) << created.status().ToString();
  layer_ = std::move(created).value();
  layer_->set_batch(input_shapes.empty() ? 2 : input_shapes[0].n());
  Status status = layer_->Reshape(input_shapes, &output_shapes_);
  SPILL_CHECK(status.ok()) << status.ToString();
  for (const Shape& s : input_shapes) {
    inputs.emplace_back(s.numel());
    input_grads.emplace_back(s.numel());
  }
  for (const Shape& s : output_shapes_) {
    outputs.emplace_back(s.numel());
    output_grads.emplace_back(s.numel());
  }
  param_specs = layer_->params();
  for (const ParamSpec& p : param_specs) {
    params.emplace_back(p.shape.numel());
    param_grads.emplace_back(p.shape.numel());
  }
  for (const AuxSpec& a : layer_->aux()) aux.emplace_back(a.shape.numel());
  input_layouts_.assign(input_shapes.size(), Layout::kPlain);
  output_layouts_.assign(output_shapes_.size(), Layout::kPlain);
  size_t ws =
      std::max(layer_->workspace_bytes(Pass::kForward), layer_->workspace_bytes(Pass::kBackward));
  workspace_.resize(ws / sizeof(float) + 1);
}

void LayerHarness::UseLayouts(Layout layout) {
  std::vector<Shape> shapes = input_shapes_;
  shapes.insert(shapes.end(), output_shapes_.begin(), output_shapes_.end());
  std::vector<LayoutNode> nodes(1);
  nodes[0].rule = layer_->layout_rule();
  nodes[0].prefers = layout;
  for (size_t i = 0; i < shapes.size(); ++i) {
    (i < input_shapes_.size() ? nodes[0].inputs : nodes[0].outputs).push_back(static_cast<int>(i));
  }
  // As if convolutions in `layout` produced the inputs and consumed the
  // outputs.
  for (size_t i = 0; i < shapes.size(); ++i) {
    LayoutNode conv;
    conv.rule = LayoutRule::kFree;
    conv.prefers = layout;
    conv.inputs = {static_cast<int>(i)};
    nodes.push_back(conv);
  }
  const std::vector<Layout> layouts = ChooseLayouts(shapes, nodes);
  input_layouts_.assign(layouts.begin(), layouts.begin() + input_shapes_.size());
  output_layouts_.assign(layouts.begin() + input_shapes_.size(), layouts.end());
  layer_->set_layouts(input_layouts_, output_layouts_);
  size_t ws =
      std::max(layer_->workspace_bytes(Pass::kForward), layer_->workspace_bytes(Pass::kBackward));
  workspace_.resize(ws / sizeof(float) + 1);
}

Tensor LayerHarness::Stage(const Shape& shape, Layout layout, std::vector<float>& values,
                           std::vector<std::vector<float>>* staging) {
  if (layout == Layout::kPlain) return Tensor(shape, values.data());
  staging->emplace_back(values.size());
  cpu::FromPlain(values.data(), shape, staging->back().data(), DType::kF32, layout);
  return Tensor(shape, staging->back().data(), layout);
}

void LayerHarness::Unstage(const Tensor& staged, std::vector<float>& values) {
  if (staged.layout() != Layout::kPlain) {
    cpu::ToPlain(staged.data(), DType::kF32, staged.layout(), staged.shape(), values.data());
  }
}

void LayerHarness::Randomize(uint64_t seed) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t j = 0; j < inputs[i].size(); ++j) inputs[i][j] = 2 * UniformAt(seed + i, j) - 1;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    for (size_t j = 0; j < params[i].size(); ++j)
      params[i][j] = 2 * UniformAt(seed + 100 + i, j) - 1;
  }
}

namespace {

// A view of images [begin, begin + count) of a batch-major tensor.
Tensor SliceOf(const Tensor& t, int64_t begin, int64_t count) {
  if (!t.valid()) return t;
  const Shape& s = t.shape();
  return Tensor(Shape(count, s.c(), s.h(), s.w()), t.data() + begin * s.sample_size(), t.layout());
}

std::vector<Tensor> SlicesOf(const std::vector<Tensor>& ts, int64_t begin, int64_t count) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(SliceOf(t, begin, count));
  return out;
}

void Restrict(ForwardArgs& args, const ForwardArgs& whole, int64_t begin, int64_t count) {
  args.inputs = SlicesOf(whole.inputs, begin, count);
  args.outputs = SlicesOf(whole.outputs, begin, count);
  args.aux = SlicesOf(whole.aux, begin, count);
}

void Restrict(BackwardArgs& args, const BackwardArgs& whole, int64_t begin, int64_t count) {
  args.inputs = SlicesOf(whole.inputs, begin, count);
  args.outputs = SlicesOf(whole.outputs, begin, count);
  args.output_grads = SlicesOf(whole.output_grads, begin, count);
  args.input_grads = SlicesOf(whole.input_grads, begin, count);
  args.aux = SlicesOf(whole.aux, begin, count);
}

}  // namespace

template <typename Args, typename Run>
void LayerHarness::RunSlices(Pass pass, Args& args, Run run) {
  if (slice_images <= 0) {
    run(args);
    return;
  }
  const int64_t batch = input_shapes_[0].n();
  std::vector<double> sums(layer_->slice_sums(pass), 0.0);
  for (int sweep = 0; sweep < layer_->slice_sweeps(pass); ++sweep) {
    for (int64_t begin = 0; begin < batch; begin += slice_images) {
      Args part = args;
      Restrict(part, args, begin, std::min(slice_images, batch - begin));
      part.slice.begin = begin;
      part.slice.batch = batch;
      part.slice.sweep = sweep;
      part.slice.sums = sums.data();
      run(part);
    }
  }
}

void LayerHarness::Forward(Phase phase, bool recompute, uint64_t seed) {
  ForwardArgs args;
  std::vector<std::vector<float>> staging;
  staging.reserve(inputs.size() + outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    args.inputs.push_back(Stage(input_shapes_[i], input_layouts_[i], inputs[i], &staging));
  for (size_t i = 0; i < outputs.size(); ++i) {
    args.outputs.push_back(Stage(output_shapes_[i], output_layouts_[i], outputs[i], &staging));
  }
  for (size_t i = 0; i < params.size(); ++i)
    args.params.emplace_back(param_specs[i].shape, params[i].data());
  std::vector<AuxSpec> aux_specs = layer_->aux();
  for (size_t i = 0; i < aux.size(); ++i) args.aux.emplace_back(aux_specs[i].shape, aux[i].data());
  args.workspace = {workspace_.data(), workspace_.size() * sizeof(float)};
  args.phase = phase;
  args.recompute = recompute;
  args.seed = seed;
  args.device = &device_;
  args.slice.image_order = image_order;
  RunSlices(Pass::kForward, args, [&](const ForwardArgs& a) { layer_->Forward(a); });
  for (size_t i = 0; i < outputs.size(); ++i) Unstage(args.outputs[i], outputs[i]);
}

void LayerHarness::Backward(const std::vector<bool>& accumulate) {
  BackwardArgs args;
  std::vector<std::vector<float>> staging;
  staging.reserve(2 * inputs.size() + 2 * outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.inputs.push_back(Stage(input_shapes_[i], input_layouts_[i], inputs[i], &staging));
    bool wants = layer_->propagates_to(static_cast<int>(i));
    args.input_grads.push_back(
        wants ? Stage(input_shapes_[i], input_layouts_[i], input_grads[i], &staging) : Tensor());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    args.outputs.push_back(Stage(output_shapes_[i], output_layouts_[i], outputs[i], &staging));
    args.output_grads.push_back(
        Stage(output_shapes_[i], output_layouts_[i], output_grads[i], &staging));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    args.params.emplace_back(param_specs[i].shape, params[i].data());
    args.param_grads.push_back(
        param_specs[i].trainable ? Tensor(param_specs[i].shape, param_grads[i].data()) : Tensor());
  }
  std::vector<AuxSpec> aux_specs = layer_->aux();
  for (size_t i = 0; i < aux.size(); ++i) args.aux.emplace_back(aux_specs[i].shape, aux[i].data());
  args.accumulate = accumulate.empty() ? std::vector<bool>(inputs.size(), false) : accumulate;
  args.workspace = {workspace_.data(), workspace_.size() * sizeof(float)};
  args.slice.image_order = image_order;
  args.device = &device_;
  RunSlices(Pass::kBackward, args, [&](const BackwardArgs& a) { layer_->Backward(a); });
  for (size_t i = 0; i < inputs.size(); ++i) Unstage(args.input_grads[i], input_grads[i]);
}

namespace {

// The objective: sum(y * r) over all outputs, or the loss for loss layers.
double Objective(LayerHarness& h, const std::vector<std::vector<float>>& weights, Phase phase) {
  h.Forward(phase);
  double total = 0;
  if (h.layer().is_loss()) {  // per image, or per pixel of a map
    const auto& p = h.outputs[0];
    const auto& labels = h.inputs[1];
    const Shape& s = h.output_shapes()[0];
    const int64_t n = s.n(), c = s.c(), pixels = s.h() * s.w();
    int64_t kept = 0;
    for (int64_t r = 0; r < n * pixels; ++r) {
      const int64_t label = static_cast<int64_t>(labels[r]);
      if (label == h.layer().ignored_label()) continue;
      ++kept;
      total -=
          std::log(std::max<double>(p[((r / pixels) * c + label) * pixels + r % pixels], FLT_MIN));
    }
    return total / static_cast<double>(std::max<int64_t>(kept, 1));
  }
  for (size_t o = 0; o < h.outputs.size(); ++o) {
    for (size_t j = 0; j < h.outputs[o].size(); ++j)
      total += static_cast<double>(h.outputs[o][j]) * weights[o][j];
  }
  return total;
}

void Compare(const char* what, size_t index, const std::vector<float>& analytic,
             std::vector<float>& values, LayerHarness& h,
             const std::vector<std::vector<float>>& weights, const GradientCheckOptions& o,
             std::ostringstream* failures) {
  for (size_t j = 0; j < values.size(); ++j) {
    const float saved = values[j];
    values[j] = saved + o.step;
    double plus = Objective(h, weights, o.phase);
    values[j] = saved - o.step;
    double minus = Objective(h, weights, o.phase);
    values[j] = saved;
    double numeric = (plus - minus) / (2.0 * o.step);
    double scale = std::max({1.0, std::fabs(numeric), std::fabs(static_cast<double>(analytic[j]))});
    if (std::fabs(numeric - analytic[j]) > o.tolerance * scale) {
      *failures << what << " " << index << "[" << j << "]: analytic " << analytic[j] << ", numeric "
                << numeric << "\n";
    }
  }
}

}  // namespace

std::string CheckGradients(LayerHarness& h, const GradientCheckOptions& o) {
  std::vector<std::vector<float>> weights;
  for (size_t i = 0; i < h.outputs.size(); ++i) {
    weights.emplace_back(h.outputs[i].size());
    for (size_t j = 0; j < weights[i].size(); ++j) weights[i][j] = 2 * UniformAt(999 + i, j) - 1;
  }
  h.Forward(o.phase);
  if (!h.layer().is_loss()) h.output_grads = weights;
  h.Backward();
  std::vector<std::vector<float>> input_grads = h.input_grads, param_grads = h.param_grads;
  std::ostringstream failures;
  for (size_t i = 0; i < h.inputs.size(); ++i) {
    if (!h.layer().propagates_to(static_cast<int>(i))) continue;
    if (std::find(o.skip_inputs.begin(), o.skip_inputs.end(), static_cast<int>(i)) !=
        o.skip_inputs.end())
      continue;
    Compare("input", i, input_grads[i], h.inputs[i], h, weights, o, &failures);
  }
  for (size_t i = 0; i < h.params.size(); ++i) {
    if (!h.param_specs[i].trainable) continue;
    Compare("param", i, param_grads[i], h.params[i], h, weights, o, &failures);
  }
  return failures.str();
}

std::string CheckInputGradientAdds(LayerHarness& harness) {
  harness.Backward({false});
  const std::vector<float> fresh = harness.input_grads[0];
  std::vector<float> base(fresh.size());
  for (size_t j = 0; j < base.size(); ++j) base[j] = static_cast<float>(j % 7) - 3;
  harness.input_grads[0] = base;
  harness.Backward({true});
  for (size_t j = 0; j < base.size(); ++j) {
    const float want = base[j] + fresh[j];
    if (!(std::fabs(harness.input_grads[0][j] - want) <= 1e-5f)) {
      return "input gradient at " + std::to_string(j) + ": " +
             std::to_string(harness.input_grads[0][j]) + " where base + fresh is " +
             std::to_string(want);
    }
  }
  return "";
}

}  // namespace testing
}  // namespace spill
