#include "memory/scheduler_registry.h"

#include <utility>

namespace spill {

Registry<SchedulerInfo>& Schedulers() {
  static auto* registry = new Registry<SchedulerInfo>("scheduler", "schedulers");
  return *registry;
}

bool RegisterScheduler(SchedulerInfo info) {
  AddSettings("scheduler", info.name, info.settings);
  return Schedulers().Add(std::move(info));
}

std::vector<std::string> SchedulerNames() { return Schedulers().Names(); }

std::vector<SettingSpec> SearchableSettings(const std::string& name) {
  std::vector<SettingSpec> searchable;
  const SchedulerInfo* info = Schedulers().Find(name);
  if (info == nullptr) return searchable;
  for (const SettingSpec& spec : info->settings) {
    if (spec.searchable) searchable.push_back(spec);
  }
  return searchable;
}

}  // namespace spill
