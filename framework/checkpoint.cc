#include "framework/checkpoint.h"

#include "framework/npz.h"

namespace spill {
namespace {

std::vector<int64_t> Dims(const Shape& s) { return {s.n(), s.c(), s.h(), s.w()}; }

// Wherever the tensor lives: device or host memory.
StatusOr<NpyArray> Fetch(TensorId id, const Net& net, TensorStore& store) {
  const TensorInfo& info = net.schedule().tensors[id];
  std::vector<float> host(info.shape.numel());
  SPILL_RETURN_IF_ERROR(store.ReadTensor(id, host.data()));
  return NpyArray::Floats(Dims(info.shape), host.data());
}

Status Restore(const NpzArchive& archive, const std::string& key, TensorId id, const Net& net,
               TensorStore& store, Device& device, const std::string& path) {
  const TensorInfo& info = net.schedule().tensors[id];
  auto it = archive.find(key);
  if (it == archive.end()) {
    return InvalidArgument("checkpoint '" + path + "' has no '" + key +
                           "' (was it saved from network '" + net.name() + "'?)");
  }
  const NpyArray& array = it->second;
  if (array.dtype != "<f4" || array.numel() != info.shape.numel()) {
    std::string shape;
    for (int64_t d : array.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    return InvalidArgument("checkpoint '" + path + "': '" + key + "' is " + shape + " " +
                           array.dtype + ", the network expects " + info.shape.ToString() +
                           " float32");
  }
  return store.WriteTensor(id, array.floats());
}

int64_t Meta(const NpzArchive& archive, const std::string& key) {
  auto it = archive.find(key);
  return it == archive.end() ? 0 : it->second.int64();
}

}  // namespace

Status SaveCheckpoint(const std::string& path, const Net& net, TensorStore& store, Device& device,
                      const Solver* solver, const TrainingPosition& position,
                      const std::string& config_text) {
  NpzArchive archive;
  const Schedule& schedule = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (TensorId p : schedule.layers[id].params) {
      SPILL_ASSIGN_OR_RETURN(archive["params/" + schedule.tensors[p].name], Fetch(p, net, store));
    }
  }
  if (solver != nullptr) {
    for (const auto& slot : solver->slots()) {
      for (TensorId t : slot.state) {
        SPILL_ASSIGN_OR_RETURN(archive["state/" + schedule.tensors[t].name], Fetch(t, net, store));
      }
    }
  }
  archive["meta/step"] = NpyArray::Int64(position.step);
  archive["meta/epoch"] = NpyArray::Int64(position.epoch);
  archive["meta/batch"] = NpyArray::Int64(position.batch);
  archive["meta/solver_steps"] = NpyArray::Int64(position.solver_steps);
  archive["meta/config"] = NpyArray::Text(config_text);
  archive["meta/network"] = NpyArray::Text(net.name());
  return WriteNpzAtomically(path, archive);
}

StatusOr<TrainingPosition> LoadCheckpoint(const std::string& path, const Net& net,
                                          TensorStore& store, Device& device, Solver* solver) {
  SPILL_ASSIGN_OR_RETURN(NpzArchive archive, ReadNpz(path));
  const Schedule& schedule = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (TensorId p : schedule.layers[id].params) {
      SPILL_RETURN_IF_ERROR(
          Restore(archive, "params/" + schedule.tensors[p].name, p, net, store, device, path));
    }
  }
  TrainingPosition position;
  position.step = Meta(archive, "meta/step");
  position.epoch = Meta(archive, "meta/epoch");
  position.batch = Meta(archive, "meta/batch");
  position.solver_steps = Meta(archive, "meta/solver_steps");
  if (solver != nullptr) {
    for (const auto& slot : solver->slots()) {
      for (TensorId t : slot.state) {
        SPILL_RETURN_IF_ERROR(
            Restore(archive, "state/" + schedule.tensors[t].name, t, net, store, device, path));
      }
    }
    solver->set_steps(position.solver_steps);
  }
  return position;
}

}  // namespace spill
