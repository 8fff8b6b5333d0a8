#include "memory/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "framework/base/units.h"

namespace spill {

size_t SizeSetting::Of(size_t base) const {
  if (bytes > 0) return bytes;
  const double scaled = factor * static_cast<double>(base);
  // Multiples of an unlimited budget saturate instead of wrapping around.
  if (scaled >= static_cast<double>(SIZE_MAX / 2)) return SIZE_MAX / 2;
  return static_cast<size_t>(scaled);
}

std::string SizeSetting::ToString() const {
  if (bytes > 0) return FormatBytes(static_cast<double>(bytes));
  char text[32];
  std::snprintf(text, sizeof(text), "%gx", factor);
  return text;
}

StatusOr<SizeSetting> ParseSizeSetting(const std::string& text) {
  SizeSetting setting;
  if (!text.empty() && (text.back() == 'x' || text.back() == 'X')) {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    const double factor = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(factor) ||
        factor <= 0) {
      return InvalidArgument("'" + text + "' is not a positive multiple such as 1.5x");
    }
    setting.factor = factor;
    return setting;
  }
  auto bytes = ParseBytes(text);
  if (!bytes.ok() || *bytes == 0) {
    return InvalidArgument("'" + text +
                           "' is neither a multiple such as 1.5x nor a size such as 8GiB");
  }
  setting.bytes = *bytes;
  return setting;
}

std::string SettingSpec::Flag() const {
  if (!flag.empty()) return flag;
  std::string name = key;
  std::replace(name.begin(), name.end(), '_', '-');
  std::replace(name.begin(), name.end(), '.', '-');
  return "--" + name;
}

std::string SettingSpec::TypeName() const {
  if (!type_name.empty()) return type_name;
  switch (kind) {
    case SettingKind::kBool:
      return "[true|false]";
    case SettingKind::kInt:
      return "INT";
    case SettingKind::kBytes:
      return "SIZE";
    case SettingKind::kSize:
      return "SIZE|MULTIPLE";
    case SettingKind::kChoice:
      return Join(choices, "|");
    case SettingKind::kReal:
      return "NUMBER";
    case SettingKind::kText:
      return "TEXT";
  }
  return "VALUE";
}

Status SettingSpec::Check(const std::string& text) const {
  switch (kind) {
    case SettingKind::kBool:
      if (text != "true" && text != "false") {
        return InvalidArgument("'" + text + "' is not true or false");
      }
      break;
    case SettingKind::kInt: {
      auto n = ParseInt64(text);
      if (!n.ok() || *n < min || *n > max) {
        return InvalidArgument("'" + text + "' is not an integer in [" + std::to_string(min) +
                               ", " + std::to_string(max) + "]");
      }
      break;
    }
    case SettingKind::kBytes: {
      SPILL_ASSIGN_OR_RETURN(size_t bytes, ParseBytes(text));
      const size_t low = static_cast<size_t>(min);
      if (bytes < low || (max > 0 && bytes > static_cast<size_t>(max))) {
        return InvalidArgument(
            "'" + text + "' is outside [" + FormatBytes(static_cast<double>(low)) + ", " +
            (max > 0 ? FormatBytes(static_cast<double>(max)) : "no limit") + "]");
      }
      break;
    }
    case SettingKind::kSize:
      SPILL_RETURN_IF_ERROR(ParseSizeSetting(text).status());
      break;
    case SettingKind::kChoice:
      if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
        return InvalidArgument("'" + text + "' is not one of: " + Join(choices));
      }
      break;
    case SettingKind::kReal: {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
        return InvalidArgument("'" + text + "' is not a number");
      }
      break;
    }
    case SettingKind::kText:
      break;
  }
  return check ? check(text) : Status::Ok();
}

Registry<RegisteredSetting>& PolicySettingRegistry() {
  static auto* registry = new Registry<RegisteredSetting>("memory setting", "settings");
  return *registry;
}

namespace {

bool SameSpec(const SettingSpec& a, const SettingSpec& b) {
  return a.kind == b.kind && a.fallback == b.fallback && a.min == b.min && a.max == b.max &&
         a.choices == b.choices && a.Flag() == b.Flag() && a.use == b.use;
}

}  // namespace

