#include "memory/residency.h"

#include "framework/base/logging.h"

namespace spill {

const char* ResidencyName(Residency state) {
  switch (state) {
    case Residency::kUnallocated:
      return "unallocated";
    case Residency::kDevice:
      return "device";
    case Residency::kOffloading:
      return "offloading";
    case Residency::kHost:
      return "host";
    case Residency::kPrefetching:
      return "prefetching";
    case Residency::kDropped:
      return "dropped";
  }
  return "?";
}

MemoryCategory CategoryOf(TensorKind kind) {
  switch (kind) {
    case TensorKind::kActivation:
    case TensorKind::kAux:
      return MemoryCategory::kActivations;
    case TensorKind::kActivationGrad:
      return MemoryCategory::kActivationGradients;
    case TensorKind::kParam:
      return MemoryCategory::kParameters;
    case TensorKind::kParamGrad:
      return MemoryCategory::kParamGradients;
    case TensorKind::kOptimizerState:
      return MemoryCategory::kOptimizerState;
  }
  return MemoryCategory::kActivations;
}

ResidencyManager::ResidencyManager(const Schedule& schedule, DeviceAllocator* allocator,
                                   HeapPool* host_pool, Backing* backing, MemoryEventLog* log)
    : schedule_(schedule),
      allocator_(allocator),
      host_pool_(host_pool),
      backing_(backing),
      slots_(schedule.tensors.size()),
      log_(log) {
  for (size_t id = 0; id < slots_.size(); ++id) {
    slots_[id].transient = IsTransient(schedule.tensors[id].kind);
  }
}

bool ResidencyManager::on_device(TensorId id) const {
  Residency s = slots_[id].state;
  return s == Residency::kDevice || s == Residency::kOffloading || s == Residency::kPrefetching;
}

float* ResidencyManager::data(TensorId id) const {
  const Slot& slot = slots_[id];
  SPILL_CHECK(slot.has_device) << "tensor '" << schedule_.tensors[id].name << "' is "
                               << ResidencyName(slot.state) << ", not on the device";
  return reinterpret_cast<float*>(backing_->device_address(slot.device.offset));
}

void ResidencyManager::WaitForCopy(Slot& slot) {
  if (slot.event) slot.event->Synchronize();
  slot.event.reset();
}

void ResidencyManager::Poison(const Slot& slot) {
  if (!poison_ || !slot.has_device) return;
  backing_->Poison(slot.device.offset, slot.device.bytes);
}

void ResidencyManager::Record(MemoryEventType type, TensorId id, size_t bytes) {
  if (log_ == nullptr) return;
  MemoryEvent e;
  e.type = type;
  e.tensor = id;
  e.bytes = bytes;
  if (id != kNoTensor) e.category = CategoryOf(schedule_.tensors[id].kind);
  log_->Add(e);
}

void ResidencyManager::FreeDevice(Slot& slot) {
  if (!slot.has_device) return;
  Poison(slot);
  backing_->AnnotateFree(slot.device.offset);
  allocator_->Free(slot.device.id);
  owner_[slot.device.id] = kNoTensor;
  slot.has_device = false;
  if (slot.transient) resident_transient_--;
}

void ResidencyManager::FreeHost(Slot& slot) {
  if (!slot.has_host) return;
  host_pool_->Free(slot.host.id);
  slot.has_host = false;
  slot.host_valid = false;
}

void ResidencyManager::SetOwner(AllocationId allocation, TensorId id) {
  if (owner_.size() <= static_cast<size_t>(allocation)) owner_.resize(allocation + 1, kNoTensor);
  owner_[allocation] = id;
}

size_t ResidencyManager::Compact(size_t bytes) {
  // The moves run on the compute queue, each behind the copy in flight on
  // the block it moves, if any (an offload still reading it, a prefetch
  // still filling it); copies queued later wait for the compute queued
  // before them, moves included. No other copy touches a block: one that
  // was freed had its copy waited for, or the compute queue waits for it
  // already (a cancelled offload). Blocks slide from the bottom up, and the
  // free space below the next block grows with each move: once a hole holds
  // `bytes` the rest stay. First the blocks without a copy in flight move,
  // so that nothing waits for the link; only if that leaves no such hole do
  // the others move as well. Where a hole holds `bytes` already, the caller
  // needs more than one block of that size (a streamed step's staging
  // blocks and workspace): every hole is closed.
  const bool whole = allocator_->CanAllocate(bytes);
  size_t moved = 0;
  for (bool in_flight : {false, true}) {
    for (const auto& [offset, allocation] : allocator_->AllocationsByOffset()) {
      if (!whole && allocator_->CanAllocate(bytes)) break;
      const TensorId id =
          allocation < static_cast<AllocationId>(owner_.size()) ? owner_[allocation] : kNoTensor;
      if (id == kNoTensor) continue;  // not a tensor's block: it stays where it is
      Slot& slot = slots_[id];
      const bool copying =
          slot.state == Residency::kOffloading || slot.state == Residency::kPrefetching;
      if (copying && !in_flight) continue;
      const size_t target = allocator_->MoveDown(allocation);
      if (target == offset) continue;
      backing_->ComputeWaits(slot.event);
      backing_->MoveDown(target, offset, schedule_.tensors[id].bytes);
      slot.device.offset = target;
      moved += schedule_.tensors[id].bytes;
    }
  }
  counters_.compacted_bytes += moved;
  Record(MemoryEventType::kCompact, kNoTensor, moved);
  return moved;
}

Status ResidencyManager::AllocateDevice(TensorId id, int hint) {
  Slot& slot = slots_[id];
  const TensorInfo& info = schedule_.tensors[id];
  AllocRequest request;
  request.bytes = info.bytes;
  request.category = CategoryOf(info.kind);
  request.tensor = id;
  request.step = step_;
  request.hint = hint;
  SPILL_ASSIGN_OR_RETURN(slot.device, NoteRefusedOffloads(allocator_->Allocate(request)));
  backing_->AnnotateAllocation(slot.device.offset, info.bytes);
  SetOwner(slot.device.id, id);
  slot.has_device = true;
  if (slot.transient) resident_transient_++;
  return Status::Ok();
}

// A host block for `id`, page-locked (or, on disk, claimed) as the host
// pool's high water mark grows.
Status ResidencyManager::AllocateHost(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(host_pool_ != nullptr && host_pool_->capacity() > 0)
      << "host memory needed without a host pool";
  const TensorInfo& info = schedule_.tensors[id];
  auto block = host_pool_->Allocate(info.bytes, CategoryOf(info.kind));
  if (!block.ok()) {
    return OutOfMemory(host_tier_ + " is full: " + block.status().message());
  }
  slot.host = *block;
  slot.has_host = true;
  Status pinned = backing_->PinHost(slot.host.offset + slot.host.bytes);
  if (!pinned.ok()) {
    FreeHost(slot);
    if (pin_failure_.empty()) {
      pin_failure_ = pinned.message();
      SPILL_LOG_WARNING(kMemory) << pin_failure_
                                 << "; tensors that cannot be offloaded stay on the device";
    }
    return pinned;
  }
  return Status::Ok();
}

Status ResidencyManager::AllocateOnHost(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kUnallocated)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  SPILL_RETURN_IF_ERROR(AllocateHost(id));
  slot.host_valid = true;
  slot.state = Residency::kHost;
  return Status::Ok();
}

