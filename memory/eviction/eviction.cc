#include "memory/eviction/eviction.h"

#include <map>

#include "framework/strings.h"

namespace spill {
namespace {

std::map<std::string, EvictionInfo>& Registry() {
  static auto* registry = new std::map<std::string, EvictionInfo>();
  return *registry;
}

}  // namespace

bool RegisterEviction(EvictionInfo info) {
  const std::string name = info.name;
  SPILL_CHECK(Registry().count(name) == 0) << "eviction rule '" << name << "' registered twice";
  Registry()[name] = std::move(info);
  return true;
}

std::vector<std::string> EvictionNames() {
  std::vector<std::string> names;
  for (const auto& [name, info] : Registry()) names.push_back(name);
  return names;
}

StatusOr<std::unique_ptr<EvictionPolicy>> CreateEviction(const std::string& name,
                                                         const Schedule& schedule) {
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    return InvalidArgument("unknown eviction rule '" + name +
                           "'; known rules: " + Join(EvictionNames()));
  }
  return it->second.create(schedule);
}

}  // namespace spill
