#include "framework/layer_params.h"

#include <cstdlib>

namespace spill {

LayerParams::LayerParams(const LayerSpec& spec) : spec_(spec) {}

std::string LayerParams::Context() const {
  return spec_.where.ToString() + ": layer '" + spec_.name + "' (" + spec_.type + ")";
}

void LayerParams::Fail(const std::string& key, const std::string& message) {
  if (!error_.ok()) return;
  error_ = InvalidArgument(Context() + ": '" + key + "' " + message);
}

YAML::Node LayerParams::Find(const std::string& key) {
  known_.insert(key);
  const YAML::Node& params = spec_.params;
  return params[key];  // undefined when absent
}

bool LayerParams::Present(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

bool LayerParams::ParseInt(const YAML::Node& node, int64_t* out) const {
  if (!node.IsScalar()) return false;
  const std::string& text = node.Scalar();
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return false;
  *out = value;
  return true;
}

int64_t LayerParams::Int(const std::string& key, int64_t fallback) {
  const YAML::Node node = Find(key);
  if (!Present(node)) return fallback;
  int64_t value;
  if (!ParseInt(node, &value)) {
    Fail(key, "must be an integer");
    return fallback;
  }
  return value;
}

int64_t LayerParams::RequiredInt(const std::string& key) {
  if (!Present(Find(key))) {
    Fail(key, "is required (an integer)");
    return 0;
  }
  return Int(key, 0);
}

double LayerParams::Float(const std::string& key, double fallback) {
  const YAML::Node node = Find(key);
  if (!Present(node)) return fallback;
  char* end = nullptr;
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    Fail(key, "must be a number");
    return fallback;
  }
  return value;
}

bool LayerParams::Bool(const std::string& key, bool fallback) {
  const YAML::Node node = Find(key);
  if (!Present(node)) return fallback;
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  if (text == "true" || text == "True" || text == "yes") return true;
  if (text == "false" || text == "False" || text == "no") return false;
  Fail(key, "must be true or false");
  return fallback;
}

std::string LayerParams::String(const std::string& key, const std::string& fallback) {
  const YAML::Node node = Find(key);
  if (!Present(node)) return fallback;
  if (!node.IsScalar()) {
    Fail(key, "must be a string");
    return fallback;
  }
  return node.Scalar();
}

std::string LayerParams::Choice(const std::string& key, const std::vector<std::string>& choices,
                                const std::string& fallback) {
  std::string value = String(key, fallback);
  for (const auto& c : choices) {
    if (c == value) return value;
  }
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  Fail(key, "must be one of: " + list + " (got '" + value + "')");
  return fallback;
}

std::array<int64_t, 2> LayerParams::Pair(const std::string& key, std::array<int64_t, 2> fallback) {
  const YAML::Node node = Find(key);
  if (!Present(node)) return fallback;
  int64_t a, b;
  if (ParseInt(node, &a)) return {a, a};
  if (node.IsSequence() && node.size() == 2 && ParseInt(node[0], &a) && ParseInt(node[1], &b)) {
    return {a, b};
  }
  Fail(key, "must be an integer or a list [h, w]");
  return fallback;
}

std::array<int64_t, 2> LayerParams::RequiredPair(const std::string& key) {
  if (!Present(Find(key))) {
    Fail(key, "is required (an integer or [h, w])");
    return {1, 1};
  }
  return Pair(key, {1, 1});
}

std::vector<int64_t> LayerParams::RequiredIntList(const std::string& key) {
  const YAML::Node node = Find(key);
  std::vector<int64_t> values;
  if (!Present(node) || !node.IsSequence()) {
    Fail(key, "is required (a list of integers)");
    return values;
  }
  for (const auto& item : node) {
    int64_t v;
    if (!ParseInt(item, &v)) {
      Fail(key, "must be a list of integers");
      return {};
    }
    values.push_back(v);
  }
  return values;
}

Status LayerParams::Finish() const {
  if (!error_.ok()) return error_;
  for (const auto& item : spec_.params) {
    const std::string key = item.first.Scalar();
    if (known_.count(key)) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    return InvalidArgument(Context() + ": unknown key '" + key + "'; " + spec_.type +
                           " layers take: " + (list.empty() ? "(no parameters)" : list));
  }
  return Status::Ok();
}

}  // namespace spill
