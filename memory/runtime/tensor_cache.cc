#include "memory/runtime/tensor_cache.h"

#include "framework/base/check.h"

namespace spill {

TensorCache::TensorCache(size_t tensors) : stamp_(tensors, -1), locks_(tensors, 0) {}

void TensorCache::Touch(TensorId id) {
  if (stamp_[id] >= 0) order_.erase({stamp_[id], id});
  stamp_[id] = clock_++;
  order_.insert({stamp_[id], id});
}

void TensorCache::Remove(TensorId id) {
  if (stamp_[id] < 0) return;
  order_.erase({stamp_[id], id});
  stamp_[id] = -1;
}

void TensorCache::Lock(TensorId id) { ++locks_[id]; }

void TensorCache::Unlock(TensorId id) {
  SPILL_CHECK_GT(locks_[id], 0) << "unlock of an unlocked tensor";
  --locks_[id];
}

void TensorCache::Pin(TensorId id) {
  Lock(id);
  Touch(id);
  pinned_.push_back(id);
}

void TensorCache::UnpinTo(size_t mark) {
  for (size_t i = mark; i < pinned_.size(); ++i) Unlock(pinned_[i]);
  pinned_.resize(mark);
}

}  // namespace spill
