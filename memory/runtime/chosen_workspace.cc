#include "memory/runtime/chosen_workspace.h"

namespace spill {

void ChosenWorkspace::BeginIteration() {
  for (auto& chosen : forward_algorithms_) chosen.clear();
}

void ChosenWorkspace::Place(const Allocation& allocation, size_t bytes, Backing& backing) {
  id_ = allocation.id;
  offset_ = allocation.offset;
  workspace_.bytes = bytes;
  workspace_.data = backing.device_address(allocation.offset);
  backing.AnnotateAllocation(allocation.offset, bytes);
}

void ChosenWorkspace::Free(DeviceAllocator& allocator, Backing& backing) {
  if (id_ < 0) return;
  backing.AnnotateFree(offset_);
  allocator.Free(id_);
  id_ = -1;
  workspace_ = Workspace();
}

ChosenWorkspace::Aside ChosenWorkspace::TakeAside() {
  Aside aside{workspace_, id_, offset_, algorithms_};
  id_ = -1;
  return aside;
}

void ChosenWorkspace::Restore(const Aside& aside, DeviceAllocator& allocator, Backing& backing) {
  Free(allocator, backing);
  workspace_ = aside.workspace;
  id_ = aside.id;
  offset_ = aside.offset;
  algorithms_ = aside.algorithms;
}

}  // namespace spill
