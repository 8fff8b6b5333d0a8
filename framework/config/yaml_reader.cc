#include "framework/config/yaml_reader.h"

#include <yaml-cpp/depthguard.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <new>

#include "framework/base/files.h"
#include "framework/base/strings.h"

namespace spill {
namespace {

std::string At(const std::string& file, int line) {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

std::string Quoted(const std::string& text) {
  constexpr size_t kShown = 60;  // long values are cut in messages
  return "'" + (text.size() > kShown ? text.substr(0, kShown) + "..." : text) + "'";
}

// Checks keys, depth and size of a freshly loaded tree (see the header).
class TreeCheck {
 public:
  explicit TreeCheck(const std::string& label) : label_(label) {}

  Status Walk(const YAML::Node& node, int depth) {
    if (++nodes_ > kMaxYamlNodes) {
      return InvalidArgument(At(label_, YamlLine(node)) + ": the document has more than " +
                             std::to_string(kMaxYamlNodes) +
                             " nodes (counting each use of an alias)");
    }
    if (depth > kMaxYamlDepth) {
      return InvalidArgument(At(label_, YamlLine(node)) + ": nested deeper than " +
                             std::to_string(kMaxYamlDepth) +
                             " levels (or an alias refers to a node that contains it)");
    }
    if (node.IsSequence()) {
      for (const auto& item : node) SPILL_RETURN_IF_ERROR(Walk(item, depth + 1));
    } else if (node.IsMap()) {
      SPILL_RETURN_IF_ERROR(CheckKeys(node));
      for (const auto& item : node) SPILL_RETURN_IF_ERROR(Walk(item.second, depth + 1));
    }
    return Status::Ok();
  }

 private:
  Status CheckKeys(const YAML::Node& map) const {
    std::map<std::string, int> seen;
    for (const auto& item : map) {
      const YAML::Node& key = item.first;
      if (!key.IsScalar()) {
        return InvalidArgument(At(label_, YamlLine(key)) +
                               ": a key must be a plain name, not a list, a map or null");
      }
      auto [it, fresh] = seen.emplace(key.Scalar(), YamlLine(key));
      if (!fresh) {
        return InvalidArgument(At(label_, YamlLine(key)) + ": duplicate key " +
                               Quoted(key.Scalar()) + " (first at line " +
                               std::to_string(it->second) + ")");
      }
    }
    return Status::Ok();
  }

  const std::string& label_;
  int64_t nodes_ = 0;
};

StatusOr<YAML::Node> Parse(const std::string& text, const std::string& label) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // its own message says "bad file"
    return InvalidArgument(At(label, e.mark.line >= 0 ? e.mark.line + 1 : 0) +
                           ": YAML nested more than " + std::to_string(e.depth()) + " levels deep");
  } catch (const YAML::Exception& e) {
    return InvalidArgument(At(label, e.mark.line >= 0 ? e.mark.line + 1 : 0) +
                           ": YAML syntax: " + e.msg);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(label + ": not enough memory to parse the YAML");
  } catch (const std::exception& e) {
    return InvalidArgument(label + ": YAML: " + e.what());
  }
  SPILL_RETURN_IF_ERROR(TreeCheck(label).Walk(root, 0));
  return root;
}

std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.10g", value);
  return buffer;
}

}  // namespace

StatusOr<YAML::Node> LoadYamlFile(const std::string& path, const std::string& what) {
  SPILL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxYamlFileBytes, what));
  return Parse(text, path);
}

StatusOr<YAML::Node> LoadYamlText(const std::string& text, const std::string& label) {
  if (text.size() > kMaxYamlFileBytes) {
    return InvalidArgument(label + ": " + std::to_string(text.size()) +
                           " bytes of YAML; the limit is " + std::to_string(kMaxYamlFileBytes));
  }
  return Parse(text, label);
}

int YamlLine(const YAML::Node& node) {
  const int line = node.Mark().line;
  return line >= 0 ? line + 1 : 0;
}

bool Bounds::Contains(double value) const {
  if (min_open ? value <= min : value < min) return false;
  if (max_open ? value >= max : value > max) return false;
  return true;
}

std::string Bounds::ToString() const {
  return std::string("in ") + (min_open ? "(" : "[") + Number(min) + ", " + Number(max) +
         (max_open ? ")" : "]");
}

// ---------------------------------------------------------------------------
// YamlMap

