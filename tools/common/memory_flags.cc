#include "tools/common/memory_flags.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <vector>

#include "framework/units.h"
#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/recompute_policy.h"
#include "memory/sim/device_profile.h"
#include "memory/workspace_selector.h"

namespace spill {
namespace {

// Sets what `text` says in `options`; the error says what was expected.
using ApplyFn = std::function<Status(const std::string& text, MemoryOptions* options)>;
// Refuses a value the tool cannot use (empty: it can use every value).
using UsableFn = std::function<Status(const std::string& text, const MemoryFlagsUse& use)>;

// One memory flag.
struct Entry {
  const char* name;       // "--allocator"
  const char* type_name;  // for --help
  std::string help;       // with its default, unless `tool_default` gives it
  ApplyFn apply;
  UsableFn usable;
  // A switch: given alone it means true (--compact, --compact false).
  bool is_switch = false;
  // The tool states this flag's default (null: `help` does).
  const std::string MemoryFlagsUse::*tool_default = nullptr;
  // Added to the help of the tools that search the window scheduler's budget.
  std::string search_help;
};

// An old spelling: `alias` is `flag` given `value`.
struct Alias {
  const char* alias;
  const char* flag;
  const char* value;
};

const Alias kAliases[] = {{"--no-compact", "--compact", "false"}};

// --window-budget search: the tools that search step the window scheduler's
// budget from 1x down themselves (tools/planning/experiments.cc).
constexpr char kSearch[] = "search";

std::string Joined(const std::vector<std::string>& names, const char* separator = ", ") {
  std::string text;
  for (const auto& n : names) text += (text.empty() ? "" : separator) + n;
  return text;
}

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
  return InvalidArgument("'" + text + "' is not one of: " + Joined(choices));
}

// A choice among fixed names that sets a string field.
ApplyFn ChoiceOf(std::vector<std::string> choices, std::string MemoryOptions::*field) {
  return [choices, field](const std::string& text, MemoryOptions* o) {
    SPILL_RETURN_IF_ERROR(OneOf(text, choices));
    o->*field = text;
    return Status::Ok();
  };
}

// A switch: empty (given alone) or true, or false.
ApplyFn SwitchOf(bool MemoryOptions::*field) {
  return [field](const std::string& text, MemoryOptions* o) {
    if (!text.empty() && text != "true" && text != "false") {
      return InvalidArgument("'" + text + "' is not true or false");
    }
    o->*field = text != "false";
    return Status::Ok();
  };
}

// A byte size within [min, max] that sets a size field.
ApplyFn BytesOf(size_t MemoryOptions::*field, size_t min) {
  return [field, min](const std::string& text, MemoryOptions* o) {
    SPILL_ASSIGN_OR_RETURN(o->*field, BytesIn(text, min, kUnlimitedBudget));
    return Status::Ok();
  };
}

// "1.5x" or bytes; a searching tool also takes "search".
ApplyFn SizeSettingOf(SizeSetting MemoryOptions::*field) {
  return [field](const std::string& text, MemoryOptions* o) {
    if (text == kSearch) return Status::Ok();  // the tool's search sets it
    SPILL_ASSIGN_OR_RETURN(o->*field, ParseSizeSetting(text));
    return Status::Ok();
  };
}

// The registered allocators with their summaries, one per line.
std::string AllocatorHelp() {
  std::string text =
      "how device requests are placed (default first_fit; dymem: gtbm, vdnn: best_fit):";
  for (const std::string& name : AllocatorNames()) {
    text += "\n    " + name + ": " + FindAllocator(name)->summary;
  }
  return text;
}

Status PlacesTensors(const std::string& text, const MemoryFlagsUse& use) {
  const AllocatorInfo* info = FindAllocator(text);
  if (!use.places_tensors || info == nullptr || !info->plan_only) return Status::Ok();
  return InvalidArgument("'" + text +
                         "' is plan only and cannot place tensors on a device, which this tool "
                         "does");
}

Status SearchesWindowBudget(const std::string& text, const MemoryFlagsUse& use) {
  if (text != kSearch || use.searches_window_budget) return Status::Ok();
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

// The mode, the budgets and where persistent state lives.
void AddBudgets(std::vector<Entry>* e) {
  e->push_back({"--memory", "MODE", "the memory mode: " + Joined(MemoryModeNames()),
                [](const std::string& t, MemoryOptions* o) { return ApplyMemoryMode(t, o); },
                nullptr, false, &MemoryFlagsUse::mode_default});
  e->push_back({"--device-memory", "SIZE", "the device budget",
                BytesOf(&MemoryOptions::device_budget, kPoolBlockBytes), nullptr, false,
                &MemoryFlagsUse::device_memory_default});
  e->push_back({"--host-memory", "SIZE", "host memory for what leaves the device",
                BytesOf(&MemoryOptions::host_budget, kPoolBlockBytes), nullptr, false,
                &MemoryFlagsUse::host_memory_default});
  e->push_back({"--host-tier", "TIER",
                "what backs host memory: ram (default) or file:DIR (a memory-mapped file in DIR, "
                "so that host memory may exceed RAM)",
                [](const std::string& t, MemoryOptions* o) {
                  MemoryOptions alone;  // the one check of the tier's form, on its own
                  alone.host_tier = t;
                  SPILL_RETURN_IF_ERROR(alone.Validate());
                  o->host_tier = t;
                  return Status::Ok();
                }});
  e->push_back({"--params", "PLACE",
                "where parameters, gradients and solver state live: device (default), host, "
                "above:SIZE or cache",
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_ASSIGN_OR_RETURN(o->params, ParseParamPlacement(t));
                  return Status::Ok();
                }});
  e->push_back({"--update", "WHERE",
                "where parameters kept in host memory are updated: device (default) or host",
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_RETURN_IF_ERROR(OneOf(t, {"device", "host"}));
                  o->update_on_host = t == "host";
                  return Status::Ok();
                },
                Trains});
}

