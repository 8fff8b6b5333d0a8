// The eviction seam: which tensor the tensor cache gives up when an
// allocation does not fit (SuperNeurons' LRU tensor cache, Alg. 2, with the
// victim rule as a policy). Chosen by name (`memory.eviction`, `--eviction`);
// each rule is one file with one registration line:
//
//   lru     least recently used first (SuperNeurons)
//   belady  furthest next use first: the schedule is static, so the optimal
//           offline rule is computable
//
// A rule only chooses: among the cached tensors for which the runtime says
// eviction is possible (unlocked, droppable or offloadable), it returns one.
// The runtime decides whether eviction drops or offloads, and the residency
// state machine performs it. Rules are deterministic functions of the
// schedule and the cache's order, so plans equal runs.
#ifndef SPILL_MEMORY_EVICTION_EVICTION_H_
#define SPILL_MEMORY_EVICTION_EVICTION_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/registry.h"
#include "framework/base/status.h"
#include "framework/schedule/schedule.h"
#include "memory/runtime/tensor_cache.h"

namespace spill {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // The tensor to evict before `step` runs, among the cached tensors for
  // which `evictable` holds; kNoTensor when there is none.
  virtual TensorId Victim(const TensorCache& cache, const std::function<bool(TensorId)>& evictable,
                          int step) const = 0;
};

using EvictionFactory = std::function<std::unique_ptr<EvictionPolicy>(const Schedule& schedule)>;

struct EvictionInfo {
  std::string name;
  std::string summary;
  EvictionFactory create;
};

Registry<EvictionInfo>& EvictionRules();
bool RegisterEviction(EvictionInfo info);
StatusOr<std::unique_ptr<EvictionPolicy>> CreateEviction(const std::string& name,
                                                         const Schedule& schedule);
std::vector<std::string> EvictionNames();

}  // namespace spill

#endif  // SPILL_MEMORY_EVICTION_EVICTION_H_
