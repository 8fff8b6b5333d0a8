#include "framework/schedule/schedule.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace spill {
namespace {

void AddUnique(std::vector<TensorId>* list, TensorId id) {
  if (id == kNoTensor) return;
  if (std::find(list->begin(), list->end(), id) == list->end()) list->push_back(id);
}

// Phase 1: every tensor a layer owns, in route order.
void CreateLayerTensors(const std::vector<LayerDecl>& layers, const std::vector<int>& route,
                        Schedule* s) {
  for (int id : route) {
    const LayerDecl& decl = layers[id];
    LayerTensors& lt = s->layers[id];
    for (size_t k = 0; k < decl.output_shapes.size(); ++k) {
      std::string name = k == 0 ? decl.name : decl.name + ":" + std::to_string(k);
      lt.outputs.push_back(
          s->AddTensor({name, TensorKind::kActivation, decl.output_shapes[k], 0, id}));
    }
    for (const auto& aux : decl.aux) {
      lt.aux.push_back(
          s->AddTensor({decl.name + "/" + aux.name, TensorKind::kAux, aux.shape, 0, id}));
    }
    for (const auto& p : decl.params) {
      lt.params.push_back(
          s->AddTensor({decl.name + "/" + p.name, TensorKind::kParam, p.shape, 0, id}));
    }
    for (const auto& p : decl.params) {
      lt.param_grads.push_back(p.trainable ? s->AddTensor({decl.name + "/" + p.name + ".grad",
                                                           TensorKind::kParamGrad, p.shape, 0, id})
                                           : kNoTensor);
    }
  }
  for (int id : route) {
    for (const auto& in : layers[id].inputs) {
      s->layers[id].inputs.push_back(s->layers[in.layer].outputs[in.output]);
    }
  }
}

bool HasTrainableParams(const LayerDecl& decl) {
  for (const auto& p : decl.params) {
    if (p.trainable) return true;
  }
  return false;
}

// Phase 2: which activations need a gradient. An output needs one when its
// layer has trainable parameters or passes gradient to an input that needs
// one, and some reader propagates to it.
std::vector<bool> RequiresGrad(const std::vector<LayerDecl>& layers, const std::vector<int>& route,
                               const Schedule& s) {
  std::vector<bool> requires_grad(s.tensors.size(), false);
  for (int id : route) {
    const LayerDecl& decl = layers[id];
    if (decl.is_input) continue;
    bool rg = HasTrainableParams(decl);
    for (size_t i = 0; i < decl.inputs.size(); ++i) {
      rg = rg || (decl.propagates[i] && requires_grad[s.layers[id].inputs[i]]);
    }
    for (TensorId out : s.layers[id].outputs) requires_grad[out] = rg;
  }
  return requires_grad;
}

bool Passes(const LayerDecl& decl, size_t input) {
  return input < decl.passes.size() && decl.passes[input] && decl.propagates[input];
}

// Gradients handed on unchanged share one tensor, as autograd engines hand a
// sum's gradient on: a layer whose backward gives input i exactly its single
// output's gradient (LayerDecl::passes) lets input i's gradient live in the
// output's where nothing can tell them apart. Backward runs in reverse route
// order, so the output's gradient is complete when the layer's backward
// begins; what may then write the shared tensor is the input's other
// readers' backward, adding their share. So an input joins when it has no
// other reader; and at most one input with other readers joins, when this
// layer is its last reader and the backward of every other joining input's
// producer (which reads the tensor as its output's gradient) runs before
// any of those readers' backward. An output whose gradient already joined a
// later layer's keeps its inputs apart. owner(): per activation, the
// activation whose gradient tensor it uses (itself where none is shared).
class GradientSharing {
 public:
  GradientSharing(const std::vector<LayerDecl>& layers, const std::vector<int>& route,
                  const Schedule& s, const std::vector<bool>& requires_grad)
      : layers_(layers),
        s_(s),
        requires_grad_(requires_grad),
        owner_(s.tensors.size()),
        owns_(s.tensors.size(), false),
        position_(layers.size(), -1),
        readers_(s.tensors.size()) {
    for (TensorId t = 0; t < static_cast<TensorId>(owner_.size()); ++t) owner_[t] = t;
    for (size_t i = 0; i < route.size(); ++i) position_[route[i]] = static_cast<int>(i);
    for (int id : route) {
      for (TensorId in : s.layers[id].inputs) {
        if (readers_[in].empty() || readers_[in].back() != id) readers_[in].push_back(id);
      }
    }
    for (auto it = route.rbegin(); it != route.rend(); ++it) Share(*it);
  }

  const std::vector<TensorId>& owner() const { return owner_; }

