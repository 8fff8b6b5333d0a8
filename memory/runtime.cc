#include "memory/runtime.h"

#include <algorithm>

#include "framework/logging.h"

namespace spill {

MemoryRuntime::MemoryRuntime(const Net& net, const MemoryOptions& options, Device* device)
    : net_(net),
      schedule_(net.schedule()),
      options_(options),
      device_(device),
      device_pool_(options.device_budget, options.fit),
      host_pool_(options.offload ? options.host_budget : 0, options.fit),
      cache_(net.schedule().tensors.size()),
      rebuild_refs_(net.schedule().tensors.size(), 0),
      holds_sources_(net.schedule().tensors.size(), false),
      deferred_(net.schedule().tensors.size(), false) {}

MemoryRuntime::~MemoryRuntime() {
  if (device_ != nullptr) {
    device_->copy_queue().Synchronize();
    device_->ReleaseDeviceRegion(device_base_);
    if (host_base_ != nullptr) device_->ReleaseHostRegion(host_base_);
  }
}

StatusOr<std::unique_ptr<MemoryRuntime>> MemoryRuntime::Create(const Net& net,
                                                               const MemoryOptions& options,
                                                               Device* device) {
  SPILL_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<MemoryRuntime> runtime(new MemoryRuntime(net, options, device));
  SPILL_RETURN_IF_ERROR(runtime->Reserve());
  runtime->PlanPolicies();
  SPILL_RETURN_IF_ERROR(runtime->AllocatePersistent());
  return runtime;
}

Status MemoryRuntime::Reserve() {
  if (device_ != nullptr) {
    SPILL_ASSIGN_OR_RETURN(device_base_, device_->ReserveDeviceRegion(device_pool_.capacity()));
    if (host_pool_.capacity() > 0) {
      SPILL_ASSIGN_OR_RETURN(host_base_, device_->ReserveHostRegion(host_pool_.capacity()));
    }
  }
  residency_ = std::make_unique<ResidencyManager>(schedule_, &device_pool_, &host_pool_, device_,
                                                  device_base_, host_base_);
  residency_->set_poison(options_.poison_freed);
  return Status::Ok();
}

void MemoryRuntime::PlanPolicies() {
  train_liveness_ = AnalyzeLiveness(schedule_, Phase::kTrain);
  eval_liveness_ = AnalyzeLiveness(schedule_, Phase::kEval);
  std::vector<LayerCost> costs;
  std::vector<bool> is_loss;
  for (int id = 0; id < net_.num_layers(); ++id) {
    costs.push_back(net_.layer(id).cost());
    is_loss.push_back(net_.decl(id).is_loss);
  }
  const bool lazy = options_.cache;
  recompute_ = PlanRecompute(schedule_, &train_liveness_, costs, is_loss,
                             options_.recompute_strategy, options_.recompute && !lazy);
  offload_ = PlanOffload(schedule_, train_liveness_, costs,
                         options_.recompute ? recompute_.droppable : std::vector<bool>(),
                         options_.prefetch_ahead, options_.offload && !lazy);
}

Status MemoryRuntime::AllocatePersistent() {
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    if (IsTransient(schedule_.tensors[id].kind)) continue;
    SPILL_RETURN_IF_ERROR(AllocateTensor(id));
  }
  log_.persistent = current_.persistent = device_pool_.stats().total_in_use;
  run_peak_ = device_pool_.stats().total_peak;
  return Status::Ok();
}

Status MemoryRuntime::AllocateAllTransient() {
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    if (!IsTransient(schedule_.tensors[id].kind)) continue;
    if (residency_->state(id) != Residency::kUnallocated) continue;
    SPILL_RETURN_IF_ERROR(AllocateTensor(id));
  }
  return Status::Ok();
}

