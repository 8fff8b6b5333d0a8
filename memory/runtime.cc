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
      host_pool_(options.offload || options.cache ? options.host_budget : 0, options.fit) {}

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
  if (options.device_budget < kPoolBlockBytes) {
    return InvalidArgument("device budget of " + std::to_string(options.device_budget) +
                           " bytes is below one pool block");
  }
  std::unique_ptr<MemoryRuntime> runtime(new MemoryRuntime(net, options, device));
  SPILL_RETURN_IF_ERROR(runtime->Reserve());
  runtime->train_liveness_ = AnalyzeLiveness(net.schedule(), Phase::kTrain);
  runtime->eval_liveness_ = AnalyzeLiveness(net.schedule(), Phase::kEval);
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

Status MemoryRuntime::AllocatePersistent() {
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    if (IsTransient(schedule_.tensors[id].kind)) continue;
    SPILL_RETURN_IF_ERROR(Allocate(id, -1));
  }
  log_.persistent = current_.persistent = device_pool_.stats().total_in_use;
  run_peak_ = device_pool_.stats().total_peak;
  return Status::Ok();
}

Status MemoryRuntime::AllocateAllTransient() {
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    if (!IsTransient(schedule_.tensors[id].kind)) continue;
    if (residency_->state(id) != Residency::kUnallocated) continue;
    SPILL_RETURN_IF_ERROR(Allocate(id, 0));
  }
  return Status::Ok();
}

Status MemoryRuntime::Fail(const Status& status, int step, const std::string& what, size_t bytes) {
  oom_.step = step;
  oom_.what = what;
  oom_.requested = bytes;
  oom_.in_use = device_pool_.stats().total_in_use;
  oom_.live = LiveTransient();
  std::string where = "while allocating parameters and solver state";
  if (step >= 0) {
    const Step& s = schedule_.steps[step];
    where = "at step " + std::to_string(step + 1) + " (" +
            (s.pass == Pass::kForward ? "forward " : "backward ") + net_.layer(s.layer).name() + ")";
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

Status MemoryRuntime::Allocate(TensorId id, int step) {
  Status status = residency_->Allocate(id);
  if (status.ok()) return status;
  return Fail(status, step, "'" + schedule_.tensors[id].name + "' (" +
                                FormatBytes(static_cast<double>(schedule_.tensors[id].bytes)) + ")",
              schedule_.tensors[id].bytes);
}

Status MemoryRuntime::AllocateWorkspace(const Step& step) {
  workspace_ = Workspace();
  if (step.workspace_bytes == 0) return Status::Ok();
  auto allocation = device_pool_.Allocate(step.workspace_bytes, MemoryCategory::kWorkspace);
  if (!allocation.ok()) {
    return Fail(allocation.status(), step.index,
                "workspace of " + FormatBytes(static_cast<double>(step.workspace_bytes)),
                step.workspace_bytes);
  }
  workspace_id_ = allocation->id;
  workspace_.bytes = step.workspace_bytes;
  workspace_.data = device_base_ == nullptr ? nullptr
                                            : static_cast<char*>(device_base_) + allocation->offset;
  return Status::Ok();
}

Status MemoryRuntime::BeginIteration(Phase phase) {
  phase_ = phase;
  liveness_ = phase == Phase::kTrain ? &train_liveness_ : &eval_liveness_;
  current_.Clear();
  current_.mode = options_.mode;
  current_.persistent = log_.persistent;
  if (!options_.liveness && !all_allocated_) {
    SPILL_RETURN_IF_ERROR(AllocateAllTransient());
    all_allocated_ = true;
  }
  return Status::Ok();
}

Status MemoryRuntime::PrepareStep(const Step& step, StepRunner& runner) {
  (void)runner;
  device_pool_.ResetPeaks();
  for (TensorId id : step.reads) {
    SPILL_CHECK(residency_->on_device(id))
        << "step " << step.index + 1 << " reads '" << schedule_.tensors[id].name << "', which is "
        << ResidencyName(residency_->state(id));
  }
  for (TensorId id : step.writes) {
    if (residency_->on_device(id)) continue;
    SPILL_RETURN_IF_ERROR(Allocate(id, step.index));
  }
  SPILL_RETURN_IF_ERROR(AllocateWorkspace(step));
  Record(step);
  return Status::Ok();
}

void MemoryRuntime::FinishStep(const Step& step) {
  if (workspace_id_ >= 0) {
    device_pool_.Free(workspace_id_);
    workspace_id_ = -1;
    workspace_ = Workspace();
  }
  for (TensorId id : step.writes) residency_->MarkWritten(id);
  current_.steps.back().peak = std::max(current_.steps.back().peak, device_pool_.stats().total_peak);
  run_peak_ = std::max(run_peak_, current_.steps.back().peak);
  if (!options_.liveness) return;
  for (TensorId id : liveness_->dies_after[step.index]) residency_->Release(id);
}

Status MemoryRuntime::EndIteration() {
  if (options_.liveness) {
    for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
      if (IsTransient(schedule_.tensors[id].kind) &&
          residency_->state(id) != Residency::kUnallocated) {
        return Internal("tensor '" + schedule_.tensors[id].name + "' outlived its iteration");
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