Status ResidencyManager::AllocateForWrite(TensorId id, int hint) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kHost)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  WaitForCopy(slot);  // a copy of the old value may still read or fill the host block
  SPILL_RETURN_IF_ERROR(AllocateDevice(id, hint));
  slot.host_valid = false;
  slot.state = Residency::kDevice;
  return Status::Ok();
}

float* ResidencyManager::host_data(TensorId id) const {
  const Slot& slot = slots_[id];
  if (!slot.has_host) return nullptr;
  return reinterpret_cast<float*>(backing_->host_address(slot.host.offset));
}

Status ResidencyManager::Allocate(TensorId id, int hint) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kUnallocated || slot.state == Residency::kDropped)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  SPILL_RETURN_IF_ERROR(AllocateDevice(id, hint));
  slot.state = Residency::kDevice;
  return Status::Ok();
}

void ResidencyManager::Release(TensorId id) {
  Slot& slot = slots_[id];
  WaitForCopy(slot);
  FreeDevice(slot);
  FreeHost(slot);
  slot.state = Residency::kUnallocated;
}

Status ResidencyManager::BeginOffload(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kDevice)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  SPILL_CHECK(host_pool_ != nullptr) << "offload without a host pool";
  if (!slot.host_valid) {
    const TensorInfo& info = schedule_.tensors[id];
    if (!slot.has_host) SPILL_RETURN_IF_ERROR(AllocateHost(id));
    slot.event = backing_->CopyOut(slot.host.offset, slot.device.offset, info.bytes);
    counters_.to_host_bytes += info.bytes;
    slot.host_valid = true;
    Record(MemoryEventType::kBeginOffload, id, info.bytes);
  } else {
    Record(MemoryEventType::kBeginOffload, id, 0);  // the host copy is current: no copy
  }
  counters_.offloads++;
  slot.state = Residency::kOffloading;
  return Status::Ok();
}

