// Strict reading of a YAML configuration section: every accessor declares
// the key it reads, values are type-checked, and keys nobody asked for are
// errors. Messages name the file, the line and the dotted key:
//   configs/resnet18.yaml:14: solver.lr: must be a number (got 'fast')
#ifndef SPILL_TOOLS_CONFIG_READER_H_
#define SPILL_TOOLS_CONFIG_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/status.h"

namespace spill {

class ConfigSection {
 public:
  // `path` is the dotted name of this section ("solver"); empty at the top.
  ConfigSection(const YAML::Node& node, const std::string& file, const std::string& path);

  bool Has(const std::string& key);
  int64_t Int(const std::string& key, int64_t fallback);
  double Float(const std::string& key, double fallback);
  bool Bool(const std::string& key, bool fallback);
  std::string String(const std::string& key, const std::string& fallback);
  std::string Choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& fallback);
  size_t Bytes(const std::string& key, size_t fallback);  // "2GiB", "512MiB", 1000000
  std::vector<int64_t> IntList(const std::string& key);
  std::vector<float> FloatList(const std::string& key);
  YAML::Node Raw(const std::string& key);         // declared, unchecked
  ConfigSection Section(const std::string& key);  // empty when absent

  // First type error, else the first unknown key, else OK. Call it on every
  // section that was read.
  Status Finish() const;
  std::string Where(const std::string& key) const;

 private:
  YAML::Node Get(const std::string& key);
  bool IsMap() const;  // false for absent sections
  void Fail(const std::string& key, const std::string& message);

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::set<std::string> known_;
  Status error_;
};

}  // namespace spill

#endif  // SPILL_TOOLS_CONFIG_READER_H_
