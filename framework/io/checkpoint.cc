#include "framework/io/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "framework/base/units.h"
#include "framework/io/npz.h"

namespace spill {
namespace {

constexpr size_t kExtrasShown = 3;  // unexpected arrays named in one message

std::vector<int64_t> Dims(const Shape& s) { return {s.n(), s.c(), s.h(), s.w()}; }

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "a scalar" : text;
}

// Wherever the tensor lives: device or host memory. Only finite values are
// saved.
StatusOr<NpyArray> Fetch(TensorId id, const Net& net, TensorStore& store) {
  const TensorInfo& info = net.schedule().tensors[id];
  std::vector<float> host(info.shape.numel());
  SPILL_RETURN_IF_ERROR(store.ReadTensor(id, host.data()));
  SPILL_RETURN_IF_ERROR(
      CheckParameterValues(host.data(), info.shape.numel(), false, "'" + info.name + "'"));
  return NpyArray::Floats(Dims(info.shape), host.data());
}

// Whether parameter `id` of the network is declared non-negative (a variance).
bool NonNegative(const Net& net, TensorId id) {
  const int layer = net.schedule().tensors[id].layer;
  const std::vector<TensorId>& params = net.schedule().layers[layer].params;
  for (size_t p = 0; p < params.size(); ++p) {
    if (params[p] == id) return net.decl(layer).params[p].non_negative;
  }
  return false;
}

// The values of a float32 array about to be copied into tensor `id`.
Status CheckArray(const NpyArray& array, const Net& net, TensorId id, const std::string& what) {
  return CheckParameterValues(array.floats(), static_cast<int64_t>(array.data.size() / 4),
                              NonNegative(net, id), what);
}

// One array to copy into one tensor, found and checked before any copy.
struct Restore {
  TensorId id;
  const NpyArray* array;
};

class CheckpointCheck {
 public:
  CheckpointCheck(const NpzArchive& archive, const Net& net, const std::string& path)
      : archive_(archive), net_(net), path_(path) {}

  // Finds `key` for tensor `id`: float32 of exactly the tensor's shape. It
  // is restored into `into` (`id` unless given; none with kNoTensor). Solver
  // state (`state`) may be negative whatever its parameter declares.
  Status Tensor(const std::string& key, TensorId id, TensorId into, bool state) {
    expected_.insert(key);
    const TensorInfo& info = net_.schedule().tensors[id];
    auto it = archive_.find(key);
    if (it == archive_.end()) {
      return InvalidArgument("checkpoint '" + path_ + "' has no '" + key +
                             "' (was it saved from network '" + net_.name() + "'?)");
    }
    const NpyArray& array = it->second;
    if (array.dtype != "<f4" || array.shape != Dims(info.shape)) {
      return InvalidArgument("checkpoint '" + path_ + "': '" + key + "' is " +
                             ShapeText(array.shape) + " " + array.dtype + ", the network expects " +
                             info.shape.ToString() + " float32 (<f4)");
    }
    const std::string what = "checkpoint '" + path_ + "': '" + key + "'";
    SPILL_RETURN_IF_ERROR(
        state ? CheckParameterValues(array.floats(), info.shape.numel(), false, what)
              : CheckArray(array, net_, id, what));
    if (into != kNoTensor) restores_.push_back({into, &array});
    return Status::Ok();
  }
  Status Tensor(const std::string& key, TensorId id) { return Tensor(key, id, id, false); }

  // The checked array under `key` (after Tensor found it).
  const NpyArray& Array(const std::string& key) const { return archive_.at(key); }

  // A non-negative int64 counter of shape (1,).
  Status Counter(const std::string& key, int64_t* value) {
    expected_.insert(key);
    auto it = archive_.find(key);
    if (it == archive_.end()) {
      return InvalidArgument("checkpoint '" + path_ + "' has no '" + key +
                             "' (the training position); it is incomplete");
    }
    const NpyArray& array = it->second;
    if (array.dtype != "<i8" || array.shape != std::vector<int64_t>{1}) {
      return InvalidArgument("checkpoint '" + path_ + "': '" + key + "' must be one non-negative " +
                             "int64 (<i8, shape (1,)); it is " + ShapeText(array.shape) + " " +
                             array.dtype);
    }
    if (array.int64() < 0) {
      return InvalidArgument("checkpoint '" + path_ + "': '" + key + "' must not be negative; " +
                             "it is " + std::to_string(array.int64()));
    }
    *value = array.int64();
    return Status::Ok();
  }