Status MemoryRuntime::Fail(const Status& status, const std::string& what, size_t bytes) {
  oom_.step = step_;
  oom_.what = what;
  oom_.requested = bytes;
  oom_.in_use = device_pool_.stats().total_in_use;
  oom_.live = LiveTransient();
  std::string where = "while allocating parameters and solver state";
  if (step_ >= 0) {
    const Step& s = schedule_.steps[step_];
    where = "at step " + std::to_string(step_ + 1) + " (" +
            (s.pass == Pass::kForward ? "forward " : "backward ") + net_.layer(s.layer).name() +
            ")";
  }
  std::vector<TensorId> largest = oom_.live;
  std::sort(largest.begin(), largest.end(), [&](TensorId a, TensorId b) {
    return schedule_.tensors[a].bytes > schedule_.tensors[b].bytes;
  });
  std::string live;
  for (size_t i = 0; i < largest.size() && i < 6; ++i) {
    live += (i ? ", " : "") + schedule_.tensors[largest[i]].name + " " +
            FormatBytes(static_cast<double>(schedule_.tensors[largest[i]].bytes));
  }
  return Status(status.code(),
                where + ": cannot allocate " + what + " (" + status.message() + "); " +
                    FormatBytes(static_cast<double>(oom_.in_use)) + " of the " +
                    FormatBytes(static_cast<double>(device_pool_.capacity())) + " budget in use, " +
                    std::to_string(oom_.live.size()) + " transient tensors live" +
                    (live.empty() ? "" : " (largest: " + live + ")"));
}

Status MemoryRuntime::BeginIteration(Phase phase) {
  phase_ = phase;
  liveness_ = phase == Phase::kTrain ? &train_liveness_ : &eval_liveness_;
  eager_ = phase == Phase::kTrain && !options_.cache && (options_.offload || options_.recompute);
  current_.Clear();
  current_.mode = options_.mode;
  current_.persistent = log_.persistent;
  if (!options_.liveness && !all_allocated_) {
    step_ = 0;
    SPILL_RETURN_IF_ERROR(AllocateAllTransient());
    all_allocated_ = true;
  }
  return Status::Ok();
}

Status MemoryRuntime::PrepareStep(const Step& step, StepRunner& runner) {
  step_ = step.index;
  device_pool_.ResetPeaks();
  step_to_host_ = residency_->counters().to_host_bytes;
  step_to_device_ = residency_->counters().to_device_bytes;
  step_compacted_ = residency_->counters().compacted_bytes;
  step_recomputed_ = recomputations_;
  for (TensorId id : step.reads) {
    SPILL_RETURN_IF_ERROR(EnsureOnDevice(id, runner));
    Pin(id);
  }
  for (TensorId id : step.writes) {
    if (!residency_->on_device(id)) SPILL_RETURN_IF_ERROR(AllocateTensor(id));
    Pin(id);
  }
  std::string choice;
  if (step.active) SPILL_RETURN_IF_ERROR(ChooseWorkspace(step.layer, step.pass, &choice));
  // Upcoming tensors come back into whatever room the step leaves; the copies
  // overlap this step's computation.
  if (phase_ == Phase::kTrain && options_.offload) Prefetch(offload_.prefetch_at[step.index]);
  Record(step);
  current_.steps.back().algorithm = choice;
  return Status::Ok();
}

void MemoryRuntime::Release(TensorId id) {
  Unreference(id);
  residency_->Release(id);
  cache_.Remove(id);
  deferred_[id] = false;
}

void MemoryRuntime::Drop(TensorId id) {
  residency_->Drop(id);
  cache_.Remove(id);
  if (holds_sources_[id]) return;
  holds_sources_[id] = true;
  for (TensorId x : RebuildSources(schedule_, id)) ++rebuild_refs_[x];
}

// `id` will not be rebuilt again (it is kept, or dead): its sources may go.
void MemoryRuntime::Unreference(TensorId id) {
  if (!holds_sources_[id]) return;
  holds_sources_[id] = false;
  for (TensorId x : RebuildSources(schedule_, id)) {
    if (--rebuild_refs_[x] == 0 && deferred_[x]) Release(x);
  }
}