 private:
  // Whether `t`'s gradient is its own still, shared with no other.
  bool Unshared(TensorId t) const { return owner_[t] == t && !owns_[t]; }

  void Share(int id) {
    const LayerDecl& decl = layers_[id];
    const LayerTensors& lt = s_.layers[id];
    if (lt.outputs.size() != 1 || decl.is_loss) return;
    const TensorId out = lt.outputs[0];
    if (!requires_grad_[out] || !Unshared(out)) return;
    std::vector<TensorId> alone;  // joining inputs with no other reader
    TensorId shared = kNoTensor;  // the one with other readers
    for (size_t i = 0; i < lt.inputs.size(); ++i) {
      const TensorId in = lt.inputs[i];
      if (!Passes(decl, i) || !requires_grad_[in] || !Unshared(in)) continue;
      if (s_.tensors[in].shape != s_.tensors[out].shape || layers_[s_.tensors[in].layer].is_input ||
          std::count(lt.inputs.begin(), lt.inputs.end(), in) != 1) {
        continue;
      }
      if (readers_[in].size() == 1) {
        alone.push_back(in);
      } else if (shared == kNoTensor && readers_[in].back() == id) {
        shared = in;
      }
    }
    if (shared != kNoTensor && ReadBeforeAdded(alone, shared, id)) alone.push_back(shared);
    for (TensorId in : alone) owner_[in] = out;
    owns_[out] = !alone.empty();
  }

  // Whether the backward of every producer of `alone` runs before that of
  // every reader of `shared` but `id`.
  bool ReadBeforeAdded(const std::vector<TensorId>& alone, TensorId shared, int id) const {
    for (TensorId in : alone) {
      for (int reader : readers_[shared]) {
        if (reader != id && position_[s_.tensors[in].layer] <= position_[reader]) return false;
      }
    }
    return true;
  }

  const std::vector<LayerDecl>& layers_;
  const Schedule& s_;
  const std::vector<bool>& requires_grad_;
  std::vector<TensorId> owner_;
  std::vector<bool> owns_;                 // others share its gradient
  std::vector<int> position_;              // per layer: its place in the route
  std::vector<std::vector<int>> readers_;  // per tensor: the layers reading it, in route order
};

void CreateGradientTensors(const std::vector<LayerDecl>& layers, const std::vector<int>& route,
                           Schedule* s) {
  const std::vector<bool> requires_grad = RequiresGrad(layers, route, *s);
  const std::vector<TensorId> owner = GradientSharing(layers, route, *s, requires_grad).owner();
  std::vector<TensorId> grad_of(s->tensors.size(), kNoTensor);  // by owner
  for (int id : route) {
    const LayerDecl& decl = layers[id];
    LayerTensors& lt = s->layers[id];
    lt.input_grads.assign(decl.inputs.size(), kNoTensor);
    for (size_t i = 0; i < decl.inputs.size(); ++i) {
      TensorId in = lt.inputs[i];
      if (!decl.propagates[i] || !requires_grad[in]) continue;
      TensorId& g = grad_of[owner[in]];
      if (g == kNoTensor) {
        const TensorInfo info = s->tensors[owner[in]];
        g = s->AddTensor(
            {info.name + ".grad", TensorKind::kActivationGrad, info.shape, 0, info.layer});
      }
      lt.input_grads[i] = g;
    }
  }
  for (int id : route) {
    LayerTensors& lt = s->layers[id];
    for (TensorId out : lt.outputs) lt.output_grads.push_back(grad_of[owner[out]]);
  }
}

Step ForwardStep(const LayerDecl& decl, const LayerTensors& lt) {
  Step step;
  step.pass = Pass::kForward;
  for (TensorId t : lt.inputs) AddUnique(&step.reads, t);
  for (TensorId t : lt.params) AddUnique(&step.reads, t);
  for (TensorId t : lt.outputs) AddUnique(&step.writes, t);
  for (TensorId t : lt.aux) AddUnique(&step.writes, t);
  step.workspace_bytes = decl.forward_workspace;
  return step;
}

Step BackwardStep(const LayerDecl& decl, LayerTensors* lt, std::set<TensorId>* written) {
  Step step;
  step.pass = Pass::kBackward;
  bool has_output_grad = false;
  for (TensorId g : lt->output_grads) has_output_grad = has_output_grad || g != kNoTensor;
  bool writes_something = HasTrainableParams(decl);
  for (TensorId g : lt->input_grads) writes_something = writes_something || g != kNoTensor;
  lt->accumulate.assign(lt->inputs.size(), false);
  step.active = (decl.is_loss || has_output_grad) && writes_something;
  if (!step.active) return step;
  for (TensorId g : lt->output_grads) AddUnique(&step.reads, g);
  for (size_t i = 0; i < lt->inputs.size(); ++i) {
    if (decl.needs.inputs[i]) AddUnique(&step.saved, lt->inputs[i]);
  }
  if (decl.needs.outputs) {
    for (TensorId t : lt->outputs) AddUnique(&step.saved, t);
  }
  for (TensorId t : lt->aux) AddUnique(&step.saved, t);
  for (TensorId t : step.saved) AddUnique(&step.reads, t);
  for (TensorId t : lt->params) AddUnique(&step.reads, t);
  std::vector<TensorId> this_step;  // gradients first written by this step
  for (size_t i = 0; i < lt->inputs.size(); ++i) {
    TensorId g = lt->input_grads[i];
    if (g == kNoTensor || SharesOutputGradient(*lt, i)) continue;
    bool earlier = written->count(g) > 0;
    bool here = std::find(this_step.begin(), this_step.end(), g) != this_step.end();
    lt->accumulate[i] = earlier || here;
    if (earlier && !here) AddUnique(&step.accumulates, g);
    if (!earlier) AddUnique(&this_step, g);
    AddUnique(&step.writes, g);
  }
  written->insert(this_step.begin(), this_step.end());
  for (TensorId g : step.accumulates) AddUnique(&step.reads, g);
  for (TensorId g : lt->param_grads) AddUnique(&step.writes, g);
  step.workspace_bytes = decl.backward_workspace;
  return step;
}

}  // namespace