  // Arrays under params/ (and state/ when `with_state`) that were not expected.
  Status NoExtras(bool with_state) const {
    std::vector<std::string> extra;
    for (const auto& [key, array] : archive_) {
      const bool checked =
          key.rfind("params/", 0) == 0 || (with_state && key.rfind("state/", 0) == 0);
      if (checked && !expected_.count(key)) extra.push_back(key);
    }
    if (extra.empty()) return Status::Ok();
    std::string names;
    for (size_t i = 0; i < extra.size() && i < kExtrasShown; ++i) {
      names += (i ? ", '" : "'") + extra[i] + "'";
    }
    if (extra.size() > kExtrasShown)
      names += " and " + std::to_string(extra.size() - kExtrasShown) + " more";
    return InvalidArgument("checkpoint '" + path_ + "' holds " + names + ", which network '" +
                           net_.name() + (with_state ? "' and its solver do" : "' does") +
                           " not have (was it saved from another network or solver?)");
  }

  const std::vector<Restore>& restores() const { return restores_; }
  const NpzArchive& archive() const { return archive_; }

 private:
  const NpzArchive& archive_;
  const Net& net_;
  const std::string& path_;
  std::set<std::string> expected_;
  std::vector<Restore> restores_;
};

// Every parameter of the network: present, float32, of its exact shape,
// with values it can hold.
Status CheckParams(CheckpointCheck& check, const Net& net) {
  const Schedule& schedule = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (TensorId p : schedule.layers[id].params) {
      SPILL_RETURN_IF_ERROR(check.Tensor("params/" + schedule.tensors[p].name, p));
    }
  }
  return Status::Ok();
}

// The precision the archive was trained in; checkpoints from before
// precisions were recorded are float32.
// fp16's loss scale: a positive power of two, written as text.
Status ReadLossScale(const NpzArchive& archive, const std::string& path,
                     TrainingPosition* position) {
  auto it = archive.find("meta/loss_scale");
  if (it == archive.end()) {
    return InvalidArgument("checkpoint '" + path +
                           "' has no 'meta/loss_scale' (an fp16 run's loss scale); it is "
                           "incomplete");
  }
  auto scale = ParseFiniteDouble(it->second.text());
  int exponent = 0;
  if (!scale.ok() || *scale <= 0 || std::frexp(*scale, &exponent) != 0.5) {
    return InvalidArgument("checkpoint '" + path + "': 'meta/loss_scale' must be a power of " +
                           "two; it is '" + it->second.text() + "'");
  }
  position->loss_scale = *scale;
  return Status::Ok();
}

StatusOr<Precision> SavedPrecision(const NpzArchive& archive, const std::string& path) {
  auto it = archive.find("meta/precision");
  if (it == archive.end()) return Precision::kFp32;
  return ParsePrecision(it->second.text(), "checkpoint '" + path + "': meta/precision");
}

// A run resumes in the precision it was saved in: its parameters are the
// float32 master weights either way, but the activations it trained on were
// rounded differently, so continuing in another precision is a different
// run (start one from these weights with --init).
Status CheckSavedPrecision(const NpzArchive& archive, const Net& net, const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(const Precision precision, SavedPrecision(archive, path));
  if (precision == net.precision()) return Status::Ok();
  const std::string saved = PrecisionName(precision);
  const std::string running = PrecisionName(net.precision());
  return InvalidArgument("checkpoint '" + path + "' was trained in " + saved +
                         " (meta/precision); this run is " + running +
                         ": resume it with run.precision (or --precision) " + saved +
                         ", or start a new run from its weights with --init");
}

