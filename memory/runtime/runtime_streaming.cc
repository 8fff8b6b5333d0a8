// MemoryRuntime, third part: streamed steps, which take a step below the
// size of its own tensors (memory.chunk: auto or N).
//
// A step whose tensors do not fit the device at once - its transient
// tensors alone exceed what the persistent ones leave, or placing them whole
// ran out of memory even after the tensor cache made what room it could -
// keeps its batch-major tensors (activations, their gradients, per-image
// saved tensors) in host memory and computes the batch slice by slice. Each
// staged tensor gets a staging block of one slice on the device; before a
// call the slice of every tensor it reads is copied in (and of every
// gradient it adds into, in its last sweep), after the call the slice it
// wrote is copied out. The step's other tensors (parameters, per-channel
// statistics) are on the device whole, as in any step. A recomputation that
// does not fit whole (rebuilding a dropped tensor for a step) is streamed
// the same way, as its forward step; its outputs end in host memory.
//
// The slice is the configured one, or under `auto` the largest for which the
// staging blocks take at most half of the memory the persistent tensors
// leave (the rest stays for tensors later steps reuse), shrunk until the
// blocks and a workspace fit. Double-buffered (memory.stream_buffers: 2,
// the default) a block holds two slices, so that the copies of the next and
// the previous slice overlap the compute of this one (memory/runtime/staging.h);
// where no slice fits twice, the step streams single-buffered. Like every
// other decision, this depends on the schedule and the pools alone, so a
// plan streams exactly the steps a run streams, with the same slices and the
// same bytes moved.
#include <algorithm>

#include "framework/base/logging.h"
#include "memory/runtime/runtime.h"

