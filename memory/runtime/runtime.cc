#include "memory/runtime/runtime.h"

#include <algorithm>

#include "framework/base/logging.h"
#include "memory/phase_plans.h"

namespace spill {

namespace {

// Whether a run under `options` and `given` plans puts anything in host
// memory: offloads, parameters kept there, or streamed steps.
bool UsesHostMemory(const MemoryOptions& options, const GivenPlans* given) {
  if (options.offload || options.params.kind != ParamPlacement::Kind::kDevice ||
      options.batch_chunk != kBatchChunkOff) {
    return true;
  }
  if (given == nullptr) return false;
  for (const TransferPlan* plan : {&given->plans.train, &given->plans.eval}) {
    for (int s = 0; s < static_cast<int>(plan->streamed.size()); ++s) {
      if (plan->StreamedAt(s) != nullptr) return true;
    }
  }
  return false;
}

}  // namespace

MemoryRuntime::MemoryRuntime(const NetworkView& view, const MemoryOptions& options,
                             std::unique_ptr<Backing> backing, bool host_memory)
    : view_(view),
      schedule_(*view.schedule),
      options_(options),
      host_pool_(host_memory ? options.host_budget : 0, FitPolicy::kFirstFit),
      backing_(std::move(backing)),
      cache_(view.schedule->tensors.size()),
      params_(*view.schedule, options),
      releases_(*view.schedule),
      workspace_(view.schedule->num_layers()) {}

MemoryRuntime::~MemoryRuntime() = default;

StatusOr<std::unique_ptr<MemoryRuntime>> MemoryRuntime::Create(const NetworkView& view,
                                                               const MemoryOptions& options,
                                                               Device* device,
                                                               const GivenPlans* given) {
  SPILL_RETURN_IF_ERROR(options.Validate());
  const AllocatorInfo* allocator = FindAllocator(options.allocator);
  if (device != nullptr && allocator->plan_only) {
    return InvalidArgument("memory: the '" + options.allocator +
                           "' allocator only plans; it cannot place tensors on a device");
  }
  if (device != nullptr && given != nullptr && given->overdraft) {
    return InvalidArgument("memory: only a plan may place requests past the budget");
  }
  // The one place where running and planning differ: what the decisions
  // do to memory (memory/backing.h).
  std::unique_ptr<MemoryRuntime> runtime(new MemoryRuntime(
      view, options, device != nullptr ? MakeDeviceBacking(*device) : MakePlanningBacking(),
      UsesHostMemory(options, given)));
  runtime->overdraft_.set_allowed(given != nullptr && given->overdraft);
  SPILL_RETURN_IF_ERROR(runtime->Reserve());
  SPILL_RETURN_IF_ERROR(runtime->PlanPolicies(given));
  SPILL_RETURN_IF_ERROR(runtime->AllocatePersistent());
  return runtime;
}

Status MemoryRuntime::Reserve() {
  AllocatorContext context;
  context.capacity = options_.device_budget;
  context.view = &view_;
  context.settings = options_.settings;
  // Profile-guided allocators plan an iteration with an accounting-only
  // allocator first; the profiler runs this runtime's own code without a device.
  // It reads the runtime's current view and plans: after a Reshape, the new
  // sizes' (the plans are made once the allocator exists).
  context.profiler = [this](Phase phase, size_t budget,
                            ProfilePlans plans) -> StatusOr<AllocationProfile> {
    if (plans == ProfilePlans::kForBudget) {
      return ProfileAllocations(view_, options_, phase, budget);
    }
    // An allocator being created, before the plans are made, cannot ask for them.
    if (plans_.train.num_steps() == 0) {
      return Internal(
          "the " + options_.allocator +
          " allocator asked for a profile of the runtime's plans before they were made");
    }
    return ProfileAllocations(view_, options_, phase, budget, &plans_);
  };
  SPILL_ASSIGN_OR_RETURN(allocator_, CreateAllocator(options_.allocator, context));
  if (options_.record_events) allocator_->set_event_log(&log_events_);
  allocator_->set_check_every_event(options_.check_allocator);
  SPILL_RETURN_IF_ERROR(backing_->Reserve(*allocator_, host_pool_.capacity(), options_.host_tier));
  residency_ =
      std::make_unique<ResidencyManager>(schedule_, allocator_.get(), &host_pool_, backing_.get(),
                                         options_.record_events ? &log_events_ : nullptr);
  residency_->set_poison(options_.poison_freed);
  const std::string budget = FormatBytes(static_cast<double>(host_pool_.capacity()));
  residency_->set_host_tier_name(options_.host_tier == "ram"
                                     ? "host memory (memory.host_budget " + budget + " in RAM)"
                                     : "host memory on disk (memory.host_budget " + budget +
                                           " in " + options_.host_tier.substr(5) + ")");
  return Status::Ok();
}

Status MemoryRuntime::PlanPolicies(const GivenPlans* given) {
  if (given == nullptr) {
    SPILL_ASSIGN_OR_RETURN(plans_, MakeTransferPlans(view_, options_));
    plans_by_size_[Sizes()] = plans_;
  } else {
    plans_ = given->plans;
    if (!given->complete) {
      AddParameterTransfers(schedule_, options_, &plans_);
      SPILL_RETURN_IF_ERROR(CompletePlans(schedule_, options_, &plans_));
    }
    given_plans_ = true;
    given_sizes_ = Sizes();
  }
  SPILL_ASSIGN_OR_RETURN(eviction_, CreateEviction(options_.eviction, schedule_));
  return Status::Ok();
}

std::vector<size_t> MemoryRuntime::Sizes() const {
  std::vector<size_t> sizes;
  sizes.reserve(schedule_.tensors.size());
  for (const TensorInfo& info : schedule_.tensors) sizes.push_back(info.bytes);
  return sizes;
}

Status MemoryRuntime::Reshape(const NetworkView& view) {
  SPILL_CHECK(view.schedule == view_.schedule) << "Reshape: another network's view";
  SPILL_CHECK_EQ(step_, -1) << "Reshape during an iteration";
  const std::vector<size_t> sizes = Sizes();
  if (given_plans_ && sizes != given_sizes_) {
    return InvalidArgument(
        "memory: the plan given to the run was made for other tensor sizes; a run whose "
        "sequence lengths vary needs a plan per length (or a memory mode that plans)");
  }
  // Kept tensors are in blocks of their old sizes: they go, and the next
  // iteration places them anew.
  if (all_transient_ == AllTransient::kAllocated) {
    for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
      if (IsTransient(schedule_.tensors[id].kind) &&
          residency_->state(id) != Residency::kUnallocated) {
        Release(id);
      }
    }
    all_transient_ = AllTransient::kNotYet;
  }
  view_ = view;
  if (given_plans_) return Status::Ok();
  auto known = plans_by_size_.find(sizes);
  if (known != plans_by_size_.end()) {
    plans_ = known->second;
  } else {
    SPILL_ASSIGN_OR_RETURN(plans_, MakeTransferPlans(view_, options_));
    plans_by_size_.emplace(sizes, plans_);
    ++replans_;
  }
  SPILL_ASSIGN_OR_RETURN(eviction_, CreateEviction(options_.eviction, schedule_));
  return Status::Ok();
}

