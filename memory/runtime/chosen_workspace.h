// ChosenWorkspace: the workspace block of the step (or recomputation) being
// run, the algorithms chosen for it, and per layer the algorithms its
// forward ran with in this iteration, so that a recomputation reruns them
// and rebuilds its tensors bit for bit.
//
// Which algorithms and how many bytes is the workspace selector's decision
// (memory/workspace_selector.h), made by the runtime; this part holds the
// result and gives the block back.
#ifndef SPILL_MEMORY_RUNTIME_CHOSEN_WORKSPACE_H_
#define SPILL_MEMORY_RUNTIME_CHOSEN_WORKSPACE_H_

#include <vector>

#include "framework/schedule/tensor_store.h"
#include "memory/allocators/allocator.h"
#include "memory/backing.h"

namespace spill {

class ChosenWorkspace {
 public:
  explicit ChosenWorkspace(int layers) : forward_algorithms_(layers) {}

  const Workspace& workspace() const { return workspace_; }
  const std::vector<int>& algorithms() const { return algorithms_; }
  void set_algorithms(std::vector<int> algorithms) { algorithms_ = std::move(algorithms); }
  // The algorithms `layer`'s forward ran with (empty: it has not run).
  const std::vector<int>& forward(int layer) const { return forward_algorithms_[layer]; }
  void set_forward(int layer, std::vector<int> chosen) {
    forward_algorithms_[layer] = std::move(chosen);
  }
  void BeginIteration();

  // No block (a step that needs none).
  void Clear() { workspace_ = Workspace(); }
  // `allocation` of `bytes` is the block, annotated on the backing.
  void Place(const Allocation& allocation, size_t bytes, Backing& backing);
  // Gives the block back, if any.
  void Free(DeviceAllocator& allocator, Backing& backing);

  // The step's workspace and algorithms, set aside while a rebuild runs with
  // its own (TakeAside leaves none; Restore frees the rebuild's first).
  struct Aside {
    Workspace workspace;
    AllocationId id = -1;
    size_t offset = 0;
    std::vector<int> algorithms;
  };
  Aside TakeAside();
  void Restore(const Aside& aside, DeviceAllocator& allocator, Backing& backing);

 private:
  Workspace workspace_;
  AllocationId id_ = -1;
  size_t offset_ = 0;
  std::vector<int> algorithms_;  // of the step (or recomputation) being run
  std::vector<std::vector<int>> forward_algorithms_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_CHOSEN_WORKSPACE_H_
