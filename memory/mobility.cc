#include "memory/mobility.h"

#include <string>

namespace spill {
namespace {

// Algorithm 3's reclaimed layers: small outputs, not worth offloading.
bool Reclaimed(const LayerSummary& layer) { return layer.is_loss || layer.traits.small_outputs; }

// Layers whose feature maps make up most of the memory (Dymem Fig. 8).
bool FeatureMaps(const LayerSummary& layer) { return layer.traits.feature_maps; }

// Per tensor, in one pass: how many of its steps read it (a backward step's
// reads include what it saved and the gradients it adds into), the first of
// them, and the last step that writes it.
struct Uses {
  int consumers = 0;
  int first_consumer = -1;
  int last_write = -1;
};

std::vector<Uses> UsesIn(const Schedule& schedule, Pass pass) {
  const int n = schedule.num_layers();
  const int begin = pass == Pass::kForward ? 0 : n, end = pass == Pass::kForward ? n : 2 * n;
  std::vector<Uses> uses(schedule.tensors.size());
  for (int s = begin; s < end; ++s) {
    const Step& step = schedule.steps[s];
    for (TensorId t : step.reads) {  // listed once per step
      if (uses[t].consumers++ == 0) uses[t].first_consumer = s;
    }
    for (TensorId t : step.writes) uses[t].last_write = s;
  }
  return uses;
}

// A forward tensor (an output or what a layer saved for its backward).
bool ForwardTensor(TensorKind kind) {
  return kind == TensorKind::kActivation || kind == TensorKind::kAux;
}

Mobility Classify(const NetworkView& view, TensorId id, Pass pass, const Uses& uses,
                  size_t min_offload_bytes) {
  const Schedule& schedule = *view.schedule;
  const TensorInfo& info = schedule.tensors[id];
  if (!IsTransient(info.kind)) return Mobility::kPersistent;
  // A gradient belongs to the layer that produced its activation.
  if (Reclaimed(view.layer(info.layer)) || info.bytes < min_offload_bytes) {
    return Mobility::kReclaimed;
  }
  // Allocated in backward, a forward tensor was prefetched or rebuilt for its
  // backward readers and goes after the last of them. Prefetches arrive in the
  // order of use and leave in that order (first in, first out): on the high
  // end's stack each one that arrives while the top is taken is stranded when
  // the blocks above it leave, while among the movables best fit reuses the
  // holes they leave.
  if (pass == Pass::kBackward && ForwardTensor(info.kind) && uses.consumers > 0) {
    return Mobility::kMovable;
  }
  if (uses.consumers != 1) return Mobility::kTemporary;  // a fork, or waits for backward
  const int consumer = uses.first_consumer;
  const bool join = schedule.layers[schedule.steps[consumer].layer].inputs.size() >= 2;
  if (uses.last_write >= 0 && join && consumer != uses.last_write + 1) return Mobility::kTemporary;
  return Mobility::kMovable;
}

// Forward tensors that some backward step saved.
std::vector<bool> NeededByBackward(const Schedule& schedule) {
  std::vector<bool> needed(schedule.tensors.size(), false);
  for (int s = schedule.num_layers(); s < 2 * schedule.num_layers(); ++s) {
    for (TensorId t : schedule.steps[s].saved) needed[t] = true;
  }
  return needed;
}

}  // namespace

const char* MobilityName(Mobility mobility) {
  switch (mobility) {
    case Mobility::kPersistent:
      return "persistent";
    case Mobility::kMovable:
      return "movable";
    case Mobility::kTemporary:
      return "temporary";
    case Mobility::kReclaimed:
      return "reclaimed";
  }
  return "?";
}

const SettingSpec& MinOffloadSetting() {
  static const SettingSpec* spec =
      new SettingSpec{"min_offload",
                      SettingKind::kBytes,
                      "1MiB",
                      "offload no tensor smaller than this, nor place it by mobility",
                      0,
                      0};
  return *spec;
}

MobilityClasses ClassifyMobility(const NetworkView& view, size_t min_offload_bytes) {
  const size_t count = view.schedule->tensors.size();
  MobilityClasses classes;
  classes.forward.resize(count);
  classes.backward.resize(count);
  const std::vector<Uses> forward = UsesIn(*view.schedule, Pass::kForward);
  const std::vector<Uses> backward = UsesIn(*view.schedule, Pass::kBackward);
  for (TensorId id = 0; id < static_cast<TensorId>(count); ++id) {
    classes.forward[id] = Classify(view, id, Pass::kForward, forward[id], min_offload_bytes);
    classes.backward[id] = Classify(view, id, Pass::kBackward, backward[id], min_offload_bytes);
  }
  return classes;
}

std::vector<bool> DymemOffloadSet(const NetworkView& view, size_t min_offload_bytes) {
  const Schedule& schedule = *view.schedule;
  std::vector<bool> set = NeededByBackward(schedule);
  std::vector<int> first_reader(schedule.tensors.size(), -1);  // layer
  for (int s = schedule.num_layers() - 1; s >= 0; --s) {
    for (TensorId t : schedule.steps[s].reads) first_reader[t] = schedule.steps[s].layer;
  }
  for (TensorId t = 0; t < static_cast<TensorId>(set.size()); ++t) {
    if (!set[t]) continue;
    const TensorInfo& info = schedule.tensors[t];
    const LayerSummary& producer = view.layer(info.layer);
    const bool heavy =
        FeatureMaps(producer) || (first_reader[t] >= 0 && FeatureMaps(view.layer(first_reader[t])));
    set[t] = (info.kind == TensorKind::kActivation || info.kind == TensorKind::kAux) &&
             info.bytes >= min_offload_bytes && !Reclaimed(producer) && heavy;
  }
  return set;
}

std::vector<bool> ConvInputOffloadSet(const NetworkView& view, size_t min_offload_bytes) {
  const Schedule& schedule = *view.schedule;
  const std::vector<bool> needed = NeededByBackward(schedule);
  std::vector<bool> set(schedule.tensors.size(), false);
  for (int s = 0; s < schedule.num_layers(); ++s) {
    const Step& step = schedule.steps[s];
    if (!view.layer(step.layer).traits.convolution) continue;
    for (TensorId t : schedule.layers[step.layer].inputs) {
      set[t] = needed[t] && schedule.tensors[t].bytes >= min_offload_bytes;
    }
  }
  return set;
}

}  // namespace spill
