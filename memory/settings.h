// Policy settings: each policy (an allocator, a scheduler) owns its keys of
// the `memory:` section and their flags, declared once next to its code as
// SettingSpecs - key, kind, range or choices, default, help - and handed to
// its registration. From that one schema come the YAML reader
// (tools/trainer/train_config.cc), the flag table (tools/common/
// memory_flags.cc), the checks, MemoryOptions::Describe and --help; no
// shared struct, reader or flag table names a policy's key.
//
//   const SettingSpec kThreshold = {"lms_threshold", SettingKind::kInt, "4",
//                                   "swap when the next use is this many steps away", 2, 1 << 20};
//   ... RegisterScheduler({"lms", "summary", Plan, {kThreshold, kAhead}});
//   ... options.settings.Int(kThreshold)   // the value given, or the default
//
// A key may be read by several policies (memory.min_offload: the dymem
// scheduler and the GTBM allocator); each lists the same spec. Values are
// kept as checked text, so options copy, compare and print as they were
// given; reads parse them (settings are read when plans are made, not per
// step).
#ifndef SPILL_MEMORY_SETTINGS_H_
#define SPILL_MEMORY_SETTINGS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "framework/base/registry.h"
#include "framework/base/status.h"

namespace spill {

// A size given in bytes or as a multiple of a base the user does not have to
// work out: "2GiB" or "1.5x".
struct SizeSetting {
  double factor = 1.0;  // used when bytes == 0
  size_t bytes = 0;

  size_t Of(size_t base) const;
  std::string ToString() const;
};
// "1.5x" (a positive multiple) or a byte size ("8GiB").
StatusOr<SizeSetting> ParseSizeSetting(const std::string& text);

enum class SettingKind {
  kBool,    // true | false
  kInt,     // an integer in [min, max]
  kBytes,   // a byte size in [min, max] ("64KiB")
  kSize,    // a multiple of a base or a byte size (SizeSetting)
  kChoice,  // one of `choices`
  kReal,    // a finite number (its range: `check`)
  kText,    // any text (a name, a file; `check` may refuse some)
};

// When a policy reads one of its settings: always, or only with a technique
// on (the superneurons scheduler's prefetch distance means nothing where
// nothing is offloaded, its recomputation strategy nothing where nothing is
// recomputed; a mode whose switches leave it unread refuses it).
enum class SettingUse { kAlways, kWithOffload, kWithRecompute };

struct SettingSpec {
  // memory.<key>; the flag is --<key> with '-' for '_' and '.'. A dotted
  // key is one of a section: planner.limit is `memory: {planner: {limit}}`.
  std::string key;
  SettingKind kind = SettingKind::kInt;
  std::string fallback;              // the default, as text
  std::string help;                  // one line for --help and Describe's readers
  int64_t min = 0;                   // kInt, kBytes
  int64_t max = 0;                   // kInt, kBytes (0: no limit for kBytes)
  std::vector<std::string> choices;  // kChoice
  // A check of its own beyond the kind's (empty: none): an error message.
  std::function<Status(const std::string& text)> check;
  std::string flag;       // when it is not derived from the key ("--memory" for mode)
  std::string type_name;  // for --help, when not the kind's ("MODE")
  // Tools that search this setting themselves take "search" for it
  // (deepest, widest search the window scheduler's budget).
  bool searchable = false;
  // It acts on backward passes or solver updates only: tools that only
  // evaluate refuse it.
  bool training_only = false;
  SettingUse use = SettingUse::kAlways;

  std::string Flag() const;
  // The flag's value placeholder for --help: "INT", "SIZE", "a|b", ...
  std::string TypeName() const;
  // Whether `text` is a value of this setting (the error says what is expected).
  Status Check(const std::string& text) const;
};

// Who reads a key: "the window scheduler", "the va allocator".
struct SettingReader {
  std::string seam;  // "scheduler", "allocator"
  std::string name;  // the policy's registered name
};

struct RegisteredSetting {
  SettingSpec spec;
  std::vector<SettingReader> readers;
};

// Every policy setting by key. Registrations of allocators and schedulers
// add theirs (AddSettings); a key registered by several policies must have
// the same spec.
Registry<RegisteredSetting>& PolicySettingRegistry();
bool AddSettings(const std::string& seam, const std::string& name,
                 const std::vector<SettingSpec>& specs);
// The spec of a registered key, or null.
const SettingSpec* FindSetting(const std::string& key);
// "the dymem and vdnn schedulers and the gtbm allocator".
std::string DescribeReaders(const RegisteredSetting& setting);

// The values given for policy settings, as checked text.
class PolicySettings {
 public:
  // Checks `text` against the spec of `key` (registered) and keeps it.
  Status Set(const std::string& key, const std::string& text);
  bool Given(const std::string& key) const { return values_.count(key) > 0; }
  // The text given, or the spec's default.
  std::string Text(const SettingSpec& spec) const;
  std::string Text(const std::string& key) const;
  // Typed reads of a registered spec (CHECKs the kind).
  bool Bool(const SettingSpec& spec) const;
  int64_t Int(const SettingSpec& spec) const;
  size_t Bytes(const SettingSpec& spec) const;
  SizeSetting Size(const SettingSpec& spec) const;
  std::string Choice(const SettingSpec& spec) const { return Text(spec); }
  double Real(const SettingSpec& spec) const;
  // The same by key (tests, tools).
  bool Bool(const std::string& key) const;
  int64_t Int(const std::string& key) const;
  size_t Bytes(const std::string& key) const;
  SizeSetting Size(const std::string& key) const;

  const std::map<std::string, std::string>& values() const { return values_; }
  bool operator==(const PolicySettings& o) const { return values_ == o.values_; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_SETTINGS_H_
