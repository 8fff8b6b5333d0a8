// Parses network YAML files into a NetSpec: reads includes and blocks, then
// expands the layer list, instantiating blocks and repeats with their
// parameters substituted. Every error names the file, the line and the layer.
// Files come through the strict YAML reader; the expansion stops at the
// ceilings of net_spec.h, and no exception leaves ParseRoot.
#include <algorithm>
#include <filesystem>
#include <set>

#include "framework/base/checked_math.h"
#include "framework/base/strings.h"
#include "framework/config/expr.h"
#include "framework/config/net_spec.h"
#include "framework/config/yaml_reader.h"

namespace spill {
namespace {

const std::set<std::string> kTopKeys = {"name",    "description", "params",
                                        "include", "blocks",      "layers"};
const std::set<std::string> kIncludeKeys = {"description", "include", "blocks"};
const std::set<std::string> kBlockKeys = {"description", "params", "layers", "output"};
const std::set<std::string> kInstanceKeys = {"name", "block", "args", "repeat", "inputs"};

int LineOf(const YAML::Node& node) { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

struct BlockDef {
  std::string name;
  YAML::Node params;   // map of name -> default (null = required)
  YAML::Node layers;   // sequence
  std::string output;  // local layer name, or "" for the last entry
  std::string file;
  int line = 0;
};

struct Scope {
  std::string prefix;               // qualified name prefix, "res2.1/"
  std::vector<std::string> inputs;  // what $in, $in1, ... refer to
  Variables vars;
  std::string file;          // file the entries were written in
  std::string instantiated;  // instantiation chain for messages
  int depth = 0;
};

class NetParser {
 public:
  explicit NetParser(const ParamOverrides& overrides) : overrides_(overrides) {}

  StatusOr<NetSpec> Parse(const YAML::Node& root, const std::string& file,
                          const std::string& base_dir);

 private:
  Status CheckKeys(const YAML::Node& map, const std::set<std::string>& allowed,
                   const std::string& file, const std::string& what) const;
  Status LoadIncludes(const YAML::Node& root, const std::string& file, const std::string& base_dir);
  Status LoadBlocks(const YAML::Node& root, const std::string& file);
  Status ReadModelParams(const YAML::Node& root, const std::string& file);

  StatusOr<std::string> ExpandList(const YAML::Node& list, const Scope& scope,
                                   const std::string& output);
  StatusOr<std::string> ExpandLayer(const YAML::Node& entry, const Scope& scope,
                                    const std::string& prev);
  StatusOr<std::string> ExpandInstance(const YAML::Node& entry, const Scope& scope,
                                       const std::string& prev);
  StatusOr<Variables> BlockVariables(const BlockDef& block, const YAML::Node& args,
                                     const Scope& scope, int64_t index, const std::string& where);
  StatusOr<std::vector<std::string>> ReadInputs(const YAML::Node& entry, const Scope& scope,
                                                const std::string& prev, const std::string& where);
  StatusOr<std::string> ResolveReference(const std::string& raw, const Scope& scope,
                                         const std::string& where) const;
  StatusOr<std::string> ScalarField(const YAML::Node& entry, const char* key, const Scope& scope,
                                    const std::string& where) const;
  Status ResolveAliases();
  std::string Suggest(const std::string& name) const;
  // After the first of `repeat` instances: refuses a repeat whose expansion
  // would pass kMaxLayers, before the other instances are built.
  Status CheckRepeat(const std::string& name, const std::string& block, int64_t repeat,
                     size_t layers_before, const std::string& where) const;

  const ParamOverrides& overrides_;
  NetSpec spec_;
  std::map<std::string, BlockDef> blocks_;
  std::vector<std::string> include_stack_;
  std::map<std::string, std::string> aliases_;     // block instance -> its output
  std::map<std::string, SourceLocation> defined_;  // every qualified name
};

std::string Where(const std::string& file, int line) { return file + ":" + std::to_string(line); }

Status NetParser::CheckKeys(const YAML::Node& map, const std::set<std::string>& allowed,
                            const std::string& file, const std::string& what) const {
  for (const auto& item : map) {
    const std::string key = item.first.Scalar();
    if (!allowed.count(key)) {
      return InvalidArgument(Where(file, LineOf(item.first)) + ": unknown key '" + key + "' in " +
                             what + "; expected one of: " + Join(allowed));
    }
  }
  return Status::Ok();
}

Status NetParser::LoadIncludes(const YAML::Node& root, const std::string& file,
                               const std::string& base_dir) {
  YAML::Node includes = root["include"];
  if (!includes) return Status::Ok();
  std::vector<YAML::Node> items;
  if (includes.IsScalar())
    items.push_back(includes);
  else if (includes.IsSequence())
    for (const auto& i : includes) items.push_back(i);
  else
    return InvalidArgument(Where(file, LineOf(includes)) +
                           ": 'include' must be a file name or a list of them");
  for (const auto& item : items) {
    namespace fs = std::filesystem;
    if (!item.IsScalar() || item.Scalar().empty()) {
      return InvalidArgument(Where(file, LineOf(item)) + ": 'include' entries must be file names");
    }
    std::string path = (fs::path(base_dir) / item.Scalar()).lexically_normal().string();
    if (std::find(include_stack_.begin(), include_stack_.end(), path) != include_stack_.end()) {
      return InvalidArgument(Where(file, LineOf(item)) + ": include cycle through '" + path + "'");
    }
    if (include_stack_.size() > static_cast<size_t>(kMaxIncludeDepth)) {
      return InvalidArgument(Where(file, LineOf(item)) + ": includes nested deeper than " +
                             std::to_string(kMaxIncludeDepth) + " files");
    }
    auto loaded = LoadYamlFile(path, "included file");
    if (!loaded.ok()) return loaded.status().WithContext(Where(file, LineOf(item)));
    YAML::Node sub = *loaded;
    if (!sub.IsMap()) return InvalidArgument(path + ": expected a map with 'blocks'");
    SPILL_RETURN_IF_ERROR(CheckKeys(sub, kIncludeKeys, path, "an included file"));
    include_stack_.push_back(path);
    SPILL_RETURN_IF_ERROR(LoadIncludes(sub, path, fs::path(path).parent_path().string()));
    SPILL_RETURN_IF_ERROR(LoadBlocks(sub, path));
    include_stack_.pop_back();
  }
  return Status::Ok();
}

Status NetParser::LoadBlocks(const YAML::Node& root, const std::string& file) {
  YAML::Node blocks = root["blocks"];
  if (!blocks) return Status::Ok();
  if (!blocks.IsMap())
    return InvalidArgument(Where(file, LineOf(blocks)) + ": 'blocks' must be a map");
  for (const auto& item : blocks) {
    BlockDef def;
    def.name = item.first.Scalar();
    def.file = file;
    def.line = LineOf(item.first);
    const YAML::Node& body = item.second;
    std::string where = Where(file, def.line);
    if (!body.IsMap()) return InvalidArgument(where + ": block '" + def.name + "' must be a map");
    SPILL_RETURN_IF_ERROR(CheckKeys(body, kBlockKeys, file, "block '" + def.name + "'"));
    def.params = body["params"] ? body["params"] : YAML::Node(YAML::NodeType::Map);
    if (!def.params.IsMap())
      return InvalidArgument(where + ": 'params' of block '" + def.name + "' must be a map");
    def.layers = body["layers"];
    if (!def.layers || !def.layers.IsSequence() || def.layers.size() == 0) {
      return InvalidArgument(where + ": block '" + def.name + "' needs a non-empty 'layers' list");
    }
    if (body["output"]) {
      if (!body["output"].IsScalar() || body["output"].Scalar().empty()) {
        return InvalidArgument(where + ": 'output' of block '" + def.name +
                               "' must be the name of one of its layers");
      }
      def.output = body["output"].Scalar();
    }
    auto existing = blocks_.find(def.name);
    if (existing != blocks_.end()) {
      return InvalidArgument(where + ": block '" + def.name + "' is already defined at " +
                             Where(existing->second.file, existing->second.line));
    }
    blocks_[def.name] = def;
  }
  return Status::Ok();
}

Status NetParser::ReadModelParams(const YAML::Node& root, const std::string& file) {
  YAML::Node params = root["params"];
  if (params && !params.IsMap())
    return InvalidArgument(Where(file, LineOf(params)) + ": 'params' must be a map");
  std::set<std::string> known;
  if (params) {
    for (const auto& item : params) {
      SetVariable(&spec_.params, item.first.Scalar(), YAML::Clone(item.second));
      known.insert(item.first.Scalar());
    }
  }
  for (const auto& [key, value] : overrides_) {
    if (!known.count(key)) {
      return InvalidArgument(file + ": unknown model parameter '" + key +
                             "' in overrides; model '" + spec_.name +
                             "' has: " + (known.empty() ? "(none)" : Join(known)));
    }
    SetVariable(&spec_.params, key, YAML::Clone(value));
  }
  return Status::Ok();
}

StatusOr<NetSpec> NetParser::Parse(const YAML::Node& root, const std::string& file,
                                   const std::string& base_dir) {
  if (!root.IsMap()) return InvalidArgument(file + ": expected a map with 'layers'");
  SPILL_RETURN_IF_ERROR(CheckKeys(root, kTopKeys, file, "a network file"));
  spec_.file = file;
  spec_.name = std::filesystem::path(file).stem().string();
  if (root["name"]) {
    if (!root["name"].IsScalar() || root["name"].Scalar().empty()) {
      return InvalidArgument(Where(file, LineOf(root["name"])) + ": 'name' must be a string");
    }
    spec_.name = root["name"].Scalar();
  }
  include_stack_.push_back(file);
  SPILL_RETURN_IF_ERROR(LoadIncludes(root, file, base_dir));
  SPILL_RETURN_IF_ERROR(LoadBlocks(root, file));
  SPILL_RETURN_IF_ERROR(ReadModelParams(root, file));
  YAML::Node layers = root["layers"];
  if (!layers || !layers.IsSequence() || layers.size() == 0) {
    return InvalidArgument(file + ": a network needs a non-empty 'layers' list");
  }
  Scope top;
  top.vars = spec_.params;
  top.file = file;
  SPILL_RETURN_IF_ERROR(ExpandList(layers, top, "").status());
  SPILL_RETURN_IF_ERROR(ResolveAliases());
  return std::move(spec_);
}

StatusOr<std::string> NetParser::ExpandList(const YAML::Node& list, const Scope& scope,
                                            const std::string& output) {
  std::string prev = scope.inputs.empty() ? "" : scope.inputs[0];
  for (const auto& entry : list) {
    std::string where = Where(scope.file, LineOf(entry));
    if (!entry.IsMap()) return InvalidArgument(where + ": each layer entry must be a map");
    StatusOr<std::string> out =
        entry["block"] ? ExpandInstance(entry, scope, prev) : ExpandLayer(entry, scope, prev);
    if (!out.ok()) return out.status();
    prev = *out;
  }
  if (output.empty()) return prev;
  return ResolveReference(output, scope, Where(scope.file, LineOf(list)));
}

StatusOr<std::string> NetParser::ScalarField(const YAML::Node& entry, const char* key,
                                             const Scope& scope, const std::string& where) const {
  YAML::Node node = entry[key];
  if (!node) return InvalidArgument(where + ": missing '" + key + "'");
  auto value = Substitute(node, scope.vars);
  if (!value.ok()) return value.status().WithContext(where + ": '" + key + "'");
  if (!value->IsScalar() || value->Scalar().empty()) {
    return InvalidArgument(where + ": '" + key + "' must be a non-empty string");
  }
  return value->Scalar();
}

StatusOr<std::string> NetParser::ResolveReference(const std::string& raw, const Scope& scope,
                                                  const std::string& where) const {
  if (raw.rfind("$in", 0) == 0) {
    std::string digits = raw.substr(3);
    size_t index = 0;
    if (!digits.empty()) {
      auto parsed = ParseInt64(digits);
      if (!parsed.ok() || *parsed < 0 || digits[0] == '+' || digits[0] == '-') {
        return InvalidArgument(where + ": bad input reference '" + raw +
                               "'; use $in, $in0, $in1, ...");
      }
      index = static_cast<size_t>(*parsed);
    }
    if (index >= scope.inputs.size()) {
      return InvalidArgument(where + ": '" + raw + "' refers to block input " +
                             std::to_string(index) + " but the block was given " +
                             std::to_string(scope.inputs.size()) + " input(s)");
    }
    return scope.inputs[index];
  }
  if (raw.empty()) return InvalidArgument(where + ": empty input reference");
  return scope.prefix + raw;
}

StatusOr<std::vector<std::string>> NetParser::ReadInputs(const YAML::Node& entry,
                                                         const Scope& scope,
                                                         const std::string& prev,
                                                         const std::string& where) {
  std::vector<std::string> refs;
  YAML::Node inputs = entry["inputs"];
  if (!inputs) {
    if (!prev.empty()) refs.push_back(prev);
    return refs;
  }
  std::vector<std::string> raw;
  if (inputs.IsScalar())
    raw.push_back(inputs.Scalar());
  else if (inputs.IsSequence())
    for (const auto& i : inputs) {
      if (!i.IsScalar()) return InvalidArgument(where + ": 'inputs' must list layer names");
      raw.push_back(i.Scalar());
    }
  else
    return InvalidArgument(where + ": 'inputs' must be a layer name or a list of them");
  for (const auto& r : raw) {
    SPILL_ASSIGN_OR_RETURN(std::string ref, ResolveReference(r, scope, where));
    refs.push_back(ref);
  }
  return refs;
}

StatusOr<std::string> NetParser::ExpandLayer(const YAML::Node& entry, const Scope& scope,
                                             const std::string& prev) {
  std::string where = Where(scope.file, LineOf(entry));
  SPILL_ASSIGN_OR_RETURN(std::string name, ScalarField(entry, "name", scope, where));
  if (name.find_first_of("/:") != std::string::npos) {
    return InvalidArgument(where + ": layer name '" + name + "' may not contain '/' or ':'");
  }
  LayerSpec layer;
  layer.name = scope.prefix + name;
  layer.where = SourceLocation{scope.file, LineOf(entry), scope.instantiated};
  std::string context = layer.where.ToString() + ": layer '" + layer.name + "'";
  SPILL_ASSIGN_OR_RETURN(layer.type, ScalarField(entry, "type", scope, context));
  SPILL_ASSIGN_OR_RETURN(layer.inputs, ReadInputs(entry, scope, prev, context));
  layer.params = YAML::Node(YAML::NodeType::Map);
  for (const auto& item : entry) {
    std::string key = item.first.Scalar();
    if (key == "name" || key == "type" || key == "inputs") continue;
    auto value = Substitute(item.second, scope.vars);
    if (!value.ok()) return value.status().WithContext(context + ", key '" + key + "'");
    layer.params[key] = *value;
  }
  if (spec_.layers.size() >= static_cast<size_t>(kMaxLayers)) {
    return InvalidArgument(context + ": the network expands to more than " +
                           std::to_string(kMaxLayers) + " layers, the limit");
  }
  auto existing = defined_.find(layer.name);
  if (existing != defined_.end()) {
    return InvalidArgument(context + ": the name is already used at " +
                           existing->second.ToString());
  }
  defined_[layer.name] = layer.where;
  std::string qualified = layer.name;
  spec_.layers.push_back(std::move(layer));
  return qualified;
}

StatusOr<Variables> NetParser::BlockVariables(const BlockDef& block, const YAML::Node& args,
                                              const Scope& scope, int64_t index,
                                              const std::string& where) {
  Variables outer = scope.vars;
  SetVariable(&outer, "i", YAML::Node(std::to_string(index)));
  Variables vars = spec_.params;  // model parameters are visible in every block
  std::set<std::string> known;
  for (const auto& item : block.params) {
    known.insert(item.first.Scalar());
    if (item.second.IsNull()) {
      SetVariable(&vars, item.first.Scalar(), YAML::Node());
      continue;
    }
    auto value = Substitute(item.second, spec_.params);
    if (!value.ok()) return value.status().WithContext(Where(block.file, block.line));
    SetVariable(&vars, item.first.Scalar(), *value);
  }
  if (args) {
    if (!args.IsMap()) return InvalidArgument(where + ": 'args' must be a map");
    for (const auto& item : args) {
      std::string key = item.first.Scalar();
      if (!known.count(key)) {
        return InvalidArgument(where + ": block '" + block.name + "' has no parameter '" + key +
                               "'; its parameters: " + (known.empty() ? "(none)" : Join(known)));
      }
      auto value = Substitute(item.second, outer);
      if (!value.ok()) return value.status().WithContext(where + ", argument '" + key + "'");
      SetVariable(&vars, key, *value);
    }
  }
  for (const auto& key : known) {
    if (vars.at(key).IsNull()) {
      return InvalidArgument(where + ": block '" + block.name + "' needs the argument '" + key +
                             "'");
    }
  }
  SetVariable(&vars, "i", YAML::Node(std::to_string(index)));
  return vars;
}

StatusOr<std::string> NetParser::ExpandInstance(const YAML::Node& entry, const Scope& scope,
                                                const std::string& prev) {
  std::string where = Where(scope.file, LineOf(entry));
  SPILL_RETURN_IF_ERROR(CheckKeys(entry, kInstanceKeys, scope.file, "a block instance"));
  SPILL_ASSIGN_OR_RETURN(std::string name, ScalarField(entry, "name", scope, where));
  SPILL_ASSIGN_OR_RETURN(std::string block_name, ScalarField(entry, "block", scope, where));
  auto found = blocks_.find(block_name);
  if (found == blocks_.end()) {
    std::set<std::string> names;
    for (const auto& b : blocks_) names.insert(b.first);
    return InvalidArgument(where + ": '" + name + "' uses unknown block '" + block_name +
                           "'; defined blocks: " + (names.empty() ? "(none)" : Join(names)));
  }
  if (scope.depth >= kMaxBlockDepth) {
    return InvalidArgument(where + ": blocks nested deeper than " + std::to_string(kMaxBlockDepth) +
                           " (does block '" + block_name + "' instantiate itself?)");
  }
  const BlockDef& block = found->second;
  int64_t repeat = 1;
  bool repeated = static_cast<bool>(entry["repeat"]);
  if (repeated) {
    auto value = Substitute(entry["repeat"], scope.vars);
    if (!value.ok()) return value.status().WithContext(where + ": 'repeat'");
    auto parsed = ParseInt64(value->IsScalar() ? value->Scalar() : "");
    if (!parsed.ok() || *parsed < 0 || *parsed > kMaxLayers) {
      return InvalidArgument(where + ": repeat: must be an integer in [0, " +
                             std::to_string(kMaxLayers) + "] (the layer limit)");
    }
    repeat = *parsed;
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<std::string> current, ReadInputs(entry, scope, prev, where));
  const size_t layers_before = spec_.layers.size();
  for (int64_t i = 1; i <= repeat; ++i) {
    if (i == 2) SPILL_RETURN_IF_ERROR(CheckRepeat(name, block.name, repeat, layers_before, where));
    std::string instance = scope.prefix + name + (repeated ? "." + std::to_string(i) : "");
    Scope child;
    child.prefix = instance + "/";
    child.inputs = current;
    child.file = block.file;
    child.depth = scope.depth + 1;
    child.instantiated = "in block '" + block.name + "' instantiated as '" + instance + "' at " +
                         where + (scope.instantiated.empty() ? "" : ", " + scope.instantiated);
    SPILL_ASSIGN_OR_RETURN(child.vars, BlockVariables(block, entry["args"], scope, i, where));
    SPILL_ASSIGN_OR_RETURN(std::string out, ExpandList(block.layers, child, block.output));
    if (repeated) aliases_[instance] = out;
    current = {out};
  }
  if (current.empty())
    return InvalidArgument(where + ": block instance '" + name + "' has no input to pass through");
  aliases_[scope.prefix + name] = current[0];
  return current[0];
}

Status NetParser::CheckRepeat(const std::string& name, const std::string& block, int64_t repeat,
                              size_t layers_before, const std::string& where) const {
  const int64_t before = static_cast<int64_t>(layers_before);
  const int64_t per_instance = static_cast<int64_t>(spec_.layers.size()) - before;
  int64_t total = 0;
  if (!CheckedMul(per_instance, repeat, &total) || !CheckedAdd(total, before, &total) ||
      total > kMaxLayers) {
    return InvalidArgument(where + ": '" + name + "' repeats block '" + block + "' " +
                           std::to_string(repeat) + " times at " + std::to_string(per_instance) +
                           " layers each: the network would pass the limit of " +
                           std::to_string(kMaxLayers) + " layers");
  }
  return Status::Ok();
}

std::string NetParser::Suggest(const std::string& name) const {
  std::string best;
  size_t best_distance = 4;
  auto consider = [&](const std::string& candidate) {
    size_t d = EditDistance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  };
  for (const auto& [n, where] : defined_) consider(n);
  for (const auto& [n, target] : aliases_) consider(n);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

Status NetParser::ResolveAliases() {
  for (auto& layer : spec_.layers) {
    for (auto& ref : layer.inputs) {
      std::string name;
      int output;
      SplitReference(ref, &name, &output);
      int hops = 0;
      for (auto it = aliases_.find(name); it != aliases_.end() && !defined_.count(name);
           it = aliases_.find(name)) {
        std::string target;
        int target_output;
        SplitReference(it->second, &target, &target_output);
        name = target;
        if (output == 0) output = target_output;
        if (++hops > 1000) break;
      }
      if (!defined_.count(name)) {
        return InvalidArgument(layer.where.ToString() + ": layer '" + layer.name + "' reads '" +
                               ref + "', which is not defined" + Suggest(name));
      }
      ref = output == 0 ? name : name + ":" + std::to_string(output);
    }
  }
  return Status::Ok();
}

StatusOr<NetSpec> ParseRoot(const YAML::Node& root, const std::string& label,
                            const ParamOverrides& overrides, const std::string& base_dir) {
  // The parser checks what it reads; this catch is the last line of defence
  // for a yaml-cpp or library exception nobody foresaw.
  try {
    NetParser parser(overrides);
    return parser.Parse(root, label, base_dir);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(label + ": not enough memory to expand the network");
  } catch (const std::exception& e) {
    return InvalidArgument(label + ": cannot read the network: " + e.what());
  }
}

}  // namespace

StatusOr<NetSpec> LoadNetFile(const std::string& path, const ParamOverrides& overrides) {
  SPILL_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(path, "network file"));
  std::string base = std::filesystem::path(path).parent_path().string();
  return ParseRoot(root, path, overrides, base.empty() ? "." : base);
}

StatusOr<NetSpec> ParseNetNode(const YAML::Node& root, const std::string& label,
                               const ParamOverrides& overrides, const std::string& base_dir) {
  return ParseRoot(root, label, overrides, base_dir);
}

StatusOr<NetSpec> ParseNetString(const std::string& text, const std::string& label,
                                 const ParamOverrides& overrides, const std::string& base_dir) {
  SPILL_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlText(text, label));
  return ParseRoot(root, label, overrides, base_dir);
}

}  // namespace spill
