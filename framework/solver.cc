#include "framework/solver.h"

#include <map>

namespace spill {
namespace {

std::map<DeviceType, SolverKernels*>& KernelRegistry() {
  static auto* registry = new std::map<DeviceType, SolverKernels*>();
  return *registry;
}

}  // namespace

bool RegisterSolverKernels(DeviceType device, SolverKernels* kernels) {
  KernelRegistry()[device] = kernels;
  return true;
}

SolverKernels& SolverKernelsFor(DeviceType device) {
  auto it = KernelRegistry().find(device);
  SPILL_CHECK(it != KernelRegistry().end()) << "no solver kernels for " << DeviceTypeName(device);
  return *it->second;
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
  for (int id = 0; id < net.num_layers(); ++id) {
    const LayerTensors lt = schedule.layers[id];
    for (size_t p = 0; p < lt.params.size(); ++p) {
      if (lt.param_grads[p] == kNoTensor) continue;
      Slot slot{lt.params[p], lt.param_grads[p], net.decl(id).params[p].decay_mult, {}};
      const TensorInfo param = schedule.tensors[lt.params[p]];
      for (int k = 0; k < states; ++k) {
        slot.state.push_back(schedule.AddTensor(
            {param.name + names[k], TensorKind::kOptimizerState, param.shape, 0, id}));
      }
      slots_.push_back(slot);
    }
  }
}

void Solver::ResetState(const Net& net, TensorStore& store, Device& device) const {
  for (const Slot& slot : slots_) {
    for (TensorId t : slot.state) {
      device.MemsetAsync(store.Data(t), 0, net.schedule().tensors[t].bytes, device.compute_queue());
    }
  }
  device.compute_queue().Synchronize();
}

void Solver::Update(const Net& net, TensorStore& store, Device& device, double lr) {
  ++steps_;
  SolverKernels& kernels = SolverKernelsFor(device.type());
  const Schedule& schedule = net.schedule();
  for (const Slot& slot : slots_) {
    const int64_t n = schedule.tensors[slot.param].shape.numel();
    float* w = store.Data(slot.param);
    const float* g = store.Data(slot.grad);
    const float decay = static_cast<float>(config_.weight_decay * slot.decay_mult);
    if (config_.type == "adam") {
      kernels.Adam(device, n, w, g, store.Data(slot.state[0]), store.Data(slot.state[1]),
                   static_cast<float>(lr), static_cast<float>(config_.beta1),
                   static_cast<float>(config_.beta2), static_cast<float>(config_.epsilon), decay,
                   steps_);
    } else {
      kernels.Sgd(device, n, w, g, slot.state.empty() ? nullptr : store.Data(slot.state[0]),
                  static_cast<float>(lr), static_cast<float>(config_.momentum), decay,
                  config_.nesterov);
    }
  }
}

}  // namespace spill
