// The LRU tensor cache (SuperNeurons Alg. 2): device memory as a cache of
// transient tensors. Every use of a tensor moves it to the front; a layer
// locks the tensors it is using. When an allocation does not fit, the
// runtime evicts the least recently used unlocked tensors - dropping them
// when they can be recomputed, offloading them otherwise - until it fits.
// Nothing moves while memory suffices.
//
// This class is only the bookkeeping (recency and locks); an eviction policy
// (memory/eviction/) picks the victim, the runtime decides what eviction
// means and the residency state machine performs it.
#ifndef SPILL_MEMORY_RUNTIME_TENSOR_CACHE_H_
#define SPILL_MEMORY_RUNTIME_TENSOR_CACHE_H_

#include <cstdint>
#include <set>
#include <vector>

#include "framework/schedule/schedule.h"

namespace spill {

class TensorCache {
 public:
  explicit TensorCache(size_t tensors);

  // The tensor entered device memory or was used: now the most recent.
  void Touch(TensorId id);
  // The tensor left device memory.
  void Remove(TensorId id);
  void Lock(TensorId id);
  void Unlock(TensorId id);
  bool locked(TensorId id) const { return locks_[id] > 0; }

  // Pins: the tensors a step (or a rebuild inside it) is using, locked and
  // touched, in the order pinned. A rebuild lifts its own pins and keeps
  // those before `mark` (pins() when it started).
  void Pin(TensorId id);
  size_t pins() const { return pinned_.size(); }
  void UnpinTo(size_t mark);
  void UnpinAll() { UnpinTo(0); }

  // Cached tensors, least recently used first, as (stamp, id).
  const std::set<std::pair<int64_t, TensorId>>& order() const { return order_; }

 private:
  std::vector<int64_t> stamp_;  // last use; -1 when not cached
  std::vector<int> locks_;
  std::set<std::pair<int64_t, TensorId>> order_;  // (stamp, id), oldest first
  int64_t clock_ = 0;
  std::vector<TensorId> pinned_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_TENSOR_CACHE_H_