Status MemoryRuntime::AllocatePersistent() {
  for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
    const TensorInfo& info = schedule_.tensors[id];
    if (IsTransient(info.kind)) continue;
    if (params_.gathered(id)) continue;  // gathered for each step that reads it
    if (params_.home_host(id)) {
      Status status = residency_->AllocateOnHost(id);
      if (!status.ok()) {
        return Fail(status, "'" + info.name + "' in host memory", info.bytes);
      }
      continue;
    }
    // A gradient updated on the device is made when backward writes it and
    // used up by the update.
    // So is one that leaves the device after backward.
    if (info.kind == TensorKind::kParamGrad &&
        (options_.params.HomeOnHost(info.bytes) || options_.gradients_leave)) {
      continue;
    }
    SPILL_RETURN_IF_ERROR(AllocateTensor(id));
  }
  records_.SetPersistent(allocator_->stats().total_in_use, allocator_->stats().total_peak);
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
  OutOfMemoryInfo& oom = records_.oom();
  oom.step = step_;
  oom.what = what;
  oom.requested = bytes;
  oom.in_use = allocator_->stats().total_in_use;
  oom.live = LiveTransient();
  std::string where = all_transient_ == AllTransient::kAllocating
                          ? "while allocating every tensor of the iteration (no liveness)"
                          : "while allocating parameters and solver state";
  if (step_ >= 0) {
    const Step& s = schedule_.steps[step_];
    where = "at step " + std::to_string(step_ + 1) + " (" +
            (s.pass == Pass::kForward ? "forward " : "backward ") + view_.layer(s.layer).name + ")";
  }
  std::vector<TensorId> largest = oom.live;
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
                    FormatBytes(static_cast<double>(oom.in_use)) + " of the " +
                    FormatBytes(static_cast<double>(allocator_->capacity())) + " budget in use, " +
                    std::to_string(oom.live.size()) + " transient tensors live" +
                    (live.empty() ? "" : " (largest: " + live + ")"));
}

