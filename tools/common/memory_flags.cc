#include "tools/common/memory_flags.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <vector>

#include "framework/base/units.h"
#include "memory/allocators/allocator.h"
#include "memory/settings.h"

namespace spill {
namespace {

// Refuses a value the tool cannot use (empty: it can use every value).
using UsableFn = std::function<Status(const std::string& text, const MemoryFlagsUse& use)>;

// One memory flag: a key of the memory schema (memory/memory_options.h).
struct Entry {
  SettingSpec spec;
  std::string readers;  // "the window scheduler" for a policy's setting; empty when shared
  UsableFn usable;
  // The tool states this flag's default (null: the spec's).
  const std::string MemoryFlagsUse::*tool_default = nullptr;
};

// An old spelling: `alias` is `flag` given `value`.
struct Alias {
  const char* alias;
  const char* flag;
  const char* value;
};

const Alias kAliases[] = {{"--no-compact", "--compact", "false"}};

// A searchable setting given as "search": the tools that search step it
// themselves (tools/planning/experiments.cc).
constexpr char kSearch[] = "search";

Status PlacesTensors(const std::string& text, const MemoryFlagsUse& use) {
  const AllocatorInfo* info = FindAllocator(text);
  if (!use.places_tensors || info == nullptr || !info->plan_only) return Status::Ok();
  return InvalidArgument("'" + text +
                         "' is plan only and cannot place tensors on a device, which this tool "
                         "does");
}

Status Searches(const std::string& text, const MemoryFlagsUse& use) {
  if (text != kSearch || use.searches) return Status::Ok();
  return InvalidArgument(
      "'search' is for the tools that search (deepest, widest); give a multiple such as 0.8x "
      "or bytes");
}

// Refuses every value in a tool that only evaluates.
Status Trains(const std::string& text, const MemoryFlagsUse& use) {
  if (use.trains) return Status::Ok();
  return InvalidArgument("'" + text +
                         "' acts on backward passes and solver updates, and this tool runs "
                         "neither");
}

Entry EntryOf(const SettingSpec& spec, std::string readers) {
  Entry e{spec, std::move(readers), nullptr, nullptr};
  if (spec.training_only) e.usable = Trains;
  if (spec.searchable) e.usable = Searches;
  return e;
}

// The shared keys in the schema's order (--memory first, since a mode
// resets the allocator and compaction), then every policy's settings.
const std::vector<Entry>& Entries() {
  static const std::vector<Entry> entries = [] {
    // The defaults a tool states itself.
    const std::map<std::string, const std::string MemoryFlagsUse::*> tool_defaults = {
        {"mode", &MemoryFlagsUse::mode_default},
        {"device_budget", &MemoryFlagsUse::device_memory_default},
        {"host_budget", &MemoryFlagsUse::host_memory_default}};
    std::vector<Entry> e;
    for (const MemoryKey& key : MemoryKeys()) {
      e.push_back(EntryOf(key.spec, ""));
      auto tool = tool_defaults.find(key.spec.key);
      if (tool != tool_defaults.end()) e.back().tool_default = tool->second;
      if (key.spec.key == "allocator") e.back().usable = PlacesTensors;
    }
    for (const auto& [key, setting] : PolicySettingRegistry().entries()) {
      e.push_back(EntryOf(setting.spec, DescribeReaders(setting)));
    }
    return e;
  }();
  return entries;
}

std::string HelpOf(const Entry& entry, const MemoryFlagsUse& use) {
  std::string help = entry.spec.help;
  if (entry.tool_default != nullptr) {
    help += " (default: " + use.*entry.tool_default + ")";
  } else if (!entry.spec.fallback.empty()) {
    help += " (default " + entry.spec.fallback + ")";
  }
  if (!entry.readers.empty()) help += "; read by " + entry.readers;
  if (use.searches && entry.spec.searchable) {
    help += "; or search: the largest multiple, from 1x down in steps of 0.05x, whose plan fits";
  }
  for (const Alias& a : kAliases) {
    if (entry.spec.Flag() == std::string(a.flag)) {
      help += std::string(" (") + a.alias + ": the same as " + a.flag + " " + a.value + ")";
    }
  }
  return help;
}

// An old spelling: sets its flag's value, unless the flag is given too.
void DeclareAlias(Flags& flags, const Alias& alias, const CLI::Option* canonical,
                  std::map<std::string, std::string>* values) {
  const std::string name = alias.alias, flag = alias.flag, value = alias.value;
  flags.app()
      .add_flag_callback(
          name,
          [values, name, flag, value, canonical] {
            if (canonical->count() > 0) {
              throw CLI::ValidationError(name, "is " + flag + " " + value + "; give one of them");
            }
            (*values)[flag] = value;
          },
          "")
      ->group("");  // hidden: the canonical flag's help names it
}

}  // namespace

void MemoryFlags::Declare(Flags& flags, const MemoryFlagsUse& use) {
  std::map<std::string, CLI::Option*> declared;
  for (const Entry& entry : Entries()) {
    const std::string flag = entry.spec.Flag();
    const bool is_switch = entry.spec.kind == SettingKind::kBool;
    auto check = [this, &entry, use, flag, is_switch](const std::string& given) {
      // A switch given alone means true.
      const std::string text = is_switch && given.empty() ? "true" : given;
      Status status = entry.usable ? entry.usable(text, use) : Status::Ok();
      if (status.ok() && !(entry.spec.searchable && text == kSearch)) {
        MemoryOptions scratch;
        status = SetMemoryKey(entry.spec.key, text, flag, &scratch);
      }
      if (!status.ok()) throw CLI::ValidationError(flag, status.message());
      values_[flag] = text;
    };
    std::string type_name = entry.spec.TypeName();
    if (use.searches && entry.spec.searchable) type_name += "|search";
    CLI::Option* option = flags.app()
                              .add_option_function<std::string>(flag, check, HelpOf(entry, use))
                              ->type_name(type_name)
                              ->group(use.heading);
    if (is_switch) option->expected(0, 1);
    declared[flag] = option;
  }
  for (const Alias& a : kAliases) DeclareAlias(flags, a, declared.at(a.flag), &values_);
}

std::string MemoryFlags::Value(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::string() : it->second;
}

bool MemoryFlags::Searched(const std::string& key) const {
  const SettingSpec* spec = FindSetting(key);
  return spec != nullptr && spec->searchable && Value(spec->Flag()) == kSearch;
}

Status MemoryFlags::Apply(MemoryOptions* options, bool check_read) const {
  for (const Entry& entry : Entries()) {
    const std::string flag = entry.spec.Flag();
    auto it = values_.find(flag);
    if (it == values_.end()) continue;
    if (entry.spec.searchable && it->second == kSearch) {
      options->given[entry.spec.key] = flag;  // the tool's search sets it
      continue;
    }
    SPILL_RETURN_IF_ERROR(
        SetMemoryKey(entry.spec.key, it->second, flag, options).WithContext(flag));
  }
  return check_read ? CheckKeysRead(*options) : Status::Ok();
}

MemoryFlagsUse ToolMemoryFlagsUse(const std::string& mode, size_t device_budget,
                                  size_t host_budget) {
  MemoryFlagsUse use;
  use.heading = "Memory policy";
  use.mode_default = mode;
  use.device_memory_default = FormatBytes(static_cast<double>(device_budget));
  use.host_memory_default = FormatBytes(static_cast<double>(host_budget));
  return use;
}

MemoryFlagsUse ConfigMemoryFlagsUse() {
  MemoryFlagsUse use;
  use.heading = "Memory policy (overrides the config's memory: section)";
  use.mode_default = "the config's memory.mode";
  use.device_memory_default = "the config's memory.device_budget";
  use.host_memory_default = "the config's memory.host_budget";
  use.places_tensors = true;
  return use;
}

Status CheckAllocatorPlaces(const MemoryOptions& options, const std::string& why) {
  const AllocatorInfo* info = FindAllocator(options.allocator);
  if (info == nullptr || !info->plan_only) return Status::Ok();
  return InvalidArgument("--allocator: '" + options.allocator +
                         "' is plan only and cannot place tensors on a device, which " + why +
                         " does");
}

}  // namespace spill