// Offloads and drops scheduled after `step` (offload and recompute without
// the cache), and memory-centric segments' tensors after backward steps.
void MemoryRuntime::RunEagerPolicies(const Step& step) {
  const int s = step.index;
  for (TensorId id : offload_.begin_after[s]) {
    if (residency_->state(id) != Residency::kDevice) continue;
    if (!residency_->BeginOffload(id).ok()) {
      SPILL_LOG_DEBUG(kMemory) << "host pool full: '" << schedule_.tensors[id].name << "' stays";
    }
  }
  for (TensorId id : offload_.finish_after[s]) {
    if (residency_->state(id) != Residency::kOffloading) continue;
    residency_->FinishOffload(id);
    cache_.Remove(id);
  }
  for (TensorId id : recompute_.drop_after[s]) {
    if (residency_->state(id) == Residency::kDevice) Drop(id);
  }
  if (!options_.recompute || step.pass != Pass::kBackward) return;
  // Memory-centric segments keep nothing between backward steps.
  for (TensorId id : step.reads) {
    const int seg = recompute_.segment[id];
    if (seg >= 0 && !recompute_.keep[seg] && residency_->state(id) == Residency::kDevice) Drop(id);
  }
}

void MemoryRuntime::FinishStep(const Step& step) {
  FreeWorkspace();
  algorithms_.clear();
  UnpinAll();
  for (TensorId id : step.writes) residency_->MarkWritten(id);
  current_.steps.back().peak =
      std::max(current_.steps.back().peak, device_pool_.stats().total_peak);
  run_peak_ = std::max(run_peak_, current_.steps.back().peak);
  if (eager_) RunEagerPolicies(step);
  if (options_.liveness) {
    for (TensorId id : liveness_->dies_after[step.index]) {
      // A dropped tensor still needs its sources: they go when it does.
      if (rebuild_refs_[id] > 0) {
        deferred_[id] = true;
      } else {
        Release(id);
      }
    }
  }
  StepRecord& record = current_.steps.back();
  record.to_host = residency_->counters().to_host_bytes - step_to_host_;
  record.to_device = residency_->counters().to_device_bytes - step_to_device_;
  record.recomputed = static_cast<int>(recomputations_ - step_recomputed_);
  record.compacted = residency_->counters().compacted_bytes - step_compacted_;
}

Status MemoryRuntime::EndIteration() {
  step_ = -1;
  if (options_.liveness) {
    for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
      if (IsTransient(schedule_.tensors[id].kind) &&
          residency_->state(id) != Residency::kUnallocated) {
        return Internal("tensor '" + schedule_.tensors[id].name + "' outlived its iteration (" +
                        ResidencyName(residency_->state(id)) + ")");
      }
    }
  }
  current_.Finish();
  // The next iteration repeats this one; it lists what is live at the peak.
  if (capture_step_ == current_.peak_step && current_.peak_step >= 0) {
    current_.peak_live = current_.steps[current_.peak_step].live;
  }
  capture_step_ = current_.peak_step;
  log_ = current_;
  return Status::Ok();
}

float* MemoryRuntime::Data(TensorId id) { return residency_->data(id); }

std::vector<TensorId> MemoryRuntime::LiveTransient() const {
  std::vector<TensorId> live;
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    if (IsTransient(schedule_.tensors[id].kind) && residency_->on_device(id)) live.push_back(id);
  }
  return live;
}

void MemoryRuntime::Record(const Step& step) {
  const PoolStats& stats = device_pool_.stats();
  StepRecord record;
  record.step = step.index;
  record.pass = step.pass;
  record.layer = step.layer;
  record.in_use = stats.in_use;
  record.total = stats.total_in_use;
  record.peak = stats.total_peak;
  record.workspace = workspace_.bytes;
  record.live_tensors = residency_->resident_transient();
  if (options_.record_live || step.index == capture_step_) record.live = LiveTransient();
  current_.steps.push_back(std::move(record));
}

}  // namespace spill