const char* TensorKindName(TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kAux:
      return "saved";
    case TensorKind::kActivationGrad:
      return "activation gradient";
    case TensorKind::kParam:
      return "parameter";
    case TensorKind::kParamGrad:
      return "parameter gradient";
    case TensorKind::kOptimizerState:
      return "optimizer state";
  }
  return "?";
}

bool IsTransient(TensorKind kind) {
  return kind == TensorKind::kActivation || kind == TensorKind::kAux ||
         kind == TensorKind::kActivationGrad;
}

bool SharesOutputGradient(const LayerTensors& lt, size_t input) {
  const TensorId g = lt.input_grads[input];
  return g != kNoTensor &&
         std::find(lt.output_grads.begin(), lt.output_grads.end(), g) != lt.output_grads.end();
}

TensorId Schedule::AddTensor(TensorInfo info) {
  info.bytes = static_cast<size_t>(info.shape.numel()) * DTypeSize(info.dtype);
  tensors.push_back(std::move(info));
  return static_cast<TensorId>(tensors.size() - 1);
}

Schedule BuildSchedule(const std::vector<LayerDecl>& layers, const std::vector<int>& route) {
  Schedule s;
  const int n = static_cast<int>(route.size());
  s.route = route;
  s.layers.resize(layers.size());
  s.forward_step.assign(layers.size(), -1);
  s.backward_step.assign(layers.size(), -1);
  CreateLayerTensors(layers, route, &s);
  CreateGradientTensors(layers, route, &s);
  for (int i = 0; i < n; ++i) {
    int id = route[i];
    Step step = ForwardStep(layers[id], s.layers[id]);
    step.index = i;
    step.layer = id;
    s.forward_step[id] = i;
    s.steps.push_back(std::move(step));
  }
  std::set<TensorId> written;
  for (int i = 0; i < n; ++i) {
    int id = route[n - 1 - i];
    Step step = BackwardStep(layers[id], &s.layers[id], &written);
    step.index = n + i;
    step.layer = id;
    s.backward_step[id] = n + i;
    s.steps.push_back(std::move(step));
  }
  for (int id = 0; id < static_cast<int>(layers.size()); ++id) {
    const LayerTensors& lt = s.layers[id];
    for (size_t p = 0; p < lt.params.size(); ++p) {
      if (lt.param_grads[p] != kNoTensor)
        s.parameters.push_back({lt.params[p], lt.param_grads[p], {}, id});
    }
  }
  return s;
}

std::string Schedule::ToString(const std::vector<std::string>& layer_names) const {
  std::ostringstream out;
  auto list = [&](const char* label, const std::vector<TensorId>& ids) {
    if (ids.empty()) return;
    out << " " << label << "{";
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << tensors[ids[i]].name;
    out << "}";
  };
  for (const Step& step : steps) {
    out << step.index + 1 << " " << (step.pass == Pass::kForward ? "F " : "B ")
        << layer_names[step.layer];
    if (!step.active) out << " (nothing to do)";
    list("reads", step.reads);
    list("writes", step.writes);
    list("saved", step.saved);
    list("accumulates", step.accumulates);
    out << "\n";
  }
  return out.str();
}

}  // namespace spill
