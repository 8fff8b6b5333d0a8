// The one strict YAML reader: every YAML that spill reads (networks, block
// libraries, training configs, --set values) goes through it.
//
// Loading: the file must be a regular file of at most kMaxYamlFileBytes;
// yaml-cpp's exceptions become errors naming the file and line. The tree is
// then checked before anything else walks it: map keys must be plain scalars
// and appear once (yaml-cpp keeps both copies of a duplicate key and returns
// the first, silently dropping the second), nesting is at most kMaxYamlDepth
// levels (an alias to its own ancestor makes an endless tree) and the tree
// holds at most kMaxYamlNodes nodes counting every alias expansion (an alias
// bomb).
//
// Reading: YamlMap reads one map. Every accessor declares the key it reads,
// checks its type and range, and records the first error; Finish() returns
// it, or an error for the first key nobody asked for. Scalars convert the
// same way everywhere: integers are decimal and must fit in 64 bits, numbers
// must be finite, and booleans are true/false or yes/no (any case). A key
// given without a value (null) is an error - leave it out for the default -
// except for sections, where an empty one means all defaults.
//
// Messages: "<file>:<line>: <dotted.key>: <what was expected> (got '<text>')",
// with the layer named before the key where the map is a layer:
//   models/net.yaml:14: layer 'conv1' (convolution): groups: must be an integer in [1, 1048576]
//   (got '0')
#ifndef SPILL_FRAMEWORK_CONFIG_YAML_READER_H_
#define SPILL_FRAMEWORK_CONFIG_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/base/units.h"

namespace spill {

constexpr size_t kMaxYamlFileBytes = 8 * kMiB;
constexpr int kMaxYamlDepth = 64;           // nested maps and lists
constexpr int64_t kMaxYamlNodes = 1 << 20;  // nodes, every alias expansion counted

// Loads a YAML file; `what` names it in messages ("network file").
StatusOr<YAML::Node> LoadYamlFile(const std::string& path, const std::string& what);
// Parses YAML text; `label` stands for the file name in messages.
StatusOr<YAML::Node> LoadYamlText(const std::string& text, const std::string& label);

// 1-based line of a node, or 0 when it carries none (built in code).
int YamlLine(const YAML::Node& node);

// Scalars convert with ParseInt64, ParseFiniteDouble and ParseBool
// (framework/base/units.h), the same everywhere.

// An interval for numbers read from YAML: [min, max] with either end open.
struct Bounds {
  double min;
  double max;
  bool min_open = false;
  bool max_open = false;

  static Bounds Closed(double min, double max) { return {min, max, false, false}; }
  // (min, max]: e.g. a learning rate.
  static Bounds AboveTo(double min, double max) { return {min, max, true, false}; }
  // [min, max): e.g. a momentum.
  static Bounds FromBelow(double min, double max) { return {min, max, false, true}; }
  bool Contains(double value) const;
  std::string ToString() const;  // "in (0, 1]"
};

// Where a map was written, for messages about its keys.
struct YamlOrigin {
  std::string file;
  int line = 0;         // used when a key's node carries no line (substituted values)
  std::string note;     // after file:line, e.g. " (in block 'unit' instantiated as 'u.1' ...)"
  std::string subject;  // before the key, e.g. "layer 'conv1' (convolution)"
};

class YamlMap {
 public:
  // `path` is the dotted name of this map ("solver.schedule"); empty at the
  // top of a file. An absent or null node reads as an empty map.
  YamlMap(const YAML::Node& node, const YamlOrigin& origin, const std::string& path);

  bool Has(const std::string& key);
  int64_t Int(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  int64_t RequiredInt(const std::string& key, int64_t min, int64_t max);
  double Float(const std::string& key, double fallback, const Bounds& bounds);
  bool Bool(const std::string& key, bool fallback);
  std::string String(const std::string& key, const std::string& fallback);
  // One of `choices`; anything else is an error listing them.
  std::string Choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& fallback);
  // "2GiB", "512MiB", 1000000; within [min, max] bytes.
  size_t Bytes(const std::string& key, size_t fallback, size_t min, size_t max);
  // A list of at most `max_items` integers in [min, max]; `required`: must be present.
  std::vector<int64_t> IntList(const std::string& key, int64_t min, int64_t max, size_t max_items,
                               bool required = false);
  std::vector<float> FloatList(const std::string& key, const Bounds& bounds, size_t max_items);
  // An integer n (meaning [n, n]) or a list [h, w], each in [min, max].
  std::vector<int64_t> Pair(const std::string& key, const std::vector<int64_t>& fallback,
                            int64_t min, int64_t max, bool required = false);
  YAML::Node Raw(const std::string& key);   // declared, unchecked
  YamlMap Section(const std::string& key);  // an empty map when absent

  // Records a problem the caller found with `key` (e.g. two values that
  // disagree); only the first problem is kept.
  void Fail(const std::string& key, const std::string& message);
  // The first error, else the first undeclared key, else OK. The message
  // lists the declared keys after `known_label` ("expected one of").
  Status Finish(const std::string& known_label = "expected one of") const;
  // "file:line: [subject: ]dotted.key"
  std::string Where(const std::string& key) const;
  std::string Dotted(const std::string& key) const;
  bool ok() const { return error_.ok(); }

 private:
  YAML::Node Get(const std::string& key);
  // False when `key` is absent; an explicit null is an error (and false).
  bool Given(const std::string& key, const YAML::Node& value);
  bool IsMap() const;
  std::string Prefix(const YAML::Node& near) const;
  std::string PrefixAt(int line) const;  // 0: the origin's line

  YAML::Node node_;
  YamlOrigin origin_;
  std::string path_;
  std::set<std::string> known_;
  Status error_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CONFIG_YAML_READER_H_