void ResidencyManager::FinishOffload(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kOffloading) << schedule_.tensors[id].name;
  Record(MemoryEventType::kFinishOffload, id, schedule_.tensors[id].bytes);
  WaitForCopy(slot);
  FreeDevice(slot);
  slot.state = Residency::kHost;
}

void ResidencyManager::CancelOffload(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kOffloading) << schedule_.tensors[id].name;
  Record(MemoryEventType::kCancelOffload, id, 0);
  // The copy may still read the block: later compute that writes it waits.
  backing_->ComputeWaits(slot.event);
  slot.state = Residency::kDevice;
}

Status ResidencyManager::BeginPrefetch(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kHost)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  const TensorInfo& info = schedule_.tensors[id];
  SPILL_RETURN_IF_ERROR(AllocateDevice(id, 0));
  Record(MemoryEventType::kBeginPrefetch, id, info.bytes);
  // After the last work of the other copy queue on its host bytes (a
  // solver step run there; slot.event is otherwise done or null).
  slot.event = backing_->CopyIn(slot.device.offset, slot.host.offset, info.bytes, slot.event);
  counters_.to_device_bytes += info.bytes;
  counters_.prefetches++;
  slot.state = Residency::kPrefetching;
  return Status::Ok();
}

void ResidencyManager::FinishPrefetch(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kPrefetching) << schedule_.tensors[id].name;
  Record(MemoryEventType::kFinishPrefetch, id, schedule_.tensors[id].bytes);
  backing_->ComputeWaits(slot.event);
  slot.event.reset();
  slot.state = Residency::kDevice;
}

void ResidencyManager::Drop(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kDevice)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  Record(MemoryEventType::kDrop, id, schedule_.tensors[id].bytes);
  FreeDevice(slot);
  FreeHost(slot);
  counters_.drops++;
  slot.state = Residency::kDropped;
}

void ResidencyManager::Unplace(TensorId id) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.state == Residency::kHost || slot.state == Residency::kUnallocated)
      << schedule_.tensors[id].name << " is " << ResidencyName(slot.state);
  WaitForCopy(slot);
  FreeHost(slot);
  slot.state = Residency::kDropped;
}

void ResidencyManager::MarkWritten(TensorId id) {
  // In host memory alone, it was written there (a streamed step): current.
  if (slots_[id].state != Residency::kHost) slots_[id].host_valid = false;
}

std::shared_ptr<Event> ResidencyManager::CopySliceIn(TensorId id, void* staging, size_t offset,
                                                     size_t bytes) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.has_host && slot.host_valid) << schedule_.tensors[id].name;
  // After its last slice out, which may still read the staging half this
  // slice goes to (a tensor read and written slice by slice).
  return backing_->CopySliceIn(staging, slot.host.offset + offset, bytes, slot.event);
}

std::shared_ptr<Event> ResidencyManager::CopySliceOut(TensorId id, const void* staging,
                                                      size_t offset, size_t bytes) {
  Slot& slot = slots_[id];
  SPILL_CHECK(slot.has_host) << schedule_.tensors[id].name;
  slot.event = backing_->CopySliceOut(slot.host.offset + offset, staging, bytes);
  slot.host_valid = true;
  return slot.event;
}

void ResidencyManager::CountStreamIn(TensorId id, size_t bytes) {
  counters_.to_device_bytes += bytes;
  Record(MemoryEventType::kStreamIn, id, bytes);
}

void ResidencyManager::CountStreamOut(TensorId id, size_t bytes) {
  counters_.to_host_bytes += bytes;
  Record(MemoryEventType::kStreamOut, id, bytes);
}

StatusOr<Allocation> ResidencyManager::NoteRefusedOffloads(StatusOr<Allocation> block) const {
  if (block.ok() || pin_failure_.empty()) return block;
  return Status(block.status().code(),
                block.status().message() + "; offloading could not make room: " + pin_failure_);
}

}  // namespace spill
