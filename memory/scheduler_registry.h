// The scheduler seam: who makes the transfer plans (memory/transfer_plan.h)
// of a run. A scheduler turns a network and the memory options into the
// plans of both phases; `superneurons` (the default) composes liveness,
// eager offload with prefetch ahead, cost-aware recomputation and the tensor
// cache from the option switches, the others (memory/schedulers/,
// memory/planners/) register themselves next to their code with their
// settings and what the rest of spill may know of them - so no code outside
// a scheduler names it.
//
// The registry knows MemoryOptions only by name (it is declared, not
// included): the options check their scheduler here, and schedulers read
// the options.
#ifndef SPILL_MEMORY_SCHEDULER_REGISTRY_H_
#define SPILL_MEMORY_SCHEDULER_REGISTRY_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/base/registry.h"
#include "framework/base/status.h"
#include "framework/schedule/network_view.h"
#include "memory/settings.h"
#include "memory/transfer_plan.h"

namespace spill {

struct MemoryOptions;

using TransferScheduler =
    std::function<StatusOr<PhasePlans>(const NetworkView& view, const MemoryOptions& options)>;

// What a scheduler that searches says of its search, for `plan`: a line of
// text and the same as a JSON object.
struct SearchReport {
  std::string text;
  nlohmann::ordered_json json;
};
using SearchReporter =
    std::function<StatusOr<SearchReport>(const NetworkView& view, const MemoryOptions& options)>;

struct SchedulerInfo {
  std::string name;
  std::string summary;
  TransferScheduler plan;
  // Its keys of the memory: section (memory/settings.h), read from
  // MemoryOptions::settings. A `searchable` one is a share of the device
  // budget that widest and deepest search (the window scheduler's budget).
  std::vector<SettingSpec> settings;
  // For planners that search (empty for the others): what `plan` prints of
  // the search before the plan.
  SearchReporter report;
};

Registry<SchedulerInfo>& Schedulers();
bool RegisterScheduler(SchedulerInfo info);
std::vector<std::string> SchedulerNames();
// The settings of the scheduler `name` that are a share of the device
// budget the tools may search (none when it is not registered).
std::vector<SettingSpec> SearchableSettings(const std::string& name);

}  // namespace spill

#endif  // SPILL_MEMORY_SCHEDULER_REGISTRY_H_
