// MemoryRuntime, third part: parameters, their gradients and solver state
// wherever they live, and the solver step.
//
// With memory.params: host (or above:SIZE) a layer's parameters live in host
// memory and the transfer plan brings them in for each step of the layer
// (memory/transfer_plan.cc). After the layer's backward the plan's kUpdate
// runs the solver step for it:
//   * update: device - the gradient is on the device and the state has been
//     prefetched: the step runs on the compute queue; the gradient is then
//     used up, the parameter and its state go back to host memory;
//   * update: host - the gradient's copy to host memory has been enqueued; the
//     step is enqueued behind it on the device-to-host queue as host
//     arithmetic, so it runs as soon as the gradient arrives, overlapping the
//     rest of backward, and the next prefetch of the parameter (on the other
//     copy queue) waits for its event. With updates_after_iteration (fp16's
//     loss scaling) the plan has no kUpdate: the gradient stays in host
//     memory, and FinishUpdate enqueues the step there after the iteration,
//     once every gradient has been checked.
// Parameters kept on the device are updated in FinishUpdate, after the
// iteration, as before. Either way the arithmetic is the solver's, so on the
// CPU device every placement gives bit-identical parameters.
//
// ReadTensor and WriteTensor reach a tensor in whichever memory holds its
// current value, after the copies and host updates in flight.
#include <cstring>

#include "memory/runtime/runtime.h"

