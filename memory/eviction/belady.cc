// belady: the evictable tensor whose next use lies furthest ahead goes first
// (Belady's MIN). The step schedule is static, so every tensor's uses in a
// training iteration are known in advance; a tensor with no use left counts
// as used never. Ties go to the least recently used.
#include <algorithm>
#include <climits>

#include "memory/eviction/eviction.h"

namespace spill {
namespace {

class BeladyEviction : public EvictionPolicy {
 public:
  explicit BeladyEviction(const Schedule& schedule) : uses_(schedule.tensors.size()) {
    for (const Step& step : schedule.steps) {
      for (const auto* list : {&step.reads, &step.writes, &step.saved, &step.accumulates}) {
        for (TensorId t : *list) {
          if (uses_[t].empty() || uses_[t].back() != step.index) uses_[t].push_back(step.index);
        }
      }
    }
  }

  const char* name() const override { return "belady"; }

  TensorId Victim(const TensorCache& cache, const std::function<bool(TensorId)>& evictable,
                  int step) const override {
    TensorId victim = kNoTensor;
    int furthest = -1;
    for (const auto& [stamp, id] : cache.order()) {
      if (cache.locked(id) || !evictable(id)) continue;
      const int next = NextUse(id, step);
      if (next > furthest) {  // strict: ties keep the older tensor
        furthest = next;
        victim = id;
      }
    }
    return victim;
  }

 private:
  // The first use after `step`, or INT_MAX when there is none.
  int NextUse(TensorId id, int step) const {
    const std::vector<int>& uses = uses_[id];
    auto it = std::upper_bound(uses.begin(), uses.end(), step);
    return it == uses.end() ? INT_MAX : *it;
  }

  std::vector<std::vector<int>> uses_;  // per tensor: steps that use it, increasing
};

const bool kBelady = RegisterEviction(
    {"belady", "furthest next use first (optimal offline rule; the schedule is static)",
     [](const Schedule& s) { return std::unique_ptr<EvictionPolicy>(new BeladyEviction(s)); }});

}  // namespace
}  // namespace spill
