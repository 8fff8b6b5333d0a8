#include "memory/runtime/deferred_releases.h"

#include "memory/recompute_policy.h"

namespace spill {

DeferredReleases::DeferredReleases(const Schedule& schedule)
    : schedule_(schedule),
      rebuild_refs_(schedule.tensors.size(), 0),
      holds_sources_(schedule.tensors.size(), false),
      deferred_(schedule.tensors.size(), false) {}

bool DeferredReleases::Defer(TensorId id) {
  if (rebuild_refs_[id] == 0) return false;
  deferred_[id] = true;
  return true;
}

void DeferredReleases::HoldSources(TensorId id) {
  if (holds_sources_[id]) return;
  holds_sources_[id] = true;
  for (TensorId x : RebuildSources(schedule_, id)) ++rebuild_refs_[x];
}

// A source released here unreferences its own sources first, then goes - a
// chain as long as a segment of dropped tensors, so walked on an explicit
// stack (in the order nested calls would take).
void DeferredReleases::Unreference(TensorId id, const std::function<void(TensorId)>& free) {
  if (!holds_sources_[id]) return;
  holds_sources_[id] = false;
  struct Frame {
    TensorId tensor;
    std::vector<TensorId> sources;
    size_t next;
  };
  std::vector<Frame> stack;
  stack.push_back({id, RebuildSources(schedule_, id), 0});
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.sources.size()) {
      const TensorId done = f.tensor;
      stack.pop_back();
      if (!stack.empty()) free(done);  // `id` itself stays
      continue;
    }
    const TensorId x = f.sources[f.next++];
    if (--rebuild_refs_[x] != 0 || !deferred_[x]) continue;
    if (holds_sources_[x]) {  // its sources first
      holds_sources_[x] = false;
      stack.push_back({x, RebuildSources(schedule_, x), 0});  // `f` dangles from here
    } else {
      free(x);
    }
  }
}

TensorId DeferredReleases::TakeOldestLazyOffload() {
  if (lazy_offloads_.empty()) return kNoTensor;
  const TensorId id = lazy_offloads_.front();
  lazy_offloads_.pop_front();
  return id;
}

}  // namespace spill