namespace spill {
namespace {

// The runner of a solver step outside any step: a parameter it needs is
// never dropped, so nothing is recomputed.
class NoRunner : public StepRunner {
 public:
  Status Recompute(int) override { return Internal("no recomputation outside a step"); }
};

}  // namespace

void MemoryRuntime::BeginUpdate(SlotUpdate update) { params_.Begin(std::move(update)); }

void MemoryRuntime::ApplyUpdate(int slot) {
  const ParameterSlot& p = schedule_.parameters[slot];
  MemoryEvent e;
  e.type = MemoryEventType::kUpdate;
  e.tensor = p.param;
  e.layer = p.layer;
  e.bytes = schedule_.tensors[p.param].bytes;
  e.offset = options_.update_on_host ? 1 : 0;
  if (options_.record_events) log_events_.Add(e);
  params_.MarkUpdated(slot);
  Status given = backing_->RequireUpdate(params_.update(), schedule_.tensors[p.param].name);
  if (!given.ok()) {
    params_.set_failure(given);
    return;
  }
  if (options_.update_on_host) {
    UpdateInHostMemory(slot);
    return;
  }
  Status status = UpdateOnDevice(slot);
  if (!status.ok()) {
    params_.set_failure(status);
    return;
  }
  residency_->Release(p.grad);  // used up
}

Status MemoryRuntime::UpdateOnDevice(int slot) {
  const ParameterSlot& p = schedule_.parameters[slot];
  // A sharded parameter: the solver updates this rank's piece, if it holds one.
  const bool sharded = params_.gathered(p.param);
  if (sharded && p.master == kNoTensor) return Status::Ok();
  const TensorId w = sharded ? p.master : p.param;
  std::vector<TensorId> tensors = {w, p.grad};
  tensors.insert(tensors.end(), p.state.begin(), p.state.end());
  const size_t pins = cache_.pins();
  NoRunner no_runner;
  for (TensorId id : tensors) {
    // A gradient that left after backward is made again: the store that
    // reduced it fills it.
    if (id == p.grad && options_.gradients_leave && !residency_->on_device(id)) {
      SPILL_RETURN_IF_ERROR(PrepareWrite(id));
      continue;
    }
    SPILL_RETURN_IF_ERROR(EnsureOnDevice(id, no_runner));
    Pin(id);
  }
  std::vector<float*> state;
  for (TensorId t : p.state) state.push_back(residency_->data(t));
  backing_->Update(params_.update(), p, residency_->data(w), residency_->data(p.grad), state);
  residency_->MarkWritten(w);
  for (TensorId t : p.state) residency_->MarkWritten(t);
  cache_.UnpinTo(pins);
  if (options_.gradients_leave) Release(p.grad);  // used up
  return Status::Ok();
}

// The gradient's copy to host memory is on the copy queue; the step runs
// behind it, on host memory, and the parameter's next prefetch behind that.
void MemoryRuntime::UpdateInHostMemory(int slot) {
  const ParameterSlot& p = schedule_.parameters[slot];
  const Residency grad = residency_->state(p.grad);
  if ((grad != Residency::kOffloading && grad != Residency::kHost) ||
      !residency_->host_copy_current(p.grad)) {
    params_.set_failure(OutOfMemory("the gradient of '" + schedule_.tensors[p.param].name +
                                    "' could not go to host memory for its update there"));
    return;
  }
  std::vector<float*> state;
  for (TensorId t : p.state) state.push_back(residency_->host_data(t));
  residency_->WaitForCopy(p.param);  // nothing in flight may read it while the step writes it
  std::shared_ptr<Event> done = backing_->UpdateInHostMemory(
      params_.update(), p, residency_->host_data(p.param), residency_->host_data(p.grad), state);
  residency_->HostWrites(p.param, done);
  for (TensorId t : p.state) residency_->HostWrites(t, done);
}

Status MemoryRuntime::FinishUpdate() {
  Status status = params_.failure();
  for (size_t slot = 0; slot < schedule_.parameters.size() && status.ok(); ++slot) {
    if (params_.updated(static_cast<int>(slot))) continue;
    if (options_.updates_after_iteration && options_.update_on_host &&
        params_.home_host(schedule_.parameters[slot].param)) {
      ApplyUpdate(static_cast<int>(slot));  // in host memory, where its gradient waits
      status = params_.failure();
      continue;
    }
    status = UpdateOnDevice(static_cast<int>(slot));
  }
  params_.Finish();
  return status;
}

Status MemoryRuntime::ReadTensor(TensorId id, void* out) {
  const TensorInfo& info = schedule_.tensors[id];
  SPILL_RETURN_IF_ERROR(backing_->HoldsData());
  // Copies and host updates in flight may still fill it.
  backing_->SynchronizeCopies();
  residency_->WaitForCopy(id);
  if (residency_->state(id) == Residency::kPrefetching) residency_->FinishPrefetch(id);
  if (residency_->on_device(id)) {
    backing_->CopySync(out, residency_->data(id), info.bytes, CopyKind::kDeviceToHost);
    return Status::Ok();
  }
  if (residency_->state(id) == Residency::kHost && residency_->host_copy_current(id)) {
    std::memcpy(out, residency_->host_data(id), info.bytes);
    return Status::Ok();
  }
  if (params_.gathered(id)) {
    return InvalidArgument("parameter '" + info.name +
                           "' is sharded over the ranks (distributed.zero 3): this rank holds "
                           "its piece alone");
  }
  return InvalidArgument("tensor '" + info.name + "' holds no data now (" +
                         ResidencyName(residency_->state(id)) + ")");
}

Status MemoryRuntime::WriteTensor(TensorId id, const void* in) {
  const TensorInfo& info = schedule_.tensors[id];
  SPILL_RETURN_IF_ERROR(backing_->HoldsData());
  if (params_.gathered(id) && !residency_->on_device(id)) {
    // A sharded parameter keeps this rank's piece of the values.
    const ParameterSlot& p = schedule_.parameters[params_.slot_of(id)];
    if (p.master == kNoTensor) return Status::Ok();
    return WriteTensor(p.master, static_cast<const float*>(in) + p.master_begin);
  }
  backing_->SynchronizeCopies();
  residency_->WaitForCopy(id);
  if (residency_->state(id) == Residency::kPrefetching) residency_->FinishPrefetch(id);
  if (residency_->state(id) == Residency::kOffloading) residency_->CancelOffload(id);
  if (residency_->state(id) == Residency::kDevice) {
    backing_->CopySync(residency_->data(id), in, info.bytes, CopyKind::kHostToDevice);
    residency_->MarkWritten(id);
    return Status::Ok();
  }
  if (residency_->state(id) == Residency::kHost) {
    std::memcpy(residency_->host_data(id), in, info.bytes);
    residency_->MarkHostCurrent(id);
    return Status::Ok();
  }
  return InvalidArgument("tensor '" + info.name + "' has no memory to write to now (" +
                         ResidencyName(residency_->state(id)) + ")");
}

}  // namespace spill