YamlMap::YamlMap(const YAML::Node& node, const YamlOrigin& origin, const std::string& path)
    : node_(node), origin_(origin), path_(path) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
    error_ = InvalidArgument(Prefix(node_) + (path_.empty() ? "the document" : path_) +
                             ": must be a map of keys and values");
  }
}

bool YamlMap::IsMap() const { return node_.IsDefined() && node_.IsMap(); }

std::string YamlMap::Prefix(const YAML::Node& near) const {
  return PrefixAt(near.IsDefined() ? YamlLine(near) : 0);
}

std::string YamlMap::PrefixAt(int line) const {
  if (line == 0) line = origin_.line;
  std::string prefix = At(origin_.file, line) + origin_.note + ": ";
  if (!origin_.subject.empty()) prefix += origin_.subject + ": ";
  return prefix;
}

std::string YamlMap::Dotted(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

std::string YamlMap::Where(const std::string& key) const {
  // (Lines only: assigning one YAML::Node to another would rewrite the node
  // it refers to.)
  int line = node_.IsDefined() ? YamlLine(node_) : 0;
  if (IsMap()) {
    for (const auto& item : node_) {
      if (item.first.Scalar() == key) line = YamlLine(item.first);
    }
  }
  const std::string prefix = PrefixAt(line);
  return prefix.substr(0, prefix.size() - 2) + ": " + Dotted(key);
}

void YamlMap::Fail(const std::string& key, const std::string& message) {
  if (error_.ok()) error_ = InvalidArgument(Where(key) + ": " + message);
}

YAML::Node YamlMap::Get(const std::string& key) {
  known_.insert(key);
  // A const map's operator[] gives an undefined node for a missing key
  // (YAML::Node() would be a defined null).
  static const YAML::Node* const kEmpty = new YAML::Node(YAML::NodeType::Map);
  const YAML::Node& map = IsMap() ? node_ : *kEmpty;
  return map[key];
}

bool YamlMap::Given(const std::string& key, const YAML::Node& value) {
  if (!value.IsDefined()) return false;
  if (value.IsNull()) {
    Fail(key, "has no value (leave the key out for the default)");
    return false;
  }
  return true;
}

bool YamlMap::Has(const std::string& key) {
  YAML::Node v = Get(key);
  return v.IsDefined() && !v.IsNull();
}

YAML::Node YamlMap::Raw(const std::string& key) { return Get(key); }

int64_t YamlMap::Int(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return fallback;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  auto value = ParseInt64(text);
  if (!value.ok() || *value < min || *value > max) {
    Fail(key, "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                  "] (got " + (v.IsScalar() ? Quoted(text) : "a list or map") + ")");
    return fallback;
  }
  return *value;
}

int64_t YamlMap::RequiredInt(const std::string& key, int64_t min, int64_t max) {
  if (!Has(key)) {
    Fail(key,
         "is required (an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "])");
    return min;
  }
  return Int(key, min, min, max);
}

double YamlMap::Float(const std::string& key, double fallback, const Bounds& bounds) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return fallback;
  const std::string text = v.IsScalar() ? v.Scalar() : "";
  auto value = ParseFiniteDouble(text);
  if (!value.ok() || !bounds.Contains(*value)) {
    Fail(key, "must be a number " + bounds.ToString() + " (got " +
                  (v.IsScalar() ? Quoted(text) : "a list or map") + ")");
    return fallback;
  }
  return *value;
}

bool YamlMap::Bool(const std::string& key, bool fallback) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return fallback;
  auto value = ParseBool(v.IsScalar() ? v.Scalar() : "");
  if (!value.ok()) {
    Fail(key, "must be true or false (got " +
                  (v.IsScalar() ? Quoted(v.Scalar()) : std::string("a list or map")) + ")");
    return fallback;
  }
  return *value;
}

std::string YamlMap::String(const std::string& key, const std::string& fallback) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return fallback;
  if (!v.IsScalar()) {
    Fail(key, "must be a string, not a list or map");
    return fallback;
  }
  return v.Scalar();
}

std::string YamlMap::Choice(const std::string& key, const std::vector<std::string>& choices,
                            const std::string& fallback) {
  std::string value = String(key, fallback);
  for (const auto& c : choices) {
    if (c == value) return value;
  }
  Fail(key, "must be one of: " + Join(choices) + " (got " + Quoted(value) + ")");
  return fallback;
}