namespace spill {
namespace {

// Of the memory the persistent tensors leave, the share staging blocks may
// take when the slice is chosen automatically.
constexpr double kStagingShare = 0.5;

bool Contains(const std::vector<TensorId>& ids, TensorId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

bool MemoryRuntime::BatchMajor(TensorId id) const {
  const TensorInfo& info = schedule_.tensors[id];
  return IsTransient(info.kind) && view_.batch > 1 && info.shape.n() == view_.batch;
}

bool MemoryRuntime::CanStream(const Step& step) const {
  return options_.batch_chunk != kBatchChunkOff && Streamable(step);
}

bool MemoryRuntime::Streamable(const Step& step) const {
  if (!options_.liveness || !step.active || host_pool_.capacity() == 0 ||
      !view_.layer(step.layer).slices) {
    return false;
  }
  for (TensorId id : step.reads) {
    if (BatchMajor(id)) return true;
  }
  for (TensorId id : step.writes) {
    if (BatchMajor(id)) return true;
  }
  return false;
}

Status MemoryRuntime::CheckPlannedStream(const Step& step) const {
  const StreamedStep& planned = *plan().StreamedAt(step.index);
  const std::string where = "plan: step " + std::to_string(step.index + 1) + " (" +
                            view_.layer(step.layer).name + ") streamed in slices of " +
                            std::to_string(planned.images) + " images: ";
  if (planned.buffers != 1 && planned.buffers != 2) {
    return InvalidArgument(where + std::to_string(planned.buffers) +
                           " buffers per staging block (expected 1 or 2)");
  }
  if (!Streamable(step)) {
    return InvalidArgument(where +
                           "the step cannot stream (it needs liveness, host memory, a computing "
                           "step with a tensor over the batch and a layer that computes in "
                           "slices of it)");
  }
  return Status::Ok();
}

bool MemoryRuntime::MustStream(const Step& step) const {
  if (!CanStream(step)) return false;
  std::vector<TensorId> tensors;
  size_t bytes = 0;
  for (const std::vector<TensorId>* group : {&step.reads, &step.writes}) {
    for (TensorId id : *group) {
      if (!IsTransient(schedule_.tensors[id].kind) || Contains(tensors, id)) continue;
      tensors.push_back(id);
      bytes += schedule_.tensors[id].bytes;
    }
  }
  return bytes + records_.persistent() > allocator_->capacity();
}

Status MemoryRuntime::PrepareStreamed(const Step& step, StepRunner& runner, std::string* choice) {
  staging_.Begin();
  for (TensorId id : step.reads) {
    if (BatchMajor(id)) {
      SPILL_RETURN_IF_ERROR(StageRead(id, Contains(step.accumulates, id), runner));
      continue;
    }
    SPILL_RETURN_IF_ERROR(EnsureOnDevice(id, runner));
    Pin(id);
  }
  for (TensorId id : allocator_->PlacementOrder(step)) {
    SPILL_RETURN_IF_ERROR(BatchMajor(id) ? StageWrite(id) : PrepareWrite(id));
  }
  SPILL_RETURN_IF_ERROR(AllocateStaging(step.layer, step.pass, /*recompute=*/false, choice));
  CountStaged(Sweeps(step.layer, step.pass));
  return Status::Ok();
}

int MemoryRuntime::Sweeps(int layer, Pass pass) const {
  const LayerSummary& summary = view_.layer(layer);
  return pass == Pass::kForward ? summary.forward_sweeps : summary.backward_sweeps;
}

// Both directions are counted before the compute: the copies interleave with
// its slices.
void MemoryRuntime::CountStaged(int sweeps) {
  for (const StagedTensor& t : staging_.tensors()) {
    const size_t bytes = schedule_.tensors[t.id].bytes;
    const size_t in = t.read ? static_cast<size_t>(sweeps) * bytes : t.accumulated ? bytes : 0;
    if (in > 0) residency_->CountStreamIn(t.id, in);
  }
  for (const StagedTensor& t : staging_.tensors()) {
    if (t.written) residency_->CountStreamOut(t.id, schedule_.tensors[t.id].bytes);
  }
}

bool MemoryRuntime::CanStreamRebuild(int layer) const {
  if (options_.batch_chunk == kBatchChunkOff || !options_.liveness || host_pool_.capacity() == 0 ||
      !view_.layer(layer).slices) {
    return false;
  }
  for (TensorId out : schedule_.layers[layer].outputs) {
    if (BatchMajor(out)) return true;
  }
  return false;
}

// The forward step's staging, for a rerun: inputs and saved tensors read,
// outputs written, parameters and other tensors whole on the device.
Status MemoryRuntime::RebuildStreamed(int layer, StepRunner& runner) {
  const LayerTensors& lt = schedule_.layers[layer];
  // Outputs that were dropped get host blocks before the staging is known
  // to fit; if the rebuild cannot run they are dropped again, so that a
  // later read rebuilds them instead of taking the empty blocks as current.
  std::vector<TensorId> placed;
  const Status status = AsideFromStep([&] {
    for (const std::vector<TensorId>* group : {&lt.inputs, &lt.aux, &lt.params}) {
      for (TensorId in : *group) {
        if (staging_.Contains(in) || Contains(lt.outputs, in)) continue;
        if (BatchMajor(in)) {
          SPILL_RETURN_IF_ERROR(StageRead(in, /*accumulated=*/false, runner));
        } else {
          SPILL_RETURN_IF_ERROR(EnsureOnDevice(in, runner));
          Pin(in);
        }
      }
    }
    for (TensorId out : lt.outputs) {
      if (!BatchMajor(out)) {
        SPILL_RETURN_IF_ERROR(PrepareWrite(out));
        continue;
      }
      if (residency_->state(out) == Residency::kDropped) placed.push_back(out);
      SPILL_RETURN_IF_ERROR(StageWrite(out));
    }
    SPILL_RETURN_IF_ERROR(AllocateStaging(layer, Pass::kForward, /*recompute=*/true, nullptr));
    CountStaged(Sweeps(layer, Pass::kForward));
    Status recomputed = runner.Recompute(layer);
    if (recomputed.ok()) CountRecomputation(layer);
    FinishStreamed();
    return recomputed;
  });
  if (!status.ok()) {
    for (TensorId out : placed) residency_->Unplace(out);
  }
  return status;
}

// Staged tensors are pinned like any tensor of a step: a rebuild for a later
// read may bring one back to the device, and it must not be evicted (which
// could drop its host copy) while the step runs.
Status MemoryRuntime::StageRead(TensorId id, bool accumulated, StepRunner& runner) {
  SPILL_RETURN_IF_ERROR(MoveToHost(id, runner));
  Pin(id);
  StagedTensor t;
  t.id = id;
  t.image_bytes = schedule_.tensors[id].bytes / static_cast<size_t>(view_.batch);
  t.read = !accumulated;
  t.accumulated = t.written = accumulated;
  staging_.Add(t);
  return Status::Ok();
}

Status MemoryRuntime::StageWrite(TensorId id) {
  if (staging_.Contains(id)) return Status::Ok();  // a gradient added into: staged as read
  const TensorInfo& info = schedule_.tensors[id];
  if (residency_->state(id) != Residency::kUnallocated) {
    // Placed by the attempt to run the step whole; it holds nothing yet.
    residency_->Release(id);
    cache_.Remove(id);
  }
  Status status = residency_->AllocateOnHost(id);
  if (!status.ok()) {
    return Fail(status, "'" + info.name + "' in host memory for a streamed step", info.bytes);
  }
  Pin(id);
  StagedTensor t;
  t.id = id;
  t.image_bytes = info.bytes / static_cast<size_t>(view_.batch);
  t.written = true;
  staging_.Add(t);
  return Status::Ok();
}

Status MemoryRuntime::MoveToHost(TensorId id, StepRunner& runner) {
  if (residency_->state(id) == Residency::kDropped) SPILL_RETURN_IF_ERROR(Rebuild(id, runner));
  if (residency_->state(id) == Residency::kHost) return Status::Ok();
  if (residency_->state(id) == Residency::kPrefetching) residency_->FinishPrefetch(id);
  if (residency_->state(id) == Residency::kDevice) {
    Status status = residency_->BeginOffload(id);
    if (!status.ok()) {
      const TensorInfo& info = schedule_.tensors[id];
      return Fail(status, "'" + info.name + "' in host memory for a streamed step", info.bytes);
    }
  }
  SPILL_CHECK(residency_->state(id) == Residency::kOffloading)
      << schedule_.tensors[id].name << " is " << ResidencyName(residency_->state(id));
  residency_->FinishOffload(id);
  cache_.Remove(id);
  return Status::Ok();
}

int64_t MemoryRuntime::AutoStreamImages(size_t image_bytes) const {
  const size_t capacity = allocator_->capacity();
  const size_t persistent = records_.persistent();
  const size_t room = capacity > persistent ? capacity - persistent : 0;
  const double images =
      kStagingShare * static_cast<double>(room) / static_cast<double>(image_bytes);
  return std::clamp<int64_t>(static_cast<int64_t>(images), 1, view_.batch);
}

// Double buffering needs a step of more than one slice; a slice that does not
// fit twice shrinks, and at its smallest streams single-buffered.
Status MemoryRuntime::AllocateStaging(int layer, Pass pass, bool recompute, std::string* choice) {
  const size_t image_bytes = staging_.image_bytes();
  const StreamedStep* planned = recompute ? nullptr : plan().StreamedAt(step_);
  const bool fixed = planned != nullptr || options_.batch_chunk > 0;
  int buffers = planned != nullptr ? planned->buffers : options_.stream_buffers;
  int64_t images = planned != nullptr ? std::min(planned->images, view_.batch)
                   : fixed            ? std::min(options_.batch_chunk, view_.batch)
                                      : AutoStreamImages(buffers * image_bytes);
  const int sweeps = Sweeps(layer, recompute ? Pass::kForward : pass);
  for (;;) {
    const int depth = images < view_.batch || sweeps > 1 ? buffers : 1;
    Status status;
    {
      // A slice that may still shrink, or fall back to one buffer, does not
      // overdraw.
      Overdraft::Scope hold(&overdraft_,
                            planned == nullptr && ((!fixed && images > 1) || depth > 1));
      status = TryStaging(images, depth);
      if (status.ok()) {
        status = recompute ? ReuseForwardWorkspace(layer, images)
                           : ChooseWorkspace(layer, pass, images, choice);
        if (status.ok()) {
          staging_.SetSlices(view_.batch, images, sweeps, depth);
          return status;
        }
        staging_.FreeBlocks(*allocator_, *backing_);
        if (choice != nullptr) choice->clear();
      }
    }
    if (status.code() != StatusCode::kOutOfMemory) return status;
    if (MakeRoom(static_cast<size_t>(depth * images) * image_bytes)) continue;
    if (planned != nullptr) return status;  // as the plan says, or not at all
    if (!fixed && images > 1) {
      images = std::max<int64_t>(1, images * 3 / 4);
    } else if (depth > 1) {
      buffers = 1;
    } else {
      return status;
    }
  }
}

Status MemoryRuntime::TryStaging(int64_t images, int buffers) {
  for (StagedTensor& t : staging_.tensors()) {
    const TensorInfo& info = schedule_.tensors[t.id];
    AllocRequest request;
    request.bytes = Staging::BlockBytes(images, t.image_bytes, buffers);
    request.category = CategoryOf(info.kind);
    request.tensor = t.id;
    request.step = step_;
    auto block = allocator_->Allocate(request);
    if (!block.ok() && block.status().code() == StatusCode::kOutOfMemory && overdraft_.may()) {
      allocator_->set_overdraft(true);
      block = allocator_->Allocate(request);
      allocator_->set_overdraft(false);
    }
    if (!block.ok()) {
      staging_.FreeBlocks(*allocator_, *backing_);
      return Fail(block.status(),
                  "a staging block for " + std::to_string(buffers) + " x " +
                      std::to_string(images) + " images of '" + info.name + "' (" +
                      FormatBytes(static_cast<double>(request.bytes)) + ")",
                  request.bytes);
    }
    t.block = block->id;
    t.offset = block->offset;
    t.data = backing_->device_address(block->offset);
    backing_->AnnotateAllocation(block->offset, request.bytes);
  }
  return Status::Ok();
}

void MemoryRuntime::FinishStreamed() {
  if (staging_.images() == 0) return;
  for (const StagedTensor& t : staging_.tensors()) {
    // The staging block is given back once its last copy out is done (the
    // copy queue runs in order: every earlier one is done too).
    if (t.written) residency_->WaitForCopy(t.id);
  }
  staging_.Clear(*allocator_, *backing_);
}

void MemoryRuntime::BeginSlice(int64_t begin, int64_t images, bool last_sweep) {
  staging_.BeginSlice(*residency_, begin, images, last_sweep);
}

void MemoryRuntime::EndSlice(int64_t begin, int64_t images, bool last_sweep) {
  staging_.EndSlice(*residency_, begin, images, last_sweep);
}

float* MemoryRuntime::StagedData(TensorId id) { return staging_.Data(id); }

void MemoryRuntime::NoteSlices(MemoryEvent* e) const {
  if (staging_.images() == 0) return;
  e->slices = staging_.slice_calls();
  e->buffers = staging_.buffers();
}

}  // namespace spill
