#include "framework/graph/net.h"

#include <algorithm>
#include <unordered_map>

#include "framework/graph/layer_registry.h"
#include "framework/graph/net_checks.h"
#include "framework/graph/route.h"

namespace spill {
namespace {

std::string Context(const Layer& layer) {
  return layer.where().ToString() + ": layer '" + layer.name() + "' (" + layer.type() + ")";
}

std::string Plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

StatusOr<std::unique_ptr<Net>> Net::Build(const NetSpec& spec, const NetOptions& options) {
  if (options.batch < 1 || options.batch > kMaxBatch) {
    return InvalidArgument("batch size " + std::to_string(options.batch) + " is outside [1, " +
                           std::to_string(kMaxBatch) + "]");
  }
  if (spec.layers.size() > static_cast<size_t>(kMaxLayers)) {
    return InvalidArgument(spec.file + ": " + std::to_string(spec.layers.size()) +
                           " layers; the limit is " + std::to_string(kMaxLayers));
  }
  std::unique_ptr<Net> net(new Net());
  net->name_ = spec.name;
  net->file_ = spec.file;
  net->batch_ = options.batch;
  SPILL_RETURN_IF_ERROR(net->CreateLayers(spec, options));
  SPILL_RETURN_IF_ERROR(net->WireInputs(spec));

  RouteGraph graph;
  graph.Resize(net->num_layers());
  for (int id = 0; id < net->num_layers(); ++id) {
    for (const auto& in : net->decls_[id].inputs) graph.AddEdge(in.layer, id);
  }
  std::vector<int> cycle = FindCycle(graph);
  if (!cycle.empty()) {
    std::string path;
    for (int id : cycle) path += (path.empty() ? "" : " -> ") + net->layers_[id]->name();
    return InvalidArgument(net->layers_[cycle[0]]->where().ToString() +
                           ": the network has a cycle: " + path);
  }
  auto route = ConstructRoute(graph, net->layer_names());
  if (!route.ok()) return route.status().WithContext(spec.file);
  SPILL_RETURN_IF_ERROR(net->InferShapes(*route));
  SPILL_RETURN_IF_ERROR(net->CheckLosses());
  net->schedule_ = BuildSchedule(net->decls_, *route);
  net->blocked_layouts_ = options.blocked_layouts;
  net->layout_ = options.layout;
  net->precision_ = options.precision;
  net->slice_copies_from_ = options.slice_copies_from;
  net->AssignLayouts(options.blocked_layouts);
  net->AssignPrecision();
  net->RefreshWorkspaces();
  return net;
}

namespace {

bool AutoAttention(const LayerSpec& ls) {
  if (ls.type != "attention" || !ls.params.IsMap()) return false;
  const YAML::Node algorithm = ls.params["algorithm"];
  return algorithm.IsDefined() && algorithm.IsScalar() && algorithm.Scalar() == "auto";
}

// `given` with its algorithm chosen, its keys a copy (a YAML node assigned
// to would change every spec that shares it).
LayerSpec WithAlgorithm(const LayerSpec& given, const char* algorithm) {
  YAML::Node params = YAML::Clone(given.params);
  params["algorithm"] = algorithm;
  return LayerSpec{given.name, given.type, given.inputs, params, given.where};
}

}  // namespace

Status Net::CreateLayers(const NetSpec& spec, const NetOptions& options) {
  for (const LayerSpec& given : spec.layers) {
    // Attention of algorithm auto is built with the one the options choose,
    // and says so in its spec (plan, export and the logs read that).
    const bool chosen = AutoAttention(given);
    chooses_attention_ = chooses_attention_ || chosen;
    const LayerSpec ls =
        chosen ? WithAlgorithm(given, options.tiled_attention ? "tiled" : "naive") : given;
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer,
                           LayerRegistry::Get().Create(ls, options.device));
    layer->set_batch(batch_);
    LayerDecl decl;
    decl.name = ls.name;
    decl.is_input = layer->is_input();
    decl.is_loss = layer->is_loss();
    if (decl.is_input) input_layers_.push_back(num_layers());
    if (decl.is_loss) loss_layers_.push_back(num_layers());
    layers_.push_back(std::move(layer));
    decls_.push_back(std::move(decl));
    specs_.push_back(ls);
  }
  if (input_layers_.empty()) {
    return InvalidArgument(spec.file + ": the network has no input layer (type: input)");
  }
  return Status::Ok();
}

Status Net::WireInputs(const NetSpec& spec) {
  std::unordered_map<std::string, int> ids;
  for (int id = 0; id < num_layers(); ++id) ids[layers_[id]->name()] = id;
  for (int id = 0; id < num_layers(); ++id) {
    const Layer& layer = *layers_[id];
    LayerDecl& decl = decls_[id];
    for (const std::string& ref : spec.layers[id].inputs) {
      std::string name;
      int output;
      SplitReference(ref, &name, &output);
      auto it = ids.find(name);
      if (it == ids.end()) {
        return InvalidArgument(Context(layer) + ": input '" + ref + "' is not defined");
      }
      const Layer& producer = *layers_[it->second];
      if (output >= producer.num_outputs()) {
        return InvalidArgument(Context(layer) + ": reads '" + ref + "' but '" + name + "' has " +
                               Plural(producer.num_outputs(), "output"));
      }
      decl.inputs.push_back({it->second, output});
    }
    int given = static_cast<int>(decl.inputs.size());
    if (layer.wants_labels() && given == layer.min_inputs() - 1) {
      if (input_layers_.size() != 1) {
        return InvalidArgument(Context(layer) +
                               ": name the labels as the last input (e.g. data:1); "
                               "the network has several input layers");
      }
      decl.inputs.push_back({input_layers_[0], 1});
      given++;
    }
    if (given < layer.min_inputs() || given > layer.max_inputs()) {
      std::string expected = layer.min_inputs() == layer.max_inputs()
                                 ? Plural(layer.min_inputs(), "input")
                                 : "from " + std::to_string(layer.min_inputs()) + " to " +
                                       Plural(layer.max_inputs(), "input");
      return InvalidArgument(Context(layer) + ": takes " + expected + ", got " +
                             std::to_string(given));
    }
  }
  return Status::Ok();
}

Status Net::InferShapes(const std::vector<int>& route) {
  std::vector<std::vector<Shape>> shapes(num_layers());
  for (int id : route) {
    Layer& layer = *layers_[id];
    LayerDecl& decl = decls_[id];
    decl.propagates.clear();
    decl.passes.clear();
    std::vector<Shape> in;
    for (const auto& i : decl.inputs) in.push_back(shapes[i.layer][i.output]);
    Status status = layer.Reshape(in, &shapes[id]);
    if (!status.ok()) {
      std::string inputs;
      for (size_t i = 0; i < in.size(); ++i) {
        inputs +=
            (i ? ", " : "") + layers_[decl.inputs[i].layer]->name() + " is " + in[i].ToString();
      }
      // The layer's code stays: a size no budget holds is kOutOfMemory, which
      // the tools that search (widest, deepest) read as "does not fit".
      return Status(status.code(), Context(layer) + ": " + status.message() +
                                       (inputs.empty() ? "" : " (inputs: " + inputs + ")"));
    }
    SPILL_CHECK_EQ(static_cast<int>(shapes[id].size()), layer.num_outputs()) << layer.name();
    SPILL_RETURN_IF_ERROR(CheckTensorSizes(layer, shapes[id], layer.params(), layer.aux()));
    decl.output_shapes = shapes[id];
    decl.params = layer.params();
    decl.aux = layer.aux();
    decl.needs = layer.backward_needs();
    SPILL_CHECK_EQ(decl.needs.inputs.size(), in.size()) << layer.name();
    for (size_t i = 0; i < in.size(); ++i) {
      decl.propagates.push_back(layer.propagates_to(i));
      decl.passes.push_back(layer.passes_gradient_to(i));
    }
    decl.forward_workspace = layer.workspace_bytes(Pass::kForward);
    decl.backward_workspace = layer.workspace_bytes(Pass::kBackward);
  }
  return Status::Ok();
}

SequenceReshaper ReshaperOf(Net& net) {
  return [&net](int64_t length) -> StatusOr<NetworkView> {
    SPILL_RETURN_IF_ERROR(net.SetSequenceLength(length));
    return net.view();
  };
}

Status Net::SetSequenceLength(int64_t length) {
  const int64_t before = sequence_length();
  if (length == before) return Status::Ok();
  Status status = Reshape(length);
  if (!status.ok()) SPILL_CHECK(Reshape(before).ok()) << name_ << ": cannot restore its length";
  return status;
}

Status Net::Reshape(int64_t length) {
  for (int id : input_layers_) SPILL_RETURN_IF_ERROR(layers_[id]->SetSequenceLength(length));
  SPILL_RETURN_IF_ERROR(InferShapes(schedule_.route));
  // The same graph gives the same tensors in the same order; the solver's
  // state, appended later, is persistent and keeps its shape.
  const Schedule fresh = BuildSchedule(decls_, schedule_.route);
  SPILL_CHECK_LE(fresh.tensors.size(), schedule_.tensors.size());
  for (size_t t = 0; t < fresh.tensors.size(); ++t) {
    const TensorInfo& now = fresh.tensors[t];
    const TensorInfo& was = schedule_.tensors[t];
    SPILL_CHECK(now.name == was.name && now.kind == was.kind) << now.name << " vs " << was.name;
    if (!IsTransient(now.kind) && !(now.shape == was.shape)) {
      return InvalidArgument(file_ + ": '" + now.name + "' is " + now.shape.ToString() +
                             " at sequence length " + std::to_string(length) + " but " +
                             was.shape.ToString() +
                             " before: the parameters must not depend on the length");
    }
  }
  for (size_t t = 0; t < fresh.tensors.size(); ++t) {
    schedule_.tensors[t].shape = fresh.tensors[t].shape;
    schedule_.tensors[t].bytes = fresh.tensors[t].bytes;
  }
  AssignLayouts(blocked_layouts_);
  AssignPrecision();
  RefreshWorkspaces();
  return Status::Ok();
}

Status Net::CheckLosses() const {
  std::vector<SourceLocation> where;
  for (const auto& layer : layers_) where.push_back(layer->where());
  return CheckLossesReachable(decls_, where, file_);
}

namespace {

// Whether every input gradient of a layer's backward is its output's gradient
// itself (SharesOutputGradient): the backward then has nothing to do.
bool HandsOnInPlace(const LayerTensors& lt) {
  bool any = false;
  for (size_t i = 0; i < lt.input_grads.size(); ++i) {
    if (lt.input_grads[i] == kNoTensor) continue;
    if (!SharesOutputGradient(lt, i)) return false;
    any = true;
  }
  return any;
}

}  // namespace

NetworkView Net::view() const {
  NetworkView view;
  view.schedule = &schedule_;
  view.algorithms = &algorithms_;
  view.batch = batch_;
  for (int id = 0; id < num_layers(); ++id) {
    const Layer& l = *layers_[id];
    LayerSummary summary{l.name(), l.type(), l.cost(), decls_[id].is_loss, decls_[id].is_input};
    summary.traits = l.memory_traits();
    std::vector<Shape> inputs;
    for (const auto& in : decls_[id].inputs) {
      inputs.push_back(decls_[in.layer].output_shapes[in.output]);
    }
    summary.forward_work = l.work(Pass::kForward, inputs, decls_[id].output_shapes);
    summary.backward_work = l.work(Pass::kBackward, inputs, decls_[id].output_shapes);
    if (HandsOnInPlace(schedule_.layers[id])) summary.backward_work = LayerWork();
    AddConversionWork(id, Pass::kForward, &summary.forward_work);
    AddConversionWork(id, Pass::kBackward, &summary.backward_work);
    summary.slices = l.supports_slices();
    summary.forward_sweeps = l.slice_sweeps(Pass::kForward);
    summary.backward_sweeps = l.slice_sweeps(Pass::kBackward);
    view.layers.push_back(std::move(summary));
  }
  return view;
}

int Net::Algorithms::NumOps(int layer, Pass pass) const {
  return net_.layer(layer).num_algorithm_ops(pass);
}

std::vector<AlgorithmCandidate> Net::Algorithms::Candidates(int layer, Pass pass, int op,
                                                            int64_t images) const {
  std::vector<AlgorithmCandidate> candidates =
      net_.layer(layer).algorithm_candidates(pass, op, images);
  const size_t copies = net_.ConversionBytes(layer, pass, images);
  for (AlgorithmCandidate& c : candidates) c.workspace += copies;
  return candidates;
}

size_t Net::Algorithms::FixedWorkspace(int layer, Pass pass, int64_t images, size_t whole) const {
  return whole - net_.ConversionBytes(layer, pass, net_.batch()) +
         net_.ConversionBytes(layer, pass, images);
}

int64_t Net::ConversionSlice(int layer, Pass pass) const {
  return conversion_slices_[2 * layer + (pass == Pass::kBackward)];
}

int64_t Net::ComputeConversionSlice(int layer, Pass pass) const {
  if (!layers_[layer]->supports_slices()) return 0;
  const size_t copies = ConversionBytes(layer, pass, batch_);
  if (copies == 0 || copies < slice_copies_from_) return 0;  // nothing, or little, to copy
  const int64_t images = (batch_ + kConversionSlices - 1) / kConversionSlices;
  return images < batch_ ? images : 0;
}

bool Net::ReadsIndices(int layer, int input) const {
  const Layer& l = *layers_[layer];
  return l.reads_indices(input) ||
         (l.wants_labels() && input + 1 == static_cast<int>(decls_[layer].inputs.size()));
}

void Net::AssignPrecision() {
  const DType half = ActivationType(precision_);
  // What a layer reads as indices, and everything that is computed from.
  std::vector<char> exact(schedule_.tensors.size(), 0);
  std::vector<TensorId> pending;
  for (int id = 0; id < num_layers(); ++id) {
    const std::vector<TensorId>& inputs = schedule_.layers[id].inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (ReadsIndices(id, static_cast<int>(i))) pending.push_back(inputs[i]);
    }
  }
  while (!pending.empty()) {
    const TensorId t = pending.back();
    pending.pop_back();
    if (exact[t]) continue;
    exact[t] = 1;
    const int producer = schedule_.tensors[t].layer;
    if (decls_[producer].is_input) continue;
    for (TensorId in : schedule_.layers[producer].inputs) pending.push_back(in);
  }
  for (TensorId t = 0; t < static_cast<TensorId>(schedule_.tensors.size()); ++t) {
    TensorInfo& info = schedule_.tensors[t];
    if (info.kind != TensorKind::kActivation) continue;
    const LayerDecl& producer = decls_[info.layer];
    info.dtype = exact[t] || producer.is_input || producer.is_loss ? DType::kF32 : half;
  }
  for (const LayerTensors& lt : schedule_.layers) {
    for (size_t k = 0; k < lt.output_grads.size(); ++k) {
      if (lt.output_grads[k] == kNoTensor) continue;
      schedule_.tensors[lt.output_grads[k]].dtype = schedule_.tensors[lt.outputs[k]].dtype;
    }
  }
  for (TensorInfo& info : schedule_.tensors) {
    if (info.kind == TensorKind::kActivation || info.kind == TensorKind::kActivationGrad) {
      info.bytes = static_cast<size_t>(info.shape.numel()) * DTypeSize(info.dtype);
    }
  }
  for (int id = 0; id < num_layers(); ++id) {
    const LayerTensors& lt = schedule_.layers[id];
    std::vector<DType> in, out;
    for (TensorId t : lt.inputs) in.push_back(schedule_.tensors[t].dtype);
    for (TensorId t : lt.outputs) out.push_back(schedule_.tensors[t].dtype);
    layers_[id]->set_dtypes(std::move(in), std::move(out));
  }
}