size_t YamlMap::Bytes(const std::string& key, size_t fallback, size_t min, size_t max) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return fallback;
  auto bytes = ParseBytes(v.IsScalar() ? v.Scalar() : "");
  if (!bytes.ok()) {
    Fail(key, bytes.status().message());
    return fallback;
  }
  if (*bytes < min || *bytes > max) {
    Fail(key, "must be between " + FormatBytes(static_cast<double>(min)) + " and " +
                  FormatBytes(static_cast<double>(max)) + " (got " + Quoted(v.Scalar()) + ")");
    return fallback;
  }
  return *bytes;
}

std::vector<int64_t> YamlMap::IntList(const std::string& key, int64_t min, int64_t max,
                                      size_t max_items, bool required) {
  YAML::Node v = Get(key);
  const std::string expected = "a list of at most " + std::to_string(max_items) + " integers in [" +
                               std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.IsDefined() && required) Fail(key, "is required (" + expected + ")");
  if (!Given(key, v)) {
    return {};
  }
  std::vector<int64_t> out;
  if (!v.IsSequence() || v.size() > max_items) {
    Fail(key, "must be " + expected);
    return {};
  }
  for (const auto& item : v) {
    auto value = ParseInt64(item.IsScalar() ? item.Scalar() : "");
    if (!value.ok() || *value < min || *value > max) {
      Fail(key, "must be " + expected + " (got " +
                    (item.IsScalar() ? Quoted(item.Scalar()) : std::string("a list or map")) + ")");
      return {};
    }
    out.push_back(*value);
  }
  return out;
}

std::vector<float> YamlMap::FloatList(const std::string& key, const Bounds& bounds,
                                      size_t max_items) {
  YAML::Node v = Get(key);
  if (!Given(key, v)) return {};
  const std::string expected =
      "a list of at most " + std::to_string(max_items) + " numbers " + bounds.ToString();
  if (!v.IsSequence() || v.size() > max_items) {
    Fail(key, "must be " + expected);
    return {};
  }
  std::vector<float> out;
  for (const auto& item : v) {
    auto value = ParseFiniteDouble(item.IsScalar() ? item.Scalar() : "");
    if (!value.ok() || !bounds.Contains(*value)) {
      Fail(key, "must be " + expected);
      return {};
    }
    out.push_back(static_cast<float>(*value));
  }
  return out;
}

std::vector<int64_t> YamlMap::Pair(const std::string& key, const std::vector<int64_t>& fallback,
                                   int64_t min, int64_t max, bool required) {
  YAML::Node v = Get(key);
  const std::string expected = "an integer or a list [h, w] of integers in [" +
                               std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.IsDefined() && required) Fail(key, "is required (" + expected + ")");
  if (!Given(key, v)) {
    return fallback;
  }
  std::vector<YAML::Node> items;
  if (v.IsScalar()) {
    items = {v, v};
  } else if (v.IsSequence() && v.size() == 2) {
    items = {v[0], v[1]};
  } else {
    Fail(key, "must be " + expected);
    return fallback;
  }
  std::vector<int64_t> out;
  for (const YAML::Node& item : items) {
    auto value = ParseInt64(item.IsScalar() ? item.Scalar() : "");
    if (!value.ok() || *value < min || *value > max) {
      Fail(key, "must be " + expected + " (got " +
                    (item.IsScalar() ? Quoted(item.Scalar()) : std::string("a list or map")) + ")");
      return fallback;
    }
    out.push_back(*value);
  }
  return out;
}

YamlMap YamlMap::Section(const std::string& key) {
  YAML::Node v = Get(key);
  YamlOrigin origin = origin_;
  if (v.IsDefined() && YamlLine(v) == 0 && IsMap()) {
    for (const auto& item : node_) {
      if (item.first.Scalar() == key && YamlLine(item.first) > 0) {
        origin.line = YamlLine(item.first);
      }
    }
  }
  return YamlMap(v, origin, Dotted(key));
}

Status YamlMap::Finish(const std::string& known_label) const {
  if (!error_.ok()) return error_;
  if (!IsMap()) return Status::Ok();
  for (const auto& item : node_) {
    const std::string key = item.first.Scalar();
    if (known_.count(key)) continue;
    return InvalidArgument(Prefix(item.first) + "unknown key " + Quoted(Dotted(key)) + "; " +
                           known_label + ": " + (known_.empty() ? "(none)" : Join(known_)));
  }
  return Status::Ok();
}

}  // namespace spill
