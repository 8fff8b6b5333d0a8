#include "memory/eviction/eviction.h"

namespace spill {

Registry<EvictionInfo>& EvictionRules() {
  static auto* registry = new Registry<EvictionInfo>("eviction rule", "rules");
  return *registry;
}

bool RegisterEviction(EvictionInfo info) { return EvictionRules().Add(std::move(info)); }

std::vector<std::string> EvictionNames() { return EvictionRules().Names(); }

StatusOr<std::unique_ptr<EvictionPolicy>> CreateEviction(const std::string& name,
                                                         const Schedule& schedule) {
  SPILL_ASSIGN_OR_RETURN(const EvictionInfo* info, EvictionRules().Get(name));
  return info->create(schedule);
}

}  // namespace spill
