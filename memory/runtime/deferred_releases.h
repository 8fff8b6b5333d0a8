// DeferredReleases: tensors whose device memory goes later than the plan's
// action names it.
//   * Sources of dropped tensors. A dropped tensor is rebuilt from its
//     sources (RebuildSources), so each source counts the dropped tensors
//     that need it; a source past its last use stays (deferred) until that
//     count reaches zero, and goes then.
//   * Lazily released offloads (kFinishOffloadLazily): offloads past their
//     last forward use whose device block goes when room is needed, oldest
//     first.
// Bookkeeping only: the runtime frees, through the callback it passes.
#ifndef SPILL_MEMORY_RUNTIME_DEFERRED_RELEASES_H_
#define SPILL_MEMORY_RUNTIME_DEFERRED_RELEASES_H_

#include <deque>
#include <functional>
#include <vector>

#include "framework/schedule/schedule.h"

namespace spill {

class DeferredReleases {
 public:
  explicit DeferredReleases(const Schedule& schedule);

  // The tensor's life is over. True when it must wait for the dropped
  // tensors that will be rebuilt from it (it is deferred); false when it may
  // go now.
  bool Defer(TensorId id);
  // `id` was dropped: its sources are held for its rebuild (once).
  void HoldSources(TensorId id);
  // `id` will not be rebuilt again (it is kept, or dead): its sources may go.
  // `free` frees each source whose last holder this was and that was
  // deferred (after its own sources, recursively); `id` itself stays.
  void Unreference(TensorId id, const std::function<void(TensorId)>& free);
  // The tensor was freed: no longer deferred.
  void Freed(TensorId id) { deferred_[id] = false; }

  void AddLazyOffload(TensorId id) { lazy_offloads_.push_back(id); }
  // The oldest lazily released offload, removed; kNoTensor when none.
  TensorId TakeOldestLazyOffload();
  void ClearLazyOffloads() { lazy_offloads_.clear(); }

 private:
  const Schedule& schedule_;
  // Dropped tensors that will be rebuilt from each tensor.
  std::vector<int> rebuild_refs_;
  std::vector<bool> holds_sources_;  // a dropped tensor counts in its sources' refs
  std::vector<bool> deferred_;
  std::deque<TensorId> lazy_offloads_;  // oldest first
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_DEFERRED_RELEASES_H_
