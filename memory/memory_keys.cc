// The schema of the memory: section: the keys every policy shares
// (MemoryKeys), then the settings each policy registers next to its code
// (memory/settings.h). The YAML reader, the flags, Validate and Describe
// are made from it, so a policy's keys are never listed here.
#include <algorithm>

#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/memory_options.h"
#include "memory/scheduler_registry.h"

namespace spill {
namespace {

StatusOr<size_t> BytesIn(const std::string& text, size_t min, size_t max) {
  SPILL_ASSIGN_OR_RETURN(size_t bytes, ParseBytes(text));
  if (bytes < min || bytes > max) {
    return InvalidArgument("'" + text + "' is outside [" + FormatBytes(static_cast<double>(min)) +
                           ", " + FormatBytes(static_cast<double>(max)) + "]");
  }
  return bytes;
}

Status OneOf(const std::string& text, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return Status::Ok();
  return InvalidArgument("'" + text + "' is not one of: " + Join(choices));
}

using Apply = std::function<Status(const std::string& text, MemoryOptions* options)>;

// A switch: true or false.
Apply SwitchOf(bool MemoryOptions::*field) {
  return [field](const std::string& text, MemoryOptions* o) {
    if (text != "true" && text != "false") {
      return InvalidArgument("'" + text + "' is not true or false");
    }
    o->*field = text == "true";
    return Status::Ok();
  };
}

// A name among `names()` (a registry's, read when the key is set).
Apply NameOf(std::string MemoryOptions::*field, std::vector<std::string> (*names)()) {
  return [field, names](const std::string& text, MemoryOptions* o) {
    SPILL_RETURN_IF_ERROR(OneOf(text, names()));
    o->*field = text;
    return Status::Ok();
  };
}

// A byte size of at least a pool block.
Apply BudgetOf(size_t MemoryOptions::*field) {
  return [field](const std::string& text, MemoryOptions* o) {
    SPILL_ASSIGN_OR_RETURN(o->*field, BytesIn(text, kPoolBlockBytes, kUnlimitedBudget));
    return Status::Ok();
  };
}

// A value parsed by `parse` into `field`.
template <typename T>
Apply ParsedOf(T MemoryOptions::*field, StatusOr<T> (*parse)(const std::string&)) {
  return [field, parse](const std::string& text, MemoryOptions* o) {
    SPILL_ASSIGN_OR_RETURN(o->*field, parse(text));
    return Status::Ok();
  };
}

// Bytes as the shortest exact text: "8GiB", "1536MiB", "1000B".
std::string ExactBytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (unit < 5 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + units[unit];
}

// The shared keys' defaults are a default MemoryOptions' values
// (memory_options.h states them once).
const MemoryOptions& Defaults() {
  static const MemoryOptions* defaults = new MemoryOptions();
  return *defaults;
}

SettingSpec Spec(const char* key, SettingKind kind, std::string fallback, std::string help,
                 const char* flag = "", const char* type_name = "") {
  SettingSpec spec;
  spec.key = key;
  spec.kind = kind;
  spec.fallback = std::move(fallback);
  spec.help = std::move(help);
  spec.flag = flag;
  spec.type_name = type_name;
  return spec;
}

std::string ModeHelp() {
  std::string text = "the memory mode:";
  for (const MemoryMode& m : MemoryModes())
    text += "\n    " + std::string(m.name) + ": " + m.summary;
  return text;
}

std::string AllocatorHelp() {
  std::string text = "how device requests are placed (dymem: gtbm, vdnn: best_fit):";
  for (const std::string& name : AllocatorNames()) {
    text += "\n    " + name + ": " + FindAllocator(name)->summary;
  }
  return text;
}

// The mode, the budgets and where persistent state lives.
void AddBudgets(std::vector<MemoryKey>* k) {
  k->push_back({Spec("mode", SettingKind::kChoice, Defaults().mode, ModeHelp(), "--memory", "MODE"),
                [](const std::string& t, MemoryOptions* o) { return ApplyMemoryMode(t, o); }});
  k->push_back({Spec("device_budget", SettingKind::kBytes, ExactBytes(Defaults().device_budget),
                     "the device budget", "--device-memory"),
                BudgetOf(&MemoryOptions::device_budget)});
  k->push_back({Spec("host_budget", SettingKind::kBytes, ExactBytes(Defaults().host_budget),
                     "host memory for what leaves the device", "--host-memory"),
                BudgetOf(&MemoryOptions::host_budget)});
  k->push_back({Spec("host_tier", SettingKind::kChoice, Defaults().host_tier,
                     "what backs host memory: ram or file:DIR (a memory-mapped file in DIR, so "
                     "that host memory may exceed RAM)",
                     "", "TIER"),
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_RETURN_IF_ERROR(CheckHostTier(t));
                  o->host_tier = t;
                  return Status::Ok();
                }});
  k->push_back({Spec("params", SettingKind::kChoice, Defaults().params.ToString(),
                     "where parameters, gradients and solver state live: device, host, "
                     "above:SIZE or cache",
                     "", "PLACE"),
                ParsedOf(&MemoryOptions::params, ParseParamPlacement)});
  SettingSpec update =
      Spec("update", SettingKind::kChoice, Defaults().update_on_host ? "host" : "device",
           "where parameters kept in host memory are updated: device or host", "", "WHERE");
  update.training_only = true;
  k->push_back({update, [](const std::string& t, MemoryOptions* o) {
                  SPILL_RETURN_IF_ERROR(OneOf(t, {"device", "host"}));
                  o->update_on_host = t == "host";
                  return Status::Ok();
                }});
}

// Which policy runs each seam, and the technique switches.
void AddPolicies(std::vector<MemoryKey>* k) {
  k->push_back(
      {Spec("allocator", SettingKind::kChoice, Defaults().allocator, AllocatorHelp(), "", "NAME"),
       NameOf(&MemoryOptions::allocator, AllocatorNames)});
  k->push_back({Spec("compact", SettingKind::kBool, Defaults().compact ? "true" : "false",
                     "slide live tensors down to close holes when an allocation finds none "
                     "(dymem, vdnn: false); false compares allocators by their footprint alone"),
                SwitchOf(&MemoryOptions::compact)});
  k->push_back({Spec("eviction", SettingKind::kChoice, Defaults().eviction,
                     "the tensor cache's victim rule: " + Join(EvictionNames()), "", "NAME"),
                NameOf(&MemoryOptions::eviction, EvictionNames),
                [](const MemoryOptions& o) { return o.cache; }});
  k->push_back({Spec("scheduler", SettingKind::kChoice, Defaults().scheduler,
                     "who plans the transfers around each step: " + Join(SchedulerNames()) +
                         " (each mode names its own)",
                     "", "NAME"),
                NameOf(&MemoryOptions::scheduler, SchedulerNames)});
  for (auto [key, field] : {std::pair{"liveness", &MemoryOptions::liveness},
                            {"offload", &MemoryOptions::offload},
                            {"cache", &MemoryOptions::cache},
                            {"recompute", &MemoryOptions::recompute}}) {
    k->push_back({Spec(key, SettingKind::kBool, "",
                       std::string("the ") + key + " technique on or off (the mode sets it)"),
                  SwitchOf(field)});
  }
}

// Workspace and batch slices.
void AddSteps(std::vector<MemoryKey>* k) {
  k->push_back({Spec("workspace", SettingKind::kChoice, Defaults().workspace.ToString(),
                     "convolution algorithms and workspace: dynamic, fastest, memory_optimal, "
                     "cap:SIZE or pin:NAME",
                     "", "POLICY"),
                ParsedOf(&MemoryOptions::workspace, ParseWorkspacePolicy)});
  k->push_back({Spec("chunk", SettingKind::kChoice, BatchChunkName(Defaults().batch_chunk),
                     "compute each step over slices of N images of the batch; auto: slice only "
                     "the steps that do not fit, streamed through host memory",
                     "", "off|auto|N"),
                ParsedOf(&MemoryOptions::batch_chunk, ParseBatchChunk)});
  k->push_back(
      {Spec("stream_buffers", SettingKind::kChoice, std::to_string(Defaults().stream_buffers),
            "slices per staging block of a streamed step: 2 copies the next slice in "
            "and the last one out while a slice computes, 1 alternates copies and "
            "compute",
            "", "1|2"),
       [](const std::string& t, MemoryOptions* o) {
         auto buffers = ParseInt64(t);
         if (!buffers.ok()) return InvalidArgument("'" + t + "' is not 1 or 2");
         SPILL_RETURN_IF_ERROR(CheckStreamBuffers(*buffers));
         o->stream_buffers = static_cast<int>(*buffers);
         return Status::Ok();
       },
       [](const MemoryOptions& o) { return o.batch_chunk != kBatchChunkOff; }});
}

const MemoryKey* FindMemoryKey(const std::string& key) {
  for (const MemoryKey& k : MemoryKeys()) {
    if (k.spec.key == key) return &k;
  }
  return nullptr;
}

// Whether the techniques `options` turns on are those the setting is read under.
bool TechniqueOn(const MemoryOptions& options, SettingUse use) {
  switch (use) {
    case SettingUse::kAlways:
      return true;
    case SettingUse::kWithOffload:
      return options.offload;
    case SettingUse::kWithRecompute:
      return options.recompute;
  }
  return true;
}

// Whether a chosen policy reads a registered policy setting (whatever the
// technique switches).
bool PolicyReads(const MemoryOptions& options, const RegisteredSetting& setting) {
  for (const SettingReader& r : setting.readers) {
    if ((r.seam == "scheduler" && r.name == options.scheduler) ||
        (r.seam == "allocator" && r.name == options.allocator)) {
      return true;
    }
  }
  return false;
}

// Why `options` leave a registered setting unread; empty when they read it.
std::string WhyUnread(const MemoryOptions& options, const RegisteredSetting& setting) {
  if (!PolicyReads(options, setting)) {
    return "it is a setting of " + DescribeReaders(setting) + "; this mode plans with the " +
           options.scheduler + " scheduler and places with the " + options.allocator + " allocator";
  }
  if (TechniqueOn(options, setting.spec.use)) return "";
  const bool offload = setting.spec.use == SettingUse::kWithOffload;
  const std::string does = offload ? "offloads" : "recomputes";
  return "the " + options.scheduler + " scheduler reads it only when it " + does +
         ", and this mode " + does + " nothing; " + (offload ? "offload" : "recompute") +
         ": true or a mode that " + does + " does";
}

}  // namespace