Status MemoryRuntime::Overdraw(const std::function<Status()>& allocate) {
  allocator_->set_overdraft(true);
  Status status = allocate();
  allocator_->set_overdraft(false);
  return status;
}

Status MemoryRuntime::BeginIteration(Phase phase) {
  phase_ = phase;
  records_.BeginIteration(options_.mode);
  log_events_.Clear();
  log_events_.set_step(-1);
  releases_.ClearLazyOffloads();
  workspace_.BeginIteration();
  SPILL_RETURN_IF_ERROR(params_.failure());
  // Without liveness every tensor is allocated once, before the first
  // iteration's steps, and kept: like the persistent tensors, outside the
  // iteration the allocator sees.
  if (!options_.liveness && all_transient_ == AllTransient::kNotYet) {
    all_transient_ = AllTransient::kAllocating;
    Status status = AllocateAllTransient();
    all_transient_ = status.ok() ? AllTransient::kAllocated : AllTransient::kNotYet;
    SPILL_RETURN_IF_ERROR(status);
  }
  SPILL_RETURN_IF_ERROR(allocator_->BeginIteration(phase));
  // The log opens with what is already placed, so that it alone tells where
  // every block is (the memory page draws the address space from it).
  if (options_.record_events) allocator_->RecordResident();
  return Status::Ok();
}

Status MemoryRuntime::PrepareStep(const Step& step, StepRunner& runner) {
  step_ = step.index;
  residency_->set_step(step_);
  log_events_.set_step(step_);
  allocator_->ResetPeaks();
  records_.BeginStep(residency_->counters());
  SPILL_RETURN_IF_ERROR(params_.failure());
  std::string choice;
  if (plan().StreamedAt(step.index) != nullptr) {
    SPILL_RETURN_IF_ERROR(CheckPlannedStream(step));
    SPILL_RETURN_IF_ERROR(PrepareStreamed(step, runner, &choice));
  } else if (MustStream(step)) {
    SPILL_RETURN_IF_ERROR(PrepareStreamed(step, runner, &choice));
  } else {
    Status whole;
    {
      Overdraft::Scope hold(&overdraft_, CanStream(step));
      whole = PrepareOnDevice(step, runner, &choice);
    }
    if (!whole.ok()) {
      if (whole.code() != StatusCode::kOutOfMemory || !CanStream(step)) return whole;
      // Whatever the attempt placed stays where it is; the staged tensors
      // move to host memory.
      UnpinAll();
      FreeWorkspace();
      choice.clear();
      SPILL_RETURN_IF_ERROR(PrepareStreamed(step, runner, &choice));
    }
  }
  // Upcoming tensors come back into whatever room the step leaves; the copies
  // overlap this step's computation.
  SPILL_RETURN_IF_ERROR(RunActions(plan().before[step.index], &runner));
  Record(step);
  records_.step().algorithm = choice;
  return Status::Ok();
}

