// MemoryRuntime, second part: making a step's tensors resident - prefetching
// from host memory, rebuilding dropped tensors by recomputation, and
// allocating with eviction when the tensor cache is on.
//
// Invariant: a tensor pinned for the current step (or for a recomputation in
// progress) is never evicted, dropped or released until the pin is lifted.
#include <algorithm>

#include "framework/base/logging.h"
#include "memory/runtime/runtime.h"

namespace spill {

bool MemoryRuntime::Cached(TensorId id) const {
  return IsTransient(schedule_.tensors[id].kind) ||
         options_.params.kind == ParamPlacement::Kind::kCache;
}

void MemoryRuntime::Pin(TensorId id) {
  if (Cached(id)) cache_.Pin(id);
}

void MemoryRuntime::UnpinAll() { cache_.UnpinAll(); }

bool MemoryRuntime::Droppable(TensorId id) const {
  if (!options_.recompute || !recompute().droppable[id] || phase_ != Phase::kTrain) return false;
  return SourcesKept(id);
}

bool MemoryRuntime::SourcesKept(TensorId id) const {
  for (TensorId x : RebuildSources(schedule_, id)) {
    if (residency_->state(x) == Residency::kUnallocated) return false;  // already gone
  }
  return true;
}

bool MemoryRuntime::Evictable(TensorId id) const {
  if (cache_.locked(id)) return false;
  const Residency state = residency_->state(id);
  // A prefetch not yet needed gives its room back (its host copy stays).
  if (state == Residency::kPrefetching) return true;
  if (state != Residency::kDevice) return false;
  return Droppable(id) || options_.offload;
}

bool MemoryRuntime::MemoryCentric(TensorId id) const {
  if (phase_ != Phase::kTrain || !options_.recompute || plan().evict_on_demand) return false;
  const int seg = recompute().segment[id];
  return seg >= 0 && !recompute().keep[seg];
}

// Frees the evictable tensor the eviction rule picks: drops it when it can
// be recomputed, offloads it otherwise. False when nothing can be evicted.
bool MemoryRuntime::EvictOne() {
  if (!options_.cache) return false;
  std::vector<TensorId> refused;  // the host pool could not take these
  for (;;) {
    TensorId victim = eviction_->Victim(
        cache_,
        [&](TensorId id) {
          return Evictable(id) && std::find(refused.begin(), refused.end(), id) == refused.end();
        },
        step_);
    if (victim == kNoTensor) return false;
    if (residency_->state(victim) == Residency::kPrefetching) residency_->FinishPrefetch(victim);
    if (Droppable(victim)) {
      Drop(victim);
    } else {
      if (!residency_->BeginOffload(victim).ok()) {
        refused.push_back(victim);
        continue;
      }
      residency_->FinishOffload(victim);
    }
    cache_.Remove(victim);
    SPILL_LOG_DEBUG(kMemory) << "step " << step_ + 1 << ": evicted '"
                             << schedule_.tensors[victim].name << "' ("
                             << ResidencyName(residency_->state(victim)) << ")";
    return true;
  }
}

bool MemoryRuntime::FinishOldestLazyOffload() {
  for (TensorId id = releases_.TakeOldestLazyOffload(); id != kNoTensor;
       id = releases_.TakeOldestLazyOffload()) {
    if (residency_->state(id) != Residency::kOffloading) continue;  // already finished
    residency_->FinishOffload(id);
    cache_.Remove(id);
    return true;
  }
  return false;
}

// Room for `bytes`: gives back the oldest lazily released offload's block;
// otherwise closes the holes when enough memory is free in total (where the
// allocator can move blocks), otherwise evicts one tensor. False when
// nothing can help.
bool MemoryRuntime::MakeRoom(size_t bytes) {
  if (FinishOldestLazyOffload()) return true;
  const PoolStats& stats = allocator_->stats();
  if (options_.compact && allocator_->can_compact() && stats.free_bytes >= RoundToBlocks(bytes) &&
      stats.free_segments > 1) {
    residency_->Compact(bytes);
    if (allocator_->CanAllocate(bytes)) return true;
  }
  return EvictOne();
}

Status MemoryRuntime::AllocateTensor(TensorId id) {
  return AllocateWithRoom(id, [&] { return residency_->Allocate(id); });
}

Status MemoryRuntime::AllocateForWrite(TensorId id) {
  return AllocateWithRoom(id, [&] { return residency_->AllocateForWrite(id); });
}

// Retries `allocate` while evicting makes room; a failure names the tensor.
Status MemoryRuntime::AllocateWithRoom(TensorId id, const std::function<Status()>& allocate) {
  for (;;) {
    Status status = allocate();
    if (status.ok()) {
      if (Cached(id)) cache_.Touch(id);
      return status;
    }
    if (status.code() == StatusCode::kOutOfMemory && MakeRoom(schedule_.tensors[id].bytes)) {
      continue;
    }
    if (status.code() == StatusCode::kOutOfMemory && overdraft_.may()) {
      status = Overdraw(allocate);
      if (status.ok() && Cached(id)) cache_.Touch(id);
    }
    if (!status.ok()) {
      const TensorInfo& info = schedule_.tensors[id];
      return Fail(status,
                  "'" + info.name + "' (" + FormatBytes(static_cast<double>(info.bytes)) + ")",
                  info.bytes);
    }
    return status;
  }
}

Status MemoryRuntime::AllocateWorkspace(size_t bytes, const std::string& what) {
  workspace_.Clear();
  if (bytes == 0) return Status::Ok();
  AllocRequest request;
  request.bytes = bytes;
  request.category = MemoryCategory::kWorkspace;
  request.step = step_;
  StatusOr<Allocation> allocation = allocator_->Allocate(request);
  while (!allocation.ok() && MakeRoom(bytes)) allocation = allocator_->Allocate(request);
  if (!allocation.ok() && overdraft_.may()) {
    allocator_->set_overdraft(true);
    allocation = allocator_->Allocate(request);
    allocator_->set_overdraft(false);
  }
  if (!allocation.ok()) {
    return Fail(residency_->NoteRefusedOffloads(allocation).status(),
                what + " (" + FormatBytes(static_cast<double>(bytes)) + ")", bytes);
  }
  workspace_.Place(*allocation, bytes, *backing_);
  return Status::Ok();
}

std::vector<AlgorithmCandidate> MemoryRuntime::CandidatesFor(int layer, Pass pass, int op,
                                                             int64_t images) const {
  std::vector<AlgorithmCandidate> candidates =
      view_.algorithms->Candidates(layer, pass, op, images);
  const int64_t rest = view_.batch % images;
  if (rest == 0) return candidates;
  const std::vector<AlgorithmCandidate> last = view_.algorithms->Candidates(layer, pass, op, rest);
  for (size_t i = 0; i < candidates.size() && i < last.size(); ++i) {
    candidates[i].workspace = std::max(candidates[i].workspace, last[i].workspace);
  }
  return candidates;
}

namespace {

// The candidate a plan names for operation `op` of a step, checked against
// the step's `candidates` (-1: none, as SelectAlgorithm gives for none).
StatusOr<int> PlannedAlgorithm(const std::vector<int>& planned, int op, size_t candidates,
                               const std::string& step_name) {
  const int index = planned[op];
  if (index < -1 || index >= static_cast<int>(candidates)) {
    return InvalidArgument("plan: " + step_name + " operation " + std::to_string(op) + " has " +
                           std::to_string(candidates) +
                           " candidate algorithms; the plan names number " + std::to_string(index));
  }
  return index;
}

}  // namespace

Status MemoryRuntime::ChooseWorkspace(int layer, Pass pass, int64_t images, std::string* choice) {
  const std::string what = "the workspace of " + view_.layer(layer).name;
  workspace_.set_algorithms({});
  const int ops = view_.algorithms ? view_.algorithms->NumOps(layer, pass) : 0;
  if (ops == 0) {
    const Step& step =
        pass == Pass::kForward ? schedule_.forward(layer) : schedule_.backward(layer);
    return AllocateWorkspace(view_.FixedWorkspace(step, images), what);
  }
  // Functional tensors are in place: the workspace gets what remains, in one
  // contiguous segment - unless the plan names the algorithms.
  const std::vector<int>* planned = plan().AlgorithmsAt(
      pass == Pass::kForward ? schedule_.forward_step[layer] : schedule_.backward_step[layer]);
  const std::string step_name =
      view_.layer(layer).name + (pass == Pass::kForward ? " forward" : " backward");
  if (planned != nullptr && static_cast<int>(planned->size()) != ops) {
    return InvalidArgument("plan: " + step_name + " has " + std::to_string(ops) +
                           " operations; the plan gives algorithms for " +
                           std::to_string(planned->size()));
  }
  const size_t free = allocator_->LargestFree();
  size_t bytes = 0;
  std::vector<int> chosen;
  for (int op = 0; op < ops; ++op) {
    std::vector<AlgorithmCandidate> candidates = CandidatesFor(layer, pass, op, images);
    AlgorithmSelection s;
    if (planned != nullptr) {
      SPILL_ASSIGN_OR_RETURN(s.index, PlannedAlgorithm(*planned, op, candidates.size(), step_name));
    } else {
      s = SelectAlgorithm(candidates, free, options_.workspace);
    }
    chosen.push_back(s.index);
    if (s.index < 0) continue;
    bytes = std::max(bytes, candidates[s.index].workspace);
    if (choice) *choice += (choice->empty() ? "" : " ") + candidates[s.index].name;
  }
  workspace_.set_algorithms(chosen);
  SPILL_RETURN_IF_ERROR(AllocateWorkspace(bytes, what));
  if (pass == Pass::kForward) workspace_.set_forward(layer, chosen);
  return Status::Ok();
}

Status MemoryRuntime::ReuseForwardWorkspace(int layer, int64_t images) {
  const std::vector<int> chosen = workspace_.forward(layer);
  if (chosen.empty()) return ChooseWorkspace(layer, Pass::kForward, images, nullptr);
  size_t bytes = 0;
  for (int op = 0; op < static_cast<int>(chosen.size()); ++op) {
    if (chosen[op] < 0) continue;
    const auto candidates = CandidatesFor(layer, Pass::kForward, op, images);
    bytes = std::max(bytes, candidates[chosen[op]].workspace);
  }
  SPILL_RETURN_IF_ERROR(
      AllocateWorkspace(bytes, "the workspace of " + view_.layer(layer).name + " (recomputed)"));
  workspace_.set_algorithms(chosen);
  return Status::Ok();
}

void MemoryRuntime::FreeWorkspace() { workspace_.Free(*allocator_, *backing_); }

// Brings an offloaded tensor back ahead of use, where there is room without
// evicting anything; what does not fit comes back when it is needed.
bool MemoryRuntime::Prefetch(TensorId id) {
  if (residency_->state(id) != Residency::kHost) return true;
  if (!allocator_->CanAllocate(schedule_.tensors[id].bytes)) return false;
  if (!residency_->BeginPrefetch(id).ok()) return false;
  if (Cached(id)) cache_.Touch(id);
  return true;
}

Status MemoryRuntime::EnsureOnDevice(TensorId id, StepRunner& runner) {
  switch (residency_->state(id)) {
    case Residency::kDevice:
    case Residency::kOffloading:
      return Status::Ok();
    case Residency::kPrefetching:
      residency_->FinishPrefetch(id);
      return Status::Ok();
    case Residency::kHost:
      for (;;) {
        Status status = residency_->BeginPrefetch(id);
        if (status.ok()) break;
        if (MakeRoom(schedule_.tensors[id].bytes)) continue;
        if (overdraft_.may()) status = Overdraw([&] { return residency_->BeginPrefetch(id); });
        if (status.ok()) break;
        const TensorInfo& info = schedule_.tensors[id];
        return Fail(status,
                    "'" + info.name + "' back from host memory (" +
                        FormatBytes(static_cast<double>(info.bytes)) + ")",
                    info.bytes);
      }
      residency_->CountOnDemand(id);
      residency_->FinishPrefetch(id);
      if (Cached(id)) cache_.Touch(id);
      return Status::Ok();
    case Residency::kDropped:
      SPILL_RETURN_IF_ERROR(Rebuild(id, runner));
      // A streamed rebuild leaves it in host memory.
      if (residency_->state(id) == Residency::kHost) return EnsureOnDevice(id, runner);
      return Status::Ok();
    case Residency::kUnallocated:
      if (params_.gathered(id)) return Gather(id);
      break;
  }
  SPILL_CHECK(false) << "step " << step_ + 1 << " reads '" << schedule_.tensors[id].name
                     << "', which holds no data";
  return Internal("unreachable");
}

void MemoryRuntime::BeginGather(TensorId id) {
  if (residency_->on_device(id) ||
      std::find(gathering_.begin(), gathering_.end(), id) != gathering_.end()) {
    return;
  }
  gathering_.push_back(id);
  if (options_.record_events) {
    log_events_.Add(RankShare(MemoryEventType::kBeginGather, id, schedule_.tensors[id].bytes));
  }
  if (gatherer_ != nullptr && backing_->HoldsData().ok()) gatherer_->Begin(id);
}

Status MemoryRuntime::Gather(TensorId id) {
  BeginGather(id);
  SPILL_RETURN_IF_ERROR(AllocateTensor(id));
  gathering_.erase(std::find(gathering_.begin(), gathering_.end(), id));
  if (options_.record_events) {
    log_events_.Add(RankShare(MemoryEventType::kFinishGather, id, schedule_.tensors[id].bytes));
  }
  if (gatherer_ != nullptr && backing_->HoldsData().ok()) {
    Status filled = gatherer_->Finish(id, residency_->data(id));
    if (!filled.ok()) {
      return filled.WithContext("gathering '" + schedule_.tensors[id].name + "' from the ranks");
    }
  }
  residency_->MarkWritten(id);
  return Status::Ok();
}

Status MemoryRuntime::FinishUnusedGathers() {
  for (TensorId id : gathering_) {
    if (gatherer_ != nullptr && backing_->HoldsData().ok()) {
      SPILL_RETURN_IF_ERROR(gatherer_->Finish(id, nullptr));
    }
  }
  gathering_.clear();
  return Status::Ok();
}

MemoryEvent MemoryRuntime::RankShare(MemoryEventType type, TensorId id, size_t bytes) const {
  MemoryEvent e;
  e.type = type;
  e.tensor = id;
  // What this rank sends or receives of `bytes`: the other ranks' pieces.
  const int ranks = std::max(options_.ranks, 1);
  e.bytes = bytes / ranks * (ranks - 1);
  return e;
}

// After a memory-centric rebuild only the rebuilt tensor stays: the inputs
// rebuilt for it are dropped again, and checkpoint sources whose host copy is
// current give up their device copy (no transfer) until the next rebuild.
void MemoryRuntime::ReleaseSources(TensorId id, const std::vector<TensorId>& rebuilt) {
  for (TensorId in : rebuilt) {
    if (!cache_.locked(in) && residency_->state(in) == Residency::kDevice) Drop(in);
  }
  for (TensorId x : RebuildSources(schedule_, id)) {
    if (recompute().droppable[x] || cache_.locked(x) ||
        residency_->state(x) != Residency::kDevice || !residency_->host_copy_current(x)) {
      continue;
    }
    if (residency_->BeginOffload(x).ok()) {
      residency_->FinishOffload(x);
      cache_.Remove(x);
    }
  }
}

// A layer being rebuilt: its inputs, aux and parameter tensors in order (as
// many times as the layer lists them), how far they are on the device, and
// those that were dropped (rebuilt for it).
struct MemoryRuntime::RebuildFrame {
  TensorId id = kNoTensor;
  int layer = -1;
  size_t pins = 0;  // the caller's pins, kept
  std::vector<TensorId> sources;
  size_t next = 0;
  bool waiting = false;  // sources[next] is being rebuilt by the frame above
  std::vector<TensorId> rebuilt;
  // Overdraft is held back while the layer is tried whole on the device (it
  // may still be rebuilt streamed): from the frame's start until its rerun
  // on the device has succeeded or failed.
  bool holds_overdraft = false;
};

MemoryRuntime::RebuildFrame MemoryRuntime::StartRebuild(TensorId id) const {
  RebuildFrame f;
  f.id = id;
  f.layer = schedule_.tensors[id].layer;
  f.pins = cache_.pins();
  const LayerTensors& lt = schedule_.layers[f.layer];
  // Parameters kept in host memory come in too; the plan returns them after
  // the layer's own backward, which comes later.
  for (const std::vector<TensorId>* group : {&lt.inputs, &lt.aux, &lt.params}) {
    f.sources.insert(f.sources.end(), group->begin(), group->end());
  }
  return f;
}

// The outputs whole on the device and the layer rerun, its sources in place.
// Outputs placed here hold nothing until the layer has run: if it cannot run
// (no room for its workspace), they go back to where they were, so that no
// tensor claims data it does not hold.
Status MemoryRuntime::RecomputeOnDevice(const RebuildFrame& f, StepRunner& runner) {
  std::vector<std::pair<TensorId, Residency>> placed;
  Status status = PlaceOutputs(schedule_.layers[f.layer], &placed);
  if (status.ok()) status = RecomputeLayer(f.layer, runner);
  if (status.ok()) return status;
  for (const auto& [out, before] : placed) {
    if (before == Residency::kDropped) {
      residency_->Drop(out);
    } else {
      residency_->Release(out);
    }
    cache_.Remove(out);
  }
  return status;
}

Status MemoryRuntime::PlaceOutputs(const LayerTensors& lt,
                                   std::vector<std::pair<TensorId, Residency>>* placed) {
  for (TensorId out : lt.outputs) {
    if (!residency_->on_device(out)) {
      const Residency before = residency_->state(out);
      SPILL_RETURN_IF_ERROR(AllocateTensor(out));
      placed->push_back({out, before});
    }
    Pin(out);
  }
  return Status::Ok();
}

// Runs `body` with the workspace, algorithms and stream state of the step
// being prepared kept aside: a rebuild ahead of a later step may come after
// the step's own workspace, or staging, was set up.
Status MemoryRuntime::AsideFromStep(const std::function<Status()>& body) {
  const ChosenWorkspace::Aside outer = workspace_.TakeAside();
  Staging outer_staging = staging_.TakeAside();
  Status status = body();
  workspace_.Restore(outer, *allocator_, *backing_);
  staging_.Restore(std::move(outer_staging));
  return status;
}

Status MemoryRuntime::RecomputeLayer(int layer, StepRunner& runner) {
  return AsideFromStep([&] {
    SPILL_RETURN_IF_ERROR(ReuseForwardWorkspace(layer, view_.StepImages(layer, Pass::kForward)));
    SPILL_RETURN_IF_ERROR(runner.Recompute(layer));
    CountRecomputation(layer);
    return Status::Ok();
  });
}

void MemoryRuntime::CountRecomputation(int layer) {
  records_.CountRecomputation();
  if (!options_.record_events) return;
  MemoryEvent e;
  e.type = MemoryEventType::kRecompute;
  e.layer = layer;
  NoteSlices(&e);
  log_events_.Add(e);
}

// Reruns the forward of the layer that produced `id`, rebuilding its dropped
// sources first, deepest first. A chain of dropped tensors is as long as the
// network (a segment of thousands of cheap layers), so the rebuilds that wait
// for their sources are frames on an explicit stack, not calls: each frame
// brings its sources to the device in order, pinning each, and one that is
// dropped starts a frame above it; a frame whose sources are all in place
// reruns its layer (FinishRebuild). A failure goes to the frame below as its
// own source's failure, exactly as a nested call would return it.
Status MemoryRuntime::Rebuild(TensorId id, StepRunner& runner) {
  std::vector<RebuildFrame> stack;
  auto start = [&](TensorId t) {
    stack.push_back(StartRebuild(t));
    stack.back().holds_overdraft = CanStreamRebuild(stack.back().layer);
    if (stack.back().holds_overdraft) overdraft_.Hold();
  };
  // Overdraft back before the frame finishes: a streamed rebuild may overdraw.
  auto finish = [&](const Status& on_device) {
    if (stack.back().holds_overdraft) overdraft_.Unhold();
    const Status finished = FinishRebuild(stack.back(), on_device, runner);
    stack.pop_back();
    return finished;
  };
  start(id);
  Status status;  // of the frame that finished last
  while (!stack.empty()) {
    RebuildFrame& f = stack.back();
    if (f.waiting) {  // the source's rebuild finished with `status`
      f.waiting = false;
      const TensorId in = f.sources[f.next];
      // A streamed rebuild leaves it in host memory.
      if (status.ok() && residency_->state(in) == Residency::kHost) {
        status = EnsureOnDevice(in, runner);
      }
    } else if (f.next < f.sources.size()) {
      const TensorId in = f.sources[f.next];
      if (residency_->state(in) == Residency::kDropped) {
        f.rebuilt.push_back(in);
        f.waiting = true;
        start(in);  // `f` dangles from here
        continue;
      }
      status = EnsureOnDevice(in, runner);
    } else {
      status = finish(RecomputeOnDevice(f, runner));
      continue;
    }
    if (status.ok()) {
      Pin(f.sources[f.next++]);
      continue;
    }
    status = finish(status);
  }
  return status;
}

// After the layer's rerun on the device (`on_device`): a layer whose tensors
// do not fit whole is recomputed streamed (runtime_streaming.cc), its outputs
// then in host memory. Inputs rebuilt only for this, in memory-centric
// segments, are dropped again at once.
Status MemoryRuntime::FinishRebuild(const RebuildFrame& f, const Status& on_device,
                                    StepRunner& runner) {
  const LayerTensors& lt = schedule_.layers[f.layer];
  if (!on_device.ok()) {
    if (on_device.code() != StatusCode::kOutOfMemory || !CanStreamRebuild(f.layer)) {
      return on_device;
    }
    cache_.UnpinTo(f.pins);
    SPILL_RETURN_IF_ERROR(RebuildStreamed(f.layer, runner));
  }
  // A memory-centric tensor will be dropped and rebuilt again: it keeps its
  // sources until it dies.
  const bool memory_centric = MemoryCentric(f.id);
  if (!memory_centric) Unreference(f.id);
  for (TensorId out : lt.outputs) residency_->MarkWritten(out);
  // Lift the pins of this rebuild; keep the caller's.
  cache_.UnpinTo(f.pins);
  if (memory_centric) ReleaseSources(f.id, f.rebuilt);
  // Other outputs of the layer that nobody needs any more (dead tensors).
  for (TensorId out : lt.outputs) {
    if (out != f.id && plan().liveness.last_use[out] < step_ && !cache_.locked(out)) Release(out);
  }
  return Status::Ok();
}

}  // namespace spill