// Placement in the device budget, and what the tensor cache evicts.
void AddPlacement(std::vector<Entry>* e) {
  e->push_back({"--allocator", "NAME", AllocatorHelp(),
                ChoiceOf(AllocatorNames(), &MemoryOptions::allocator), PlacesTensors});
  e->push_back({"--compact", "[true|false]",
                "slide live tensors down to close holes when an allocation finds none (default "
                "true; dymem, vdnn: false); false compares allocators by their footprint alone",
                SwitchOf(&MemoryOptions::compact), nullptr, true});
  e->push_back({"--eviction", "NAME",
                "the tensor cache's victim rule: " + Joined(EvictionNames()) + " (default lru)",
                ChoiceOf(EvictionNames(), &MemoryOptions::eviction)});
  e->push_back({"--va-chunk", "SIZE",
                "the va allocator's physical chunk, a multiple of 4KiB (default 2MiB)",
                [](const std::string& t, MemoryOptions* o) {
                  MemoryOptions alone;  // the one check of the chunk's alignment, on its own
                  SPILL_ASSIGN_OR_RETURN(alone.va_chunk, ParseBytes(t));
                  SPILL_RETURN_IF_ERROR(alone.Validate());
                  o->va_chunk = alone.va_chunk;
                  return Status::Ok();
                }});
}

// Workspace, recomputation, prefetch and batch slices.
void AddSteps(std::vector<Entry>* e) {
  e->push_back({"--workspace", "POLICY",
                "convolution algorithms and workspace: dynamic (default), fastest, "
                "memory_optimal, cap:SIZE or pin:NAME",
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_ASSIGN_OR_RETURN(o->workspace, ParseWorkspacePolicy(t));
                  return Status::Ok();
                }});
  e->push_back({"--recompute-strategy", "STRATEGY",
                "which outputs recomputation drops: cost_aware (default), speed or memory",
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_ASSIGN_OR_RETURN(o->recompute_strategy, ParseRecomputeStrategy(t));
                  return Status::Ok();
                },
                Trains});
  e->push_back({"--prefetch-ahead", "INT",
                "prefetch offloaded tensors N checkpoint layers ahead (default 1) [0, 1024]",
                [](const std::string& t, MemoryOptions* o) {
                  constexpr int64_t kMaxAhead = 1024;
                  auto n = ParseInt64(t);
                  if (!n.ok() || *n < 0 || *n > kMaxAhead) {
                    return InvalidArgument("'" + t + "' is not an integer in [0, 1024]");
                  }
                  o->prefetch_ahead = static_cast<int>(*n);
                  return Status::Ok();
                }});
  e->push_back(
      {"--chunk", "off|auto|N",
       "compute each step over slices of N images of the batch; auto: slice only the steps "
       "that do not fit, streamed through host memory (default off)",
       [](const std::string& t, MemoryOptions* o) {
         SPILL_ASSIGN_OR_RETURN(o->batch_chunk, ParseBatchChunk(t));
         return Status::Ok();
       }});
}

