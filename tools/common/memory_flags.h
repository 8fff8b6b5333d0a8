// The memory-policy flags, declared once for every tool that plans or runs a
// training iteration (plan, deepest, widest, bench_train, train, eval): one
// spelling per option, the same check and the same --help line in every tool, and one
// function that applies them to MemoryOptions. The flags are made from the
// memory schema (memory/memory_options.h MemoryKeys, and the settings each
// policy registers next to its code): a key `window_budget` is the flag
// --window-budget, with the key's help, default and check, so a policy's
// new setting is a flag in every tool without an edit here.
//
// Invariants:
//  * A value is checked when the flags are parsed: a bad one is an error that
//    names the flag and what was expected, before any work is done.
//  * A value a tool cannot use is refused, never ignored: `search` for a
//    searchable setting outside the tools that search, a plan-only
//    allocator in a tool that always places tensors on a device, settings
//    that act on training only in eval, which runs no backward pass or
//    update. A flag the chosen mode does not read is an error naming the
//    mode (MemoryOptions::Validate).
//  * Old spellings stay as hidden aliases (--no-compact is --compact false);
//    the canonical flag's --help names them.
//  * Apply() sets only what was given, in the table's order (--memory first,
//    since a mode resets the allocator and compaction), so a tool's defaults
//    and a config's memory: section hold for everything else: a flag given
//    overrides the config, a flag not given leaves the config's value.
#ifndef SPILL_TOOLS_COMMON_MEMORY_FLAGS_H_
#define SPILL_TOOLS_COMMON_MEMORY_FLAGS_H_

#include <map>
#include <string>

#include "framework/base/status.h"
#include "memory/memory_options.h"
#include "tools/common/cli.h"

namespace spill {

// How a tool uses the memory flags: the defaults its --help states for the
// settings whose default is the tool's, and what it does with them.
struct MemoryFlagsUse {
  std::string heading;                // the --help section
  std::string mode_default;           // --memory
  std::string device_memory_default;  // --device-memory
  std::string host_memory_default;    // --host-memory
  // The tool searches the settings that can be searched (the window
  // scheduler's budget: --window-budget search).
  bool searches = false;
  // The tool always places tensors on a device: plan-only allocators are refused.
  bool places_tensors = false;
  // The tool runs backward passes and solver updates; one that only
  // evaluates refuses the flags that act on them alone (--update,
  // --recompute-strategy).
  bool trains = true;
};

// The use of a tool with defaults of its own (no config to override).
MemoryFlagsUse ToolMemoryFlagsUse(const std::string& mode, size_t device_budget,
                                  size_t host_budget);

// The use of a tool that reads a training config (train, eval): the flags
// override its memory: section, so the defaults --help states are the config's.
MemoryFlagsUse ConfigMemoryFlagsUse();

class MemoryFlags {
 public:
  // Declares every memory flag on `flags`. The flags write into this object
  // while they are parsed: it must stay where it is until then.
  void Declare(Flags& flags, const MemoryFlagsUse& use);

  // A flag's value as given ("--allocator"), or empty when it was not.
  std::string Value(const std::string& flag) const;
  // --memory as given; empty: the tool's default.
  std::string mode() const { return Value("--memory"); }
  // Whether the searchable setting `key` was given as "search".
  bool Searched(const std::string& key) const;

  // Sets in `options` what the flags gave, nothing else, then (with
  // `check_read`) checks that the mode reads every key given, by flag or by
  // the config before (CheckKeysRead). Does not validate the combination:
  // call options->Validate() after the tool's own settings.
  Status Apply(MemoryOptions* options, bool check_read = true) const;

 private:
  std::map<std::string, std::string> values_;
};

// An error naming --allocator when `options`' allocator only plans and
// cannot place tensors on a device; `why` says what needs a device.
Status CheckAllocatorPlaces(const MemoryOptions& options, const std::string& why);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_MEMORY_FLAGS_H_
