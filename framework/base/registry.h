// Registry<Entry>: names to entries (a factory and what describes it), filled
// by registrations that sit next to each entry's code and run during static
// initialization. There is no central list of names to drift: an allocator,
// an eviction rule, a scheduler, a layer type, a device or a convolution
// algorithm is known once its file is linked (Bazel: `alwayslink = True`).
//
//   Registry<AllocatorInfo>& Allocators() {
//     static auto* registry = new Registry<AllocatorInfo>("allocator", "allocators");
//     return *registry;
//   }
//   const bool kMine = Allocators().Add("mine", {...});
//   SPILL_ASSIGN_OR_RETURN(const AllocatorInfo* info, Allocators().Get(name));
//
// Invariants: a name is registered once (twice is a programming error,
// checked at start-up); an unknown name is an error that lists the known
// ones, sorted; registration order is kept for registries whose order means
// something (convolution algorithms are indexed by it).
#ifndef SPILL_FRAMEWORK_BASE_REGISTRY_H_
#define SPILL_FRAMEWORK_BASE_REGISTRY_H_

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "framework/base/check.h"
#include "framework/base/status.h"
#include "framework/base/strings.h"

namespace spill {

template <typename Entry>
class Registry {
 public:
  // `kind` names one entry in messages ("eviction rule"), `plural` the list
  // of known ones ("rules").
  Registry(std::string kind, std::string plural)
      : kind_(std::move(kind)), plural_(std::move(plural)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `entry` under `name`; returns true so that a registration can
  // initialize a constant.
  bool Add(const std::string& name, Entry entry) {
    SPILL_CHECK(Find(name) == nullptr) << kind_ << " '" << name << "' registered twice";
    entries_.emplace_back(name, std::move(entry));
    return true;
  }
  // The same, for entries that carry their own `name`.
  bool Add(Entry entry) {
    const std::string name = entry.name;
    return Add(name, std::move(entry));
  }

  // Null when no entry has that name.
  const Entry* Find(const std::string& name) const {
    for (const auto& [n, entry] : entries_) {
      if (n == name) return &entry;
    }
    return nullptr;
  }

  Entry* FindMutable(const std::string& name) {
    for (auto& [n, entry] : entries_) {
      if (n == name) return &entry;
    }
    return nullptr;
  }

  // The entry, or an error naming the known ones.
  StatusOr<const Entry*> Get(const std::string& name) const {
    const Entry* entry = Find(name);
    if (entry == nullptr) return InvalidArgument(Unknown(name));
    return entry;
  }

  // "unknown allocator 'x'; known allocators: best_fit, first_fit".
  std::string Unknown(const std::string& name) const {
    return "unknown " + kind_ + " '" + name + "'; known " + plural_ + ": " + Join(Names());
  }

  // Sorted.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    std::sort(names.begin(), names.end());
    return names;
  }

  // In registration order.
  const std::vector<std::pair<std::string, Entry>>& entries() const { return entries_; }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::string plural_;
  std::vector<std::pair<std::string, Entry>> entries_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_REGISTRY_H_
