#include "tools/config_reader.h"

#include <cstdlib>

#include "framework/units.h"

namespace spill {

bool ConfigSection::IsMap() const { return node_.IsDefined() && node_.IsMap(); }

ConfigSection::ConfigSection(const YAML::Node& node, const std::string& file,
                             const std::string& path)
    : node_(node), file_(file), path_(path) {
  if (node_.IsDefined() && !node_.IsNull() && !IsMap()) {
    error_ = InvalidArgument(file_ + ":" + std::to_string(node_.Mark().line + 1) + ": " +
                             (path_.empty() ? "the configuration" : path_) + " must be a map");
  }
}

std::string ConfigSection::Where(const std::string& key) const {
  int line = -1;
  if (IsMap()) {
    const YAML::Node& map = node_;
    YAML::Node value = map[key];
    if (value.IsDefined()) line = value.Mark().line;
    if (line < 0) line = node_.Mark().line;
  }
  std::string dotted = path_.empty() ? key : path_ + "." + key;
  return file_ + (line >= 0 ? ":" + std::to_string(line + 1) : "") + ": " + dotted;
}

void ConfigSection::Fail(const std::string& key, const std::string& message) {
  if (error_.ok()) error_ = InvalidArgument(Where(key) + ": " + message);
}

YAML::Node ConfigSection::Get(const std::string& key) {
  known_.insert(key);
  if (!IsMap()) return YAML::Node();
  const YAML::Node& map = node_;
  return map[key];
}

bool ConfigSection::Has(const std::string& key) {
  YAML::Node v = Get(key);
  return v.IsDefined() && !v.IsNull();
}

YAML::Node ConfigSection::Raw(const std::string& key) { return Get(key); }

int64_t ConfigSection::Int(const std::string& key, int64_t fallback) {
  YAML::Node v = Get(key);
  if (!v.IsDefined() || v.IsNull()) return fallback;
  char* end = nullptr;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') {
    Fail(key, "must be an integer (got '" + text + "')");
    return fallback;
  }
  return value;
}

double ConfigSection::Float(const std::string& key, double fallback) {
  YAML::Node v = Get(key);
  if (!v.IsDefined() || v.IsNull()) return fallback;
  char* end = nullptr;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    Fail(key, "must be a number (got '" + text + "')");
    return fallback;
  }
  return value;
}

bool ConfigSection::Bool(const std::string& key, bool fallback) {
  YAML::Node v = Get(key);
  if (!v.IsDefined() || v.IsNull()) return fallback;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  if (text == "true" || text == "yes") return true;
  if (text == "false" || text == "no") return false;
  Fail(key, "must be true or false (got '" + text + "')");
  return fallback;
}

std::string ConfigSection::String(const std::string& key, const std::string& fallback) {
  YAML::Node v = Get(key);
  if (!v.IsDefined() || v.IsNull()) return fallback;
  if (!v.IsScalar()) {
    Fail(key, "must be a string");
    return fallback;
  }
  return v.Scalar();
}

std::string ConfigSection::Choice(const std::string& key, const std::vector<std::string>& choices,
                                  const std::string& fallback) {
  std::string value = String(key, fallback);
  std::string list;
  for (const auto& c : choices) {
    if (c == value) return value;
    list += (list.empty() ? "" : ", ") + c;
  }
  Fail(key, "must be one of " + list + " (got '" + value + "')");
  return fallback;
}

size_t ConfigSection::Bytes(const std::string& key, size_t fallback) {
  YAML::Node v = Get(key);
  if (!v.IsDefined() || v.IsNull()) return fallback;
  auto bytes = ParseBytes(v.IsScalar() ? v.Scalar() : "");
  if (!bytes.ok()) {
    Fail(key, bytes.status().message());
    return fallback;
  }
  return *bytes;
}

std::vector<int64_t> ConfigSection::IntList(const std::string& key) {
  YAML::Node v = Get(key);
  std::vector<int64_t> out;
  if (!v.IsDefined() || v.IsNull()) return out;
  if (!v.IsSequence()) {
    Fail(key, "must be a list of integers");
    return out;
  }
  for (const auto& item : v) {
    char* end = nullptr;
    const std::string text = item.IsScalar() ? item.Scalar() : "";
    long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') {
      Fail(key, "must be a list of integers");
      return {};
    }
    out.push_back(value);
  }
  return out;
}

std::vector<float> ConfigSection::FloatList(const std::string& key) {
  YAML::Node v = Get(key);
  std::vector<float> out;
  if (!v.IsDefined() || v.IsNull()) return out;
  if (!v.IsSequence()) {
    Fail(key, "must be a list of numbers");
    return out;
  }
  for (const auto& item : v) {
    char* end = nullptr;
    const std::string text = item.IsScalar() ? item.Scalar() : "";
    double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') {
      Fail(key, "must be a list of numbers");
      return {};
    }
    out.push_back(static_cast<float>(value));
  }
  return out;
}

ConfigSection ConfigSection::Section(const std::string& key) {
  return ConfigSection(Get(key), file_, path_.empty() ? key : path_ + "." + key);
}

Status ConfigSection::Finish() const {
  if (!error_.ok()) return error_;
  if (!IsMap()) return Status::Ok();
  for (const auto& item : node_) {
    const std::string key = item.first.Scalar();
    if (known_.count(key)) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    std::string dotted = path_.empty() ? key : path_ + "." + key;
    return InvalidArgument(file_ + ":" + std::to_string(item.first.Mark().line + 1) +
                           ": unknown key '" + dotted + "'; expected one of: " + list);
  }
  return Status::Ok();
}

}  // namespace spill