const std::vector<MemoryKey>& MemoryKeys() {
  static const auto* keys = [] {
    auto* k = new std::vector<MemoryKey>();
    AddBudgets(k);
    AddPolicies(k);
    AddSteps(k);
    return k;
  }();
  return *keys;
}

bool IsMemoryKey(const std::string& key) {
  return FindMemoryKey(key) != nullptr || FindSetting(key) != nullptr;
}

Status SetMemoryKey(const std::string& key, const std::string& text, const std::string& where,
                    MemoryOptions* options) {
  if (const MemoryKey* shared = FindMemoryKey(key)) {
    SPILL_RETURN_IF_ERROR(shared->apply(text, options));
  } else {
    SPILL_RETURN_IF_ERROR(options->settings.Set(key, text));
  }
  options->given[key] = where;
  return Status::Ok();
}

Status CheckKeysRead(const MemoryOptions& options) {
  for (const auto& [key, where] : options.given) {
    const MemoryKey* shared = FindMemoryKey(key);
    if (shared != nullptr) {
      if (!shared->read || shared->read(options)) continue;
      return InvalidArgument(where + ": mode '" + options.mode +
                             "' does not read it (it chooses the tensor cache's victims, and "
                             "this mode has no tensor cache)");
    }
    const RegisteredSetting* setting = PolicySettingRegistry().Find(key);
    if (setting == nullptr) continue;
    const std::string why = WhyUnread(options, *setting);
    if (why.empty()) continue;
    return InvalidArgument(where + ": mode '" + options.mode + "' does not read it (" + why + ")");
  }
  return Status::Ok();
}

bool ReadsKey(const MemoryOptions& options, const std::string& key) {
  if (const MemoryKey* shared = FindMemoryKey(key)) return !shared->read || shared->read(options);
  const RegisteredSetting* setting = PolicySettingRegistry().Find(key);
  return setting != nullptr && WhyUnread(options, *setting).empty();
}

std::string DescribeSettings(const MemoryOptions& options, const std::string& seam,
                             const std::string& name, bool every) {
  std::string text;
  for (const auto& [key, setting] : PolicySettingRegistry().entries()) {
    bool reads = false;
    for (const SettingReader& r : setting.readers) reads |= r.seam == seam && r.name == name;
    const std::string value = options.settings.Text(setting.spec);
    if (!reads || (!every && value == setting.spec.fallback)) continue;
    text += (text.empty() ? "" : ", ") + key + " " + value;
  }
  return text.empty() ? "" : " (" + text + ")";
}

}  // namespace spill