// Every check of the header's comment; fills `position` and `check`.
Status CheckAll(CheckpointCheck& check, const Net& net, const Solver* solver,
                const std::string& path, TrainingPosition* position) {
  SPILL_RETURN_IF_ERROR(CheckParams(check, net));
  SPILL_RETURN_IF_ERROR(check.Counter("meta/step", &position->step));
  SPILL_RETURN_IF_ERROR(check.Counter("meta/epoch", &position->epoch));
  SPILL_RETURN_IF_ERROR(check.Counter("meta/batch", &position->batch));
  if (solver != nullptr) {
    // Whole state arrays, of their parameter's shape; a sharded solver's
    // pieces are restored by LoadCheckpoint.
    const bool sharded = solver->shard().sharded();
    for (size_t i = 0; i < solver->slots().size(); ++i) {
      const Solver::Slot& slot = solver->slots()[i];
      for (int k = 0; k < solver->states(); ++k) {
        const std::string key = "state/" + solver->StateName(net, i, k);
        SPILL_RETURN_IF_ERROR(
            check.Tensor(key, slot.param, sharded ? kNoTensor : slot.state[k], true));
      }
    }
    SPILL_RETURN_IF_ERROR(CheckSavedPrecision(check.archive(), net, path));
    SPILL_RETURN_IF_ERROR(check.Counter("meta/solver_steps", &position->solver_steps));
    if (net.precision() == Precision::kFp16) {
      SPILL_RETURN_IF_ERROR(ReadLossScale(check.archive(), path, position));
      SPILL_RETURN_IF_ERROR(
          check.Counter("meta/loss_scale_clean_steps", &position->loss_scale_clean_steps));
    }
    if (position->solver_steps > position->step) {
      return InvalidArgument("checkpoint '" + path + "': meta/solver_steps (" +
                             std::to_string(position->solver_steps) + ") exceeds meta/step (" +
                             std::to_string(position->step) + ")");
    }
  }
  return check.NoExtras(solver != nullptr);
}

// Sorts one network parameter into `load` or `result->fresh`.
void MatchParameter(const NpzArchive& archive, const Net& net, TensorId id,
                    std::vector<Restore>* load, PartialLoad* result) {
  const TensorInfo& info = net.schedule().tensors[id];
  auto it = archive.find("params/" + info.name);
  if (it == archive.end()) {
    result->fresh.push_back(info.name + " (not in checkpoint)");
  } else if (it->second.dtype != "<f4" || it->second.shape != Dims(info.shape)) {
    result->fresh.push_back(info.name + " (checkpoint " + ShapeText(it->second.shape) + " " +
                            it->second.dtype + ", network " + ShapeText(Dims(info.shape)) + ")");
  } else {
    load->push_back({id, &it->second});
    result->loaded.push_back(info.name);
  }
}

}  // namespace

StatusOr<Precision> CheckpointPrecision(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(NpzArchive archive, ReadNpz(path));
  return SavedPrecision(archive, path);
}

Status CheckParameterArrays(const NpzArchive& archive, const std::string& path, const Net& net) {
  CheckpointCheck check(archive, net, path);
  SPILL_RETURN_IF_ERROR(CheckParams(check, net));
  return check.NoExtras(/*with_state=*/false);
}

Status CheckParameterValues(const float* values, int64_t count, bool non_negative,
                            const std::string& what) {
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (std::isfinite(v) && (!non_negative || v >= 0)) continue;
    char text[32];
    std::snprintf(text, sizeof(text), "%g", static_cast<double>(v));
    return InvalidArgument(what + " holds " + text + " at index " + std::to_string(i) + "; " +
                           (std::isfinite(v) ? "a variance cannot be negative"
                                             : "every value must be finite (a diverged run?)"));
  }
  return Status::Ok();
}

StatusOr<NpzArchive> CheckpointArchive(const Net& net, TensorStore& store, const Solver* solver,
                                       const TrainingPosition& position,
                                       const std::string& config_text, const WholeState* whole,
                                       const WholeParameters* params) {
  NpzArchive archive;
  const Schedule& schedule = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (TensorId p : schedule.layers[id].params) {
      const TensorInfo& info = schedule.tensors[p];
      NpyArray& to = archive["params/" + info.name];
      if (params == nullptr || params->count(p) == 0) {
        SPILL_ASSIGN_OR_RETURN(to, Fetch(p, net, store));
        continue;
      }
      const std::vector<float>& values = params->at(p);
      SPILL_RETURN_IF_ERROR(
          CheckParameterValues(values.data(), info.shape.numel(), false, "'" + info.name + "'"));
      to = NpyArray::Floats(Dims(info.shape), values.data());
    }
  }
  if (solver != nullptr && solver->shard().sharded() && whole == nullptr) {
    return Internal("a checkpoint of sharded solver state needs the whole state gathered");
  }
  if (solver != nullptr) {
    for (size_t i = 0; i < solver->slots().size(); ++i) {
      const Solver::Slot& slot = solver->slots()[i];
      for (int k = 0; k < solver->states(); ++k) {
        const std::string key = "state/" + solver->StateName(net, i, k);
        if (whole == nullptr) {
          SPILL_ASSIGN_OR_RETURN(archive[key], Fetch(slot.state[k], net, store));
          continue;
        }
        const std::vector<float>& values = (*whole)[i][k];
        SPILL_RETURN_IF_ERROR(
            CheckParameterValues(values.data(), slot.numel, false, "'" + key.substr(6) + "'"));
        archive[key] = NpyArray::Floats(Dims(schedule.tensors[slot.param].shape), values.data());
      }
    }
  }
  archive["meta/step"] = NpyArray::Int64(position.step);
  archive["meta/epoch"] = NpyArray::Int64(position.epoch);
  archive["meta/batch"] = NpyArray::Int64(position.batch);
  archive["meta/solver_steps"] = NpyArray::Int64(position.solver_steps);
  archive["meta/config"] = NpyArray::Text(config_text);
  archive["meta/network"] = NpyArray::Text(net.name());
  archive["meta/precision"] = NpyArray::Text(PrecisionName(net.precision()));
  if (net.precision() == Precision::kFp16) {
    char scale[32];
    std::snprintf(scale, sizeof(scale), "%.17g", position.loss_scale);
    archive["meta/loss_scale"] = NpyArray::Text(scale);
    archive["meta/loss_scale_clean_steps"] = NpyArray::Int64(position.loss_scale_clean_steps);
  }
  return archive;
}