// The window scheduler and Dymem's switches.
void AddSchedulers(std::vector<Entry>* e) {
  e->push_back({"--window", "SIZE",
                "the window scheduler's look-ahead: a multiple of its budget (default 1.5x) or "
                "bytes",
                SizeSettingOf(&MemoryOptions::window)});
  e->push_back({"--window-budget", "SIZE",
                "the device bytes the window scheduler may fill: a multiple of the budget less "
                "persistent tensors and workspace (default 1x) or bytes",
                SizeSettingOf(&MemoryOptions::window_budget), SearchesWindowBudget, false, nullptr,
                "; or search: the largest multiple, from 1x down in steps of 0.05x, whose plan "
                "fits"});
  e->push_back({"--release", "NAME",
                "dymem: when offloaded tensors give their block back, lazy (default) or eager",
                ChoiceOf({"lazy", "eager"}, &MemoryOptions::release)});
  e->push_back({"--prefetch", "NAME",
                "dymem: how offloaded tensors come back, dymem (Algorithm 2, default) or ahead "
                "(one layer ahead, as vDNN)",
                ChoiceOf({"dymem", "ahead"}, &MemoryOptions::prefetch)});
  e->push_back({"--offload-set", "NAME",
                "dymem: what is offloaded, dymem (default) or conv (convolution inputs, as vDNN)",
                ChoiceOf({"dymem", "conv"}, &MemoryOptions::offload_set)});
  e->push_back({"--barrier", "[true|false]",
                "wait for every copy at the end of the step it overlapped (default false; vdnn: "
                "true)",
                SwitchOf(&MemoryOptions::barrier), nullptr, true});
  e->push_back({"--min-offload", "SIZE",
                "offload no tensor smaller than this, nor place it by mobility (default 1MiB)",
                BytesOf(&MemoryOptions::min_offload_bytes, 1)});
}

// An integer in [min, max] that sets `set`'s field.
ApplyFn IntIn(int64_t min, int64_t max, const std::function<void(int64_t, MemoryOptions*)>& set) {
  return [min, max, set](const std::string& t, MemoryOptions* o) {
    auto n = ParseInt64(t);
    if (!n.ok() || *n < min || *n > max) {
      return InvalidArgument("'" + t + "' is not an integer in [" + std::to_string(min) + ", " +
                             std::to_string(max) + "]");
    }
    set(*n, o);
    return Status::Ok();
  };
}

// A number that sets a planner setting, checked by PlannerSettings::Validate.
ApplyFn PlannerNumber(double PlannerSettings::*field) {
  return [field](const std::string& t, MemoryOptions* o) {
    char* end = nullptr;
    const double value = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size())
      return InvalidArgument("'" + t + "' is not a number");
    PlannerSettings alone = o->planner;
    alone.*field = value;
    SPILL_RETURN_IF_ERROR(alone.Validate());
    o->planner = alone;
    return Status::Ok();
  };
}