void Net::AddConversionWork(int layer, Pass pass, LayerWork* work) const {
  if (precision_ == Precision::kTf32) work->arithmetic = Arithmetic::kTf32;
  const DType stored = ActivationType(precision_);
  if (stored == DType::kF32) return;
  if (layers_[layer]->computes_16_bit(pass)) {
    work->bytes /= 2;  // its operands are 16-bit: half the traffic
    work->arithmetic = stored == DType::kBF16 ? Arithmetic::kBf16 : Arithmetic::kFp16;
    return;
  }
  // Each copy's element: 2 bytes read and 4 written on the way in, or 4
  // read and 2 written on the way out.
  work->bytes += 1.5 * static_cast<double>(ConversionBytes(layer, pass, batch_));
}

size_t Net::ConversionBytes(int layer, Pass pass, int64_t images) const {
  if (ActivationType(precision_) == DType::kF32) return 0;
  if (layers_[layer]->computes_16_bit(pass)) return 0;
  const LayerTensors& lt = schedule_.layers[layer];
  const BackwardNeeds& needs = decls_[layer].needs;
  std::vector<TensorId> ids;
  if (pass == Pass::kForward) {
    ids = lt.inputs;
    ids.insert(ids.end(), lt.outputs.begin(), lt.outputs.end());
  } else {
    for (size_t i = 0; i < lt.inputs.size(); ++i) {
      if (needs.inputs[i]) ids.push_back(lt.inputs[i]);
    }
    if (needs.outputs) ids.insert(ids.end(), lt.outputs.begin(), lt.outputs.end());
    ids.insert(ids.end(), lt.output_grads.begin(), lt.output_grads.end());
    ids.insert(ids.end(), lt.input_grads.begin(), lt.input_grads.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  size_t bytes = 0;
  for (TensorId id : ids) {
    if (id == kNoTensor || schedule_.tensors[id].dtype == DType::kF32) continue;
    const TensorInfo& info = schedule_.tensors[id];
    // The executor cuts batch-major transient tensors to the slice
    // (Executor::View).
    const bool sliced =
        images > 0 && images < batch_ && IsTransient(info.kind) && info.shape.n() == batch_;
    bytes += ConversionCopyBytes(sliced ? images * info.shape.sample_size() : info.shape.numel());
  }
  return bytes;
}

void Net::AssignLayouts(bool blocked) {
  // Activations by dense index; a layer's inputs and outputs in its terms.
  std::vector<int> index(schedule_.tensors.size(), -1);
  std::vector<Shape> shapes;
  std::vector<TensorId> ids;
  for (TensorId t = 0; t < static_cast<TensorId>(schedule_.tensors.size()); ++t) {
    if (schedule_.tensors[t].kind != TensorKind::kActivation) continue;
    index[t] = static_cast<int>(shapes.size());
    shapes.push_back(schedule_.tensors[t].shape);
    ids.push_back(t);
  }
  std::vector<LayoutNode> nodes(num_layers());
  for (int id = 0; id < num_layers(); ++id) {
    const LayerTensors& lt = schedule_.layers[id];
    nodes[id].rule = blocked ? layers_[id]->layout_rule() : LayoutRule::kPlain;
    nodes[id].prefers = layout_.value_or(layers_[id]->preferred_layout(ActivationType(precision_)));
    for (TensorId t : lt.inputs) nodes[id].inputs.push_back(index[t]);
    for (TensorId t : lt.outputs) nodes[id].outputs.push_back(index[t]);
  }
  const std::vector<Layout> layouts = ChooseLayouts(shapes, nodes);
  for (size_t i = 0; i < ids.size(); ++i) schedule_.tensors[ids[i]].layout = layouts[i];
  for (int id = 0; id < num_layers(); ++id) {
    const LayerTensors& lt = schedule_.layers[id];
    std::vector<Layout> in, out;
    for (int i : nodes[id].inputs) in.push_back(layouts[i]);
    for (int i : nodes[id].outputs) out.push_back(layouts[i]);
    for (size_t k = 0; k < lt.output_grads.size(); ++k) {
      if (lt.output_grads[k] != kNoTensor) schedule_.tensors[lt.output_grads[k]].layout = out[k];
    }
    layers_[id]->set_layouts(std::move(in), std::move(out));
  }
}

void Net::RefreshWorkspaces() {
  conversion_slices_.assign(2 * static_cast<size_t>(num_layers()), 0);
  for (int id = 0; id < num_layers(); ++id) {
    std::vector<bool> down;
    for (TensorId g : schedule_.layers[id].input_grads) down.push_back(g != kNoTensor);
    layers_[id]->set_propagate_down(down);
    decls_[id].forward_workspace =
        layers_[id]->workspace_bytes(Pass::kForward) + ConversionBytes(id, Pass::kForward, batch_);
    decls_[id].backward_workspace = layers_[id]->workspace_bytes(Pass::kBackward) +
                                    ConversionBytes(id, Pass::kBackward, batch_);
    conversion_slices_[2 * id] = ComputeConversionSlice(id, Pass::kForward);
    conversion_slices_[2 * id + 1] = ComputeConversionSlice(id, Pass::kBackward);
    for (const Pass pass : {Pass::kForward, Pass::kBackward}) {
      const bool forward = pass == Pass::kForward;
      Step& step =
          schedule_.steps[forward ? schedule_.forward_step[id] : schedule_.backward_step[id]];
      if (step.active) {
        step.workspace_bytes =
            forward ? decls_[id].forward_workspace : decls_[id].backward_workspace;
      }
    }
  }
}

std::vector<std::string> Net::layer_names() const {
  std::vector<std::string> names;
  for (const auto& layer : layers_) names.push_back(layer->name());
  return names;
}

int Net::FindLayer(const std::string& name) const {
  for (int id = 0; id < num_layers(); ++id) {
    if (layers_[id]->name() == name) return id;
  }
  return -1;
}

Shape Net::input_shape() const { return decls_[input_layers_[0]].output_shapes[0]; }

Shape Net::label_shape() const { return decls_[input_layers_[0]].output_shapes[1]; }

int64_t Net::num_classes() const {
  if (loss_layers_.empty()) return 0;
  const LayerDecl& loss = decls_[loss_layers_[0]];
  return decls_[loss.inputs[0].layer].output_shapes[loss.inputs[0].output].c();
}

}  // namespace spill
