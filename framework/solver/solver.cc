#include "framework/solver/solver.h"

#include <algorithm>
#include <unordered_map>

#include "framework/base/registry.h"

namespace spill {
namespace {

// By device type name.
Registry<SolverKernels*>& KernelRegistry() {
  static auto* registry = new Registry<SolverKernels*>("device's solver kernels", "devices");
  return *registry;
}

}  // namespace

bool RegisterSolverKernels(DeviceType device, SolverKernels* kernels) {
  return KernelRegistry().Add(DeviceTypeName(device), kernels);
}

SolverKernels& SolverKernelsFor(DeviceType device) {
  SolverKernels* const* kernels = KernelRegistry().Find(DeviceTypeName(device));
  SPILL_CHECK(kernels != nullptr) << "no solver kernels for " << DeviceTypeName(device);
  return **kernels;
}

StatusOr<std::unique_ptr<Solver>> Solver::Create(const SolverConfig& config) {
  if (config.type != "sgd" && config.type != "adam") {
    return InvalidArgument("unknown solver '" + config.type + "'; expected sgd or adam");
  }
  if (config.momentum < 0 || config.momentum >= 1) {
    return InvalidArgument("solver momentum must be in [0, 1)");
  }
  if (config.nesterov && config.momentum == 0) {
    return InvalidArgument("Nesterov momentum needs a momentum above 0");
  }
  if (config.weight_decay < 0) return InvalidArgument("weight decay must not be negative");
  return std::unique_ptr<Solver>(new Solver(config));
}

void Solver::AddState(Net& net) {
  slots_.clear();
  Schedule& schedule = net.mutable_schedule();
  const int states = config_.type == "adam" ? 2 : (config_.momentum > 0 ? 1 : 0);
  const char* names[] = {config_.type == "adam" ? ".adam_m" : ".momentum", ".adam_v"};
  for (ParameterSlot& parameter : schedule.parameters) {
    const int layer = parameter.layer;
    const LayerTensors& lt = schedule.layers[layer];
    const size_t p =
        std::find(lt.params.begin(), lt.params.end(), parameter.param) - lt.params.begin();
    Slot slot{parameter.param, parameter.grad, net.decl(layer).params[p].decay_mult, {}};
    const TensorInfo param = schedule.tensors[parameter.param];
    parameter.state.clear();
    for (int k = 0; k < states; ++k) {
      slot.state.push_back(schedule.AddTensor(
          {param.name + names[k], TensorKind::kOptimizerState, param.shape, 0, layer}));
    }
    parameter.state = slot.state;
    slots_.push_back(slot);
  }
}

Status Solver::ResetState(const Net& net, TensorStore& store) const {
  for (const Slot& slot : slots_) {
    for (TensorId t : slot.state) {
      std::vector<float> zeros(net.schedule().tensors[t].shape.numel(), 0.0f);
      SPILL_RETURN_IF_ERROR(store.WriteTensor(t, zeros.data()));
    }
  }
  return Status::Ok();
}

void Solver::BeginStep(const Net& net, TensorStore& store, Device& device, double lr) {
  ++steps_;
  // The arithmetic is the same on the device and in host memory: the CPU
  // device's kernels on host pointers.
  SolverKernels* on_device = &SolverKernelsFor(device.type());
  std::unordered_map<TensorId, std::pair<int64_t, float>> sizes;  // param -> (n, decay)
  for (const Slot& slot : slots_) {
    sizes[slot.param] = {net.schedule().tensors[slot.param].shape.numel(),
                         static_cast<float>(config_.weight_decay * slot.decay_mult)};
  }
  const SolverConfig c = config_;
  const int64_t t = steps_;
  Device* dev = &device;
  store.BeginUpdate([=](const ParameterSlot& slot, float* w, const float* g,
                        const std::vector<float*>& state, bool host) {
    const auto& [n, decay] = sizes.at(slot.param);
    SolverKernels& kernels = host ? SolverKernelsFor(DeviceType::kCpu) : *on_device;
    if (c.type == "adam") {
      kernels.Adam(*dev, n, w, g, state[0], state[1], static_cast<float>(lr),
                   static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                   static_cast<float>(c.epsilon), decay, t);
    } else {
      kernels.Sgd(*dev, n, w, g, state.empty() ? nullptr : state[0], static_cast<float>(lr),
                  static_cast<float>(c.momentum), decay, c.nesterov);
    }
  });
}

Status Solver::FinishStep(TensorStore& store) { return store.FinishUpdate(); }

Status Solver::Update(const Net& net, TensorStore& store, Device& device, double lr) {
  BeginStep(net, store, device, lr);
  return FinishStep(store);
}

}  // namespace spill