// The LMS count knob and the searching planners (memory/planners/).
void AddPlanners(std::vector<Entry>* e) {
  e->push_back(
      {"--lms-count", "INT",
       "lms: at most N tensors swap, the largest or earliest (--lms-order); 0: all "
       "(default)",
       IntIn(0, 1 << 20, [](int64_t n, MemoryOptions* o) { o->lms_count = static_cast<int>(n); })});
  e->push_back({"--lms-order", "NAME",
                "lms: which tensors --lms-count keeps, largest (default) or "
                "earliest",
                ChoiceOf({"largest", "earliest"}, &MemoryOptions::lms_order)});
  e->push_back({"--planner-limit", "SIZE",
                "dqn, greedy, milp: the most device memory the plan may use (default: the device "
                "budget)",
                [](const std::string& t, MemoryOptions* o) {
                  SPILL_ASSIGN_OR_RETURN(o->planner.limit,
                                         BytesIn(t, kPoolBlockBytes, kUnlimitedBudget));
                  return Status::Ok();
                }});
  e->push_back({"--planner-episodes", "INT", "dqn: training episodes (default 300)",
                IntIn(1, kMaxPlannerEpisodes, [](int64_t n, MemoryOptions* o) {
                  o->planner.episodes = static_cast<int>(n);
                })});
  e->push_back({"--planner-seed", "INT", "dqn: the seed of its exploration and weights (default 1)",
                IntIn(0, std::numeric_limits<int64_t>::max(), [](int64_t n, MemoryOptions* o) {
                  o->planner.seed = static_cast<uint64_t>(n);
                })});
  e->push_back({"--planner-embedding", "INT", "dqn: node embedding width p (default 32)",
                IntIn(kMinEmbedding, kMaxEmbedding, [](int64_t n, MemoryOptions* o) {
                  o->planner.embedding = static_cast<int>(n);
                })});
  e->push_back({"--planner-gamma", "NUMBER", "dqn: reward decay in [0, 1] (default 1)",
                PlannerNumber(&PlannerSettings::gamma)});
  e->push_back({"--planner-lr", "NUMBER", "dqn: Adam's learning rate (default 0.001)",
                PlannerNumber(&PlannerSettings::lr)});
  e->push_back({"--planner-profile", "NAME",
                "dqn, greedy, milp: the device profile plans are timed on (default "
                "gtx1080ti-pcie3)",
                [](const std::string& t, MemoryOptions* o) {
                  if (t == "cpu") {
                    return InvalidArgument(
                        "'cpu' is measured, not a spec sheet; name a GPU "
                        "profile");
                  }
                  SPILL_RETURN_IF_ERROR(FindDeviceProfile(t).status());
                  o->planner.profile = t;
                  return Status::Ok();
                }});
  e->push_back({"--planner-model", "FILE", "dqn: start from the weights a training saved",
                [](const std::string& t, MemoryOptions* o) {
                  o->planner.model = t;
                  return Status::Ok();
                }});
  e->push_back({"--planner-cache", "DIR",
                "dqn: keep trained plans and weights in DIR, keyed by network, limit and settings",
                [](const std::string& t, MemoryOptions* o) {
                  o->planner.cache = t;
                  return Status::Ok();
                }});
  e->push_back({"--planner-segment", "INT",
                "memonger: layers per segment (default 0: the square root of the layers)",
                IntIn(0, kMaxSegment, [](int64_t n, MemoryOptions* o) {
                  o->planner.segment = static_cast<int>(n);
                })});
  e->push_back({"--planner-milp-seconds", "NUMBER", "milp: CBC's time limit (default 600)",
                PlannerNumber(&PlannerSettings::milp_seconds)});
}

const std::vector<Entry>& Entries() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> e;
    AddBudgets(&e);
    AddPlacement(&e);
    AddSteps(&e);
    AddSchedulers(&e);
    AddPlanners(&e);
    return e;
  }();
  return entries;
}

std::string HelpOf(const Entry& entry, const MemoryFlagsUse& use) {
  std::string help = entry.help;
  if (entry.tool_default != nullptr) help += " (default: " + use.*entry.tool_default + ")";
  if (use.searches_window_budget) help += entry.search_help;
  for (const Alias& a : kAliases) {
    if (entry.name == std::string(a.flag)) {
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
    auto check = [this, &entry, use](const std::string& text) {
      MemoryOptions scratch;
      Status status = entry.apply(text, &scratch);
      if (status.ok() && entry.usable) status = entry.usable(text, use);
      if (!status.ok()) throw CLI::ValidationError(entry.name, status.message());
      values_[entry.name] = text;
    };
    std::string type_name = entry.type_name;
    if (use.searches_window_budget && !entry.search_help.empty()) type_name += "|search";
    CLI::Option* option =
        flags.app()
            .add_option_function<std::string>(entry.name, check, HelpOf(entry, use))
            ->type_name(type_name)
            ->group(use.heading);
    if (entry.is_switch) option->expected(0, 1);
    declared[entry.name] = option;
  }
  for (const Alias& a : kAliases) DeclareAlias(flags, a, declared.at(a.flag), &values_);
}

std::string MemoryFlags::Value(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::string() : it->second;
}

Status MemoryFlags::Apply(MemoryOptions* options) const {
  for (const Entry& entry : Entries()) {
    auto it = values_.find(entry.name);
    if (it == values_.end()) continue;
    SPILL_RETURN_IF_ERROR(entry.apply(it->second, options).WithContext(entry.name));
  }
  return Status::Ok();
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
