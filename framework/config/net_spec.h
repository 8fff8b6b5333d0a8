// A network as written by the user, after blocks and repeats are expanded.
//
// The YAML format (see models/README.md for the full reference):
//
//   name: resnet18
//   include: [blocks/resnet.yaml]     # block libraries, relative to this file
//   params: {classes: 1000, size: 224}  # overridable from a training config
//   blocks:
//     basic:
//       params: {filters: null, stride: 1}   # null = required argument
//       layers:
//         - {name: conv1, type: convolution, filters: $filters, stride: $stride}
//         - {name: add, type: add, inputs: [conv1, $in]}
//   layers:
//     - {name: data, type: input, shape: [3, $size, $size]}
//     - {name: res2, block: basic, repeat: 2, args: {filters: 64}}
//     - {name: fc, type: fully_connected, outputs: $classes}
//
// A layer without `inputs` reads the previous entry. `$x` substitutes a
// parameter (keeping its type), `${expr}` evaluates integer arithmetic
// (+ - * / % and parentheses), and `${x}` inside a longer string interpolates.
//
// Files are read by the strict YAML reader (framework/config/yaml_reader.h): unknown
// keys at every level and duplicate keys are errors. Expansion has ceilings
// (below) that its errors name; a repeat whose expansion would pass the
// layer ceiling is refused after its first instance, before the rest is
// built.
#ifndef SPILL_FRAMEWORK_CONFIG_NET_SPEC_H_
#define SPILL_FRAMEWORK_CONFIG_NET_SPEC_H_

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "framework/base/source_location.h"
#include "framework/base/status.h"

namespace spill {

constexpr int64_t kMaxLayers = 1 << 19;  // layers of an expanded network (524,288)
constexpr int kMaxBlockDepth = 16;       // blocks instantiated inside blocks
constexpr int kMaxIncludeDepth = 16;     // files included from included files

struct LayerSpec {
  std::string name;                 // fully qualified: "res2.1/conv1"
  std::string type;                 // registered layer type
  std::vector<std::string> inputs;  // fully qualified references, "layer" or "layer:k"
  YAML::Node params;                // every other key of the entry, substituted
  SourceLocation where;
};

struct NetSpec {
  std::string name;
  std::string file;                          // the top-level file (or label for strings)
  std::vector<LayerSpec> layers;             // in file order
  std::map<std::string, YAML::Node> params;  // model parameters after overrides
};

// Model parameter overrides, e.g. from a training config: {classes: 10}.
using ParamOverrides = std::map<std::string, YAML::Node>;

StatusOr<NetSpec> LoadNetFile(const std::string& path, const ParamOverrides& overrides = {});
// Parses a network from text; `label` stands for the file name in messages and
// `base_dir` resolves includes.
StatusOr<NetSpec> ParseNetString(const std::string& text, const std::string& label,
                                 const ParamOverrides& overrides = {},
                                 const std::string& base_dir = ".");

// Parses a network from an already loaded YAML map (e.g. a `model:` section
// of a training config); line numbers in errors refer to `label`.
StatusOr<NetSpec> ParseNetNode(const YAML::Node& root, const std::string& label,
                               const ParamOverrides& overrides = {},
                               const std::string& base_dir = ".");

// Splits "layer:2" into ("layer", 2); a plain name has output 0.
void SplitReference(const std::string& ref, std::string* layer, int* output);

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CONFIG_NET_SPEC_H_