Status MemoryRuntime::PrepareOnDevice(const Step& step, StepRunner& runner, std::string* choice) {
  for (TensorId id : step.reads) {
    SPILL_RETURN_IF_ERROR(EnsureOnDevice(id, runner));
    Pin(id);
  }
  for (TensorId id : allocator_->PlacementOrder(step)) SPILL_RETURN_IF_ERROR(PrepareWrite(id));
  if (step.active) {
    SPILL_RETURN_IF_ERROR(
        ChooseWorkspace(step.layer, step.pass, view_.StepImages(step.layer, step.pass), choice));
  }
  return Status::Ok();
}

Status MemoryRuntime::PrepareWrite(TensorId id) {
  if (residency_->state(id) == Residency::kOffloading) residency_->CancelOffload(id);
  if (residency_->state(id) == Residency::kHost) SPILL_RETURN_IF_ERROR(AllocateForWrite(id));
  if (!residency_->on_device(id)) SPILL_RETURN_IF_ERROR(AllocateTensor(id));
  Pin(id);
  return Status::Ok();
}

// A tensor's life is over: everything goes, unless a dropped tensor still
// needs it to be rebuilt (it then goes when the last such tensor does).
void MemoryRuntime::Retire(TensorId id) {
  if (!releases_.Defer(id)) Release(id);
}

void MemoryRuntime::Release(TensorId id) {
  Unreference(id);
  FreeReleased(id);
}

void MemoryRuntime::FreeReleased(TensorId id) {
  residency_->Release(id);
  cache_.Remove(id);
  releases_.Freed(id);
}

void MemoryRuntime::Drop(TensorId id) {
  residency_->Drop(id);
  cache_.Remove(id);
  releases_.HoldSources(id);
}

// `id` will not be rebuilt again (it is kept, or dead): its sources may go.
void MemoryRuntime::Unreference(TensorId id) {
  releases_.Unreference(id, [this](TensorId source) { FreeReleased(source); });
}

// Applies a plan's actions in order; each acts only on a tensor in the state
// it names. `runner` is set for the actions before a step (rebuilds).
Status MemoryRuntime::RunActions(const std::vector<TransferAction>& actions, StepRunner* runner) {
  bool held_back = false;  // an earlier prefetch of the list did not fit
  for (const TransferAction& a : actions) {
    if (a.op == TransferOp::kPrefetch) {
      if (held_back) continue;
      held_back = !Prefetch(a.tensor) && plan().prefetch_in_order;
    } else if (a.op == TransferOp::kGather) {
      BeginGather(a.tensor);
    } else if (a.op == TransferOp::kRebuild) {
      if (runner != nullptr && residency_->state(a.tensor) == Residency::kDropped) {
        SPILL_RETURN_IF_ERROR(Rebuild(a.tensor, *runner));
      }
    } else {
      RunAfterStep(a);
    }
  }
  return Status::Ok();
}

void MemoryRuntime::RunAfterStep(const TransferAction& a) {
  const TensorId id = a.tensor;
  const Residency state = residency_->state(id);
  switch (a.op) {
    case TransferOp::kBeginOffload:
      if (state != Residency::kDevice) return;
      if (!residency_->BeginOffload(id).ok()) {
        SPILL_LOG_DEBUG(kMemory) << "host pool full: '" << schedule_.tensors[id].name << "' stays";
      }
      return;
    case TransferOp::kFinishOffload:
      if (state != Residency::kOffloading) return;
      residency_->FinishOffload(id);
      cache_.Remove(id);
      return;
    case TransferOp::kFinishOffloadLazily:
      if (state == Residency::kOffloading) releases_.AddLazyOffload(id);
      return;
    case TransferOp::kCancelOffload:
      if (state == Residency::kOffloading) residency_->CancelOffload(id);
      return;
    case TransferOp::kDrop:
      // A tensor whose sources are gone stays: it could not be rebuilt. (A
      // plan drops a tensor after its forward use and releases its sources
      // then; one that was in host memory at that moment - a streamed
      // step's output - was not dropped, and a later drop of it would be.)
      if (state == Residency::kDevice && SourcesKept(id)) Drop(id);
      return;
    case TransferOp::kRelease:
      Retire(id);
      return;
    case TransferOp::kUpdate:
      ApplyUpdate(params_.slot_of(id));
      return;
    case TransferOp::kReduceScatter:
      if (options_.record_events) {
        log_events_.Add(
            RankShare(MemoryEventType::kReduceScatter, id, schedule_.tensors[id].bytes));
      }
      return;
    case TransferOp::kPrefetch:
    case TransferOp::kRebuild:
    case TransferOp::kGather:
      return;  // before a step only
  }
}

