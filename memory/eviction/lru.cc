// lru: the least recently used evictable tensor goes first (SuperNeurons'
// tensor cache, Alg. 2). Every use of a tensor makes it the most recent.
#include "memory/eviction/eviction.h"

namespace spill {
namespace {

class LruEviction : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  TensorId Victim(const TensorCache& cache, const std::function<bool(TensorId)>& evictable,
                  int) const override {
    for (const auto& [stamp, id] : cache.order()) {
      if (!cache.locked(id) && evictable(id)) return id;
    }
    return kNoTensor;
  }
};

const bool kLru =
    RegisterEviction({"lru", "least recently used first (SuperNeurons)", [](const Schedule&) {
                        return std::unique_ptr<EvictionPolicy>(new LruEviction());
                      }});

}  // namespace
}  // namespace spill
