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

int64_t TrainableElements(const Schedule& schedule) {
  int64_t total = 0;
  for (const ParameterSlot& parameter : schedule.parameters) {
    total += schedule.tensors[parameter.param].shape.numel();
  }
  return total;
}

Piece RangeOf(int64_t total, int rank, int ranks) {
  return {total * rank / ranks, total * (rank + 1) / ranks};
}

Piece PieceOf(int64_t offset, int64_t numel, int64_t total, int rank, int ranks) {
  const Piece range = RangeOf(total, rank, ranks);
  const int64_t begin = std::clamp(range.begin - offset, int64_t{0}, numel);
  const int64_t end = std::clamp(range.end - offset, int64_t{0}, numel);
  return {begin, std::max(begin, end)};
}

int Solver::states() const { return config_.type == "adam" ? 2 : (config_.momentum > 0 ? 1 : 0); }

std::string Solver::StateName(const Net& net, size_t slot, int k) const {
  const char* names[] = {config_.type == "adam" ? ".adam_m" : ".momentum", ".adam_v"};
  return net.schedule().tensors[slots_[slot].param].name + names[k];
}

void Solver::AddState(Net& net, StateShard shard) {
  slots_.clear();
  shard_ = shard;
  Schedule& schedule = net.mutable_schedule();
  const int64_t total = TrainableElements(schedule);
  int64_t offset = 0;
  for (ParameterSlot& parameter : schedule.parameters) {
    const int layer = parameter.layer;
    const LayerTensors& lt = schedule.layers[layer];
    const size_t p =
        std::find(lt.params.begin(), lt.params.end(), parameter.param) - lt.params.begin();
    Slot slot{parameter.param, parameter.grad, net.decl(layer).params[p].decay_mult, {}};
    const TensorInfo param = schedule.tensors[parameter.param];
    slot.numel = param.shape.numel();
    slot.offset = offset;
    slot.piece = PieceOf(offset, slot.numel, total, shard.rank, shard.ranks);
    offset += slot.numel;
    parameter.state.clear();
    parameter.master = kNoTensor;
    parameter.master_begin = 0;
    slots_.push_back(slot);
    // A rank holds no state for a parameter outside its range.
    if (slot.piece.empty()) continue;
    const Shape shape = shard.sharded() ? Shape(slot.piece.size(), 1, 1, 1) : param.shape;
    if (shard.shards_params()) {
      parameter.master =
          schedule.AddTensor({param.name + ".piece", TensorKind::kParam, shape, 0, layer});
      parameter.master_begin = slot.piece.begin;
    }
    for (int k = 0; k < states(); ++k) {
      slots_.back().state.push_back(schedule.AddTensor(
          {StateName(net, slots_.size() - 1, k), TensorKind::kOptimizerState, shape, 0, layer}));
    }
    parameter.state = slots_.back().state;
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
  std::unordered_map<TensorId, std::pair<Piece, float>> pieces;  // param -> (piece, decay)
  for (const Slot& slot : slots_) {
    pieces[slot.param] = {slot.piece, static_cast<float>(config_.weight_decay * slot.decay_mult)};
  }
  const SolverConfig c = config_;
  const int64_t t = steps_;
  Device* dev = &device;
  store.BeginUpdate([=](const ParameterSlot& slot, float* w, const float* g,
                        const std::vector<float*>& state, bool host) {
    const auto& [piece, decay] = pieces.at(slot.param);
    if (piece.empty()) return;  // another rank's: its update arrives by all-gather
    SolverKernels& kernels = host ? SolverKernelsFor(DeviceType::kCpu) : *on_device;
    const int64_t n = piece.size(), at = piece.begin;
    // A sharded parameter's `w` is this rank's piece alone.
    float* piece_w = slot.master != kNoTensor ? w : w + at;
    if (c.type == "adam") {
      kernels.Adam(*dev, n, piece_w, g + at, state[0], state[1], static_cast<float>(lr),
                   static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                   static_cast<float>(c.epsilon), decay, t);
    } else {
      kernels.Sgd(*dev, n, piece_w, g + at, state.empty() ? nullptr : state[0],
                  static_cast<float>(lr), static_cast<float>(c.momentum), decay, c.nesterov);
    }
  });
}

Status Solver::FinishStep(TensorStore& store) { return store.FinishUpdate(); }

StatusOr<bool> Solver::UnscaleGradients(const Net& net, TensorStore& store, Device& device,
                                        float factor) const {
  SolverKernels& kernels = SolverKernelsFor(device.type());
  bool finite = true;
  std::vector<float> host;
  for (const Slot& slot : slots_) {
    // Every gradient is unscaled even after an overflow: the next
    // iteration overwrites them all the same.
    if (store.OnDevice(slot.grad)) {
      finite = kernels.Unscale(device, slot.numel, store.Data(slot.grad), factor) && finite;
      continue;
    }
    // A gradient waiting in host memory for its update there (memory.params:
    // host): unscaled by the same arithmetic, the CPU kernels', in place.
    host.resize(static_cast<size_t>(slot.numel));
    SPILL_RETURN_IF_ERROR(store.ReadTensor(slot.grad, host.data()));
    finite = SolverKernelsFor(DeviceType::kCpu).Unscale(device, slot.numel, host.data(), factor) &&
             finite;
    SPILL_RETURN_IF_ERROR(store.WriteTensor(slot.grad, host.data()));
  }
  return finite;
}

Status Solver::Update(const Net& net, TensorStore& store, Device& device, double lr) {
  BeginStep(net, store, device, lr);
  return FinishStep(store);
}

}  // namespace spill