Status SaveCheckpoint(const std::string& path, const Net& net, TensorStore& store, Device& device,
                      const Solver* solver, const TrainingPosition& position,
                      const std::string& config_text) {
  SPILL_ASSIGN_OR_RETURN(NpzArchive archive,
                         CheckpointArchive(net, store, solver, position, config_text, nullptr));
  return WriteNpzAtomically(path, archive);
}

StatusOr<TrainingPosition> LoadCheckpoint(const std::string& path, const Net& net,
                                          TensorStore& store, Device& device, Solver* solver,
                                          WholeState* whole) {
  SPILL_ASSIGN_OR_RETURN(NpzArchive archive, ReadNpz(path));
  CheckpointCheck check(archive, net, path);
  TrainingPosition position;
  SPILL_RETURN_IF_ERROR(CheckAll(check, net, solver, path, &position));
  // Nothing was copied before this point.
  for (const Restore& r : check.restores()) {
    SPILL_RETURN_IF_ERROR(store.WriteTensor(r.id, r.array->floats()));
  }
  if (solver != nullptr && solver->shard().sharded()) {
    // This rank's pieces into the store; the whole arrays for the others.
    if (whole != nullptr) whole->assign(solver->slots().size(), {});
    for (size_t i = 0; i < solver->slots().size(); ++i) {
      const Solver::Slot& slot = solver->slots()[i];
      for (int k = 0; k < solver->states(); ++k) {
        const float* values = check.Array("state/" + solver->StateName(net, i, k)).floats();
        if (!slot.piece.empty()) {
          SPILL_RETURN_IF_ERROR(store.WriteTensor(slot.state[k], values + slot.piece.begin));
        }
        if (whole != nullptr) (*whole)[i].emplace_back(values, values + slot.numel);
      }
    }
  }
  if (solver != nullptr) solver->set_steps(position.solver_steps);
  return position;
}

StatusOr<PartialLoad> LoadMatchingParameters(const std::string& path, const Net& net,
                                             TensorStore& store) {
  SPILL_ASSIGN_OR_RETURN(NpzArchive archive, ReadNpz(path));
  return LoadMatchingArrays(archive, path, net, store);
}

StatusOr<PartialLoad> LoadMatchingArrays(const NpzArchive& archive, const std::string& path,
                                         const Net& net, TensorStore& store) {
  const Schedule& schedule = net.schedule();
  PartialLoad result;
  std::vector<Restore> load;
  std::set<std::string> names;
  for (int id = 0; id < net.num_layers(); ++id) {
    for (TensorId p : schedule.layers[id].params) {
      MatchParameter(archive, net, p, &load, &result);
      names.insert("params/" + schedule.tensors[p].name);
    }
  }
  for (const auto& [key, array] : archive) {
    if (key.rfind("params/", 0) == 0 && !names.count(key))
      result.unused.push_back(key.substr(sizeof("params/") - 1));
  }
  if (load.empty()) {
    return InvalidArgument("checkpoint '" + path + "' has no parameter that matches network '" +
                           net.name() + "' by name and shape (was it saved from another network?)");
  }
  for (const Restore& r : load) {
    SPILL_RETURN_IF_ERROR(CheckArray(
        *r.array, net, r.id, "'" + path + "': 'params/" + schedule.tensors[r.id].name + "'"));
  }
  for (const Restore& r : load) SPILL_RETURN_IF_ERROR(store.WriteTensor(r.id, r.array->floats()));
  return result;
}

}  // namespace spill