bool AddSettings(const std::string& seam, const std::string& name,
                 const std::vector<SettingSpec>& specs) {
  for (const SettingSpec& spec : specs) {
    SPILL_CHECK(spec.Check(spec.fallback).ok())
        << "the default of memory." << spec.key << " is not one of its values";
    RegisteredSetting* known = PolicySettingRegistry().FindMutable(spec.key);
    if (known == nullptr) {
      PolicySettingRegistry().Add(spec.key, RegisteredSetting{spec, {{seam, name}}});
      continue;
    }
    SPILL_CHECK(SameSpec(known->spec, spec)) << "memory." << spec.key << " registered by " << seam
                                             << " " << name << " unlike by the others that read it";
    known->readers.push_back({seam, name});
  }
  return true;
}

const SettingSpec* FindSetting(const std::string& key) {
  const RegisteredSetting* setting = PolicySettingRegistry().Find(key);
  return setting == nullptr ? nullptr : &setting->spec;
}

std::string DescribeReaders(const RegisteredSetting& setting) {
  // Grouped by seam: "the dymem and vdnn schedulers and the gtbm allocator".
  std::vector<std::string> groups;
  std::vector<std::string> seams;
  for (const SettingReader& r : setting.readers) {
    if (std::find(seams.begin(), seams.end(), r.seam) == seams.end()) seams.push_back(r.seam);
  }
  for (const std::string& seam : seams) {
    std::vector<std::string> names;
    for (const SettingReader& r : setting.readers) {
      if (r.seam == seam) names.push_back(r.name);
    }
    const bool plural = names.size() > 1;
    std::string text = names.back();
    if (plural) {
      names.pop_back();
      text = Join(names) + " and " + text;
    }
    groups.push_back("the " + text + " " + seam + (plural ? "s" : ""));
  }
  std::string text = groups.back();
  if (groups.size() > 1) {
    groups.pop_back();
    text = Join(groups) + " and " + text;
  }
  return text;
}

Status PolicySettings::Set(const std::string& key, const std::string& text) {
  const SettingSpec* spec = FindSetting(key);
  if (spec == nullptr) {
    return InvalidArgument("memory: " + PolicySettingRegistry().Unknown(key));
  }
  SPILL_RETURN_IF_ERROR(spec->Check(text));
  values_[key] = text;
  return Status::Ok();
}

std::string PolicySettings::Text(const SettingSpec& spec) const {
  auto it = values_.find(spec.key);
  return it == values_.end() ? spec.fallback : it->second;
}

std::string PolicySettings::Text(const std::string& key) const {
  const SettingSpec* spec = FindSetting(key);
  SPILL_CHECK(spec != nullptr) << "memory." << key << " is no registered setting";
  return Text(*spec);
}

bool PolicySettings::Bool(const SettingSpec& spec) const {
  SPILL_CHECK(spec.kind == SettingKind::kBool) << "memory." << spec.key << " is not a switch";
  return Text(spec) == "true";
}

int64_t PolicySettings::Int(const SettingSpec& spec) const {
  SPILL_CHECK(spec.kind == SettingKind::kInt) << "memory." << spec.key << " is not an integer";
  return *ParseInt64(Text(spec));
}

double PolicySettings::Real(const SettingSpec& spec) const {
  SPILL_CHECK(spec.kind == SettingKind::kReal) << "memory." << spec.key << " is not a number";
  return std::strtod(Text(spec).c_str(), nullptr);
}

size_t PolicySettings::Bytes(const SettingSpec& spec) const {
  SPILL_CHECK(spec.kind == SettingKind::kBytes) << "memory." << spec.key << " is not a size";
  return *ParseBytes(Text(spec));
}

SizeSetting PolicySettings::Size(const SettingSpec& spec) const {
  SPILL_CHECK(spec.kind == SettingKind::kSize) << "memory." << spec.key << " is not a size";
  return *ParseSizeSetting(Text(spec));
}

namespace {

const SettingSpec& Registered(const std::string& key) {
  const SettingSpec* spec = FindSetting(key);
  SPILL_CHECK(spec != nullptr) << "memory." << key << " is no registered setting";
  return *spec;
}

}  // namespace

bool PolicySettings::Bool(const std::string& key) const { return Bool(Registered(key)); }
int64_t PolicySettings::Int(const std::string& key) const { return Int(Registered(key)); }
size_t PolicySettings::Bytes(const std::string& key) const { return Bytes(Registered(key)); }
SizeSetting PolicySettings::Size(const std::string& key) const { return Size(Registered(key)); }

}  // namespace spill