void MemoryRuntime::FinishStep(const Step& step) {
  if (options_.record_events) {
    MemoryEvent e;
    e.type = step.active ? MemoryEventType::kCompute : MemoryEventType::kIdle;
    e.layer = step.layer;
    if (step.active) NoteSlices(&e);
    log_events_.Add(e);
  }
  FinishStreamed();
  FreeWorkspace();
  workspace_.set_algorithms({});
  UnpinAll();
  for (TensorId id : step.writes) residency_->MarkWritten(id);
  // A training forward updates a layer's non-trainable parameters (batch
  // norm's running statistics): their host copies are no longer current.
  if (phase_ == Phase::kTrain && step.pass == Pass::kForward) {
    const LayerTensors& lt = schedule_.layers[step.layer];
    for (size_t p = 0; p < lt.params.size(); ++p) {
      if (lt.param_grads[p] == kNoTensor) residency_->MarkWritten(lt.params[p]);
    }
  }
  records_.PeakOfStep(allocator_->stats().total_peak, allocator_->overshoot_peak());
  Status status = RunActions(plan().after[step.index], nullptr);
  SPILL_CHECK(status.ok()) << status.ToString();  // after a step: no rebuilds, nothing fails
  records_.FinishStep(residency_->counters());
}

Status MemoryRuntime::EndIteration() {
  SPILL_RETURN_IF_ERROR(FinishUnusedGathers());
  if (options_.record_events && options_.ranks > 1 && !options_.params_gathered &&
      phase_ == Phase::kTrain) {
    size_t bytes = 0;  // the averages or updated parameters come back whole
    for (const ParameterSlot& p : schedule_.parameters) bytes += schedule_.tensors[p.param].bytes;
    log_events_.Add(RankShare(MemoryEventType::kAllGather, kNoTensor, bytes));
  }
  step_ = -1;
  residency_->set_step(-1);
  log_events_.set_step(-1);
  if (options_.liveness) {
    for (TensorId id = 0; id < static_cast<TensorId>(schedule_.tensors.size()); ++id) {
      if (IsTransient(schedule_.tensors[id].kind) &&
          residency_->state(id) != Residency::kUnallocated) {
        return Internal("tensor '" + schedule_.tensors[id].name + "' outlived its iteration (" +
                        ResidencyName(residency_->state(id)) + ")");
      }
    }
  }
  allocator_->EndIteration();
  const DeviceAllocator::MappingCounts remapped = allocator_->TakeMappingWork();
  if (options_.record_events && (remapped.maps > 0 || remapped.unmaps > 0)) {
    MemoryEvent e;
    e.type = MemoryEventType::kRemap;
    e.maps = static_cast<int>(remapped.maps);
    e.unmaps = static_cast<int>(remapped.unmaps);
    e.fence = remapped.fence;
    log_events_.Add(e);
  }
  SPILL_RETURN_IF_ERROR(params_.failure());
  records_.EndIteration(log_events_.events(), options_.record_live);
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
  const PoolStats& stats = allocator_->stats();
  StepRecord record;
  record.step = step.index;
  record.pass = step.pass;
  record.layer = step.layer;
  record.in_use = stats.in_use;
  record.total = stats.total_in_use;
  record.peak = stats.total_peak;
  record.overshoot = allocator_->overshoot_peak();
  record.workspace = workspace_.workspace().bytes;
  record.live_tensors = residency_->resident_transient();
  record.host = host_pool_.stats().total_in_use;
  record.slice_images = staging_.images();
  if (record.slice_images > 0) record.stream_buffers = staging_.buffers();
  if (records_.CapturesLive(step.index, options_.record_live)) record.live = LiveTransient();
  records_.Add(std::move(record));
}

}  // namespace spill
