// Typed access to a layer's YAML parameters. Each accessor declares a key
// (with its default) as it reads it, so a layer's constructor is the single
// place its parameters are defined. After construction, any key in the file
// that no accessor asked for is an error that lists the keys the layer knows.
#ifndef SPILL_FRAMEWORK_LAYER_PARAMS_H_
#define SPILL_FRAMEWORK_LAYER_PARAMS_H_

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "framework/net_spec.h"
#include "framework/status.h"

namespace spill {

class LayerParams {
 public:
  explicit LayerParams(const LayerSpec& spec);

  const LayerSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }

  int64_t Int(const std::string& key, int64_t fallback);
  int64_t RequiredInt(const std::string& key);
  double Float(const std::string& key, double fallback);
  bool Bool(const std::string& key, bool fallback);
  std::string String(const std::string& key, const std::string& fallback);
  // One of `choices`; anything else is an error listing them.
  std::string Choice(const std::string& key, const std::vector<std::string>& choices,
                     const std::string& fallback);
  // An integer or a list [h, w]; an integer n means [n, n].
  std::array<int64_t, 2> Pair(const std::string& key, std::array<int64_t, 2> fallback);
  std::array<int64_t, 2> RequiredPair(const std::string& key);
  std::vector<int64_t> RequiredIntList(const std::string& key);

  // Records a problem found by the layer itself (e.g. a value out of range).
  void Fail(const std::string& key, const std::string& message);

  // The first error, or an unknown-key error, or OK.
  Status Finish() const;
  // "models/x.yaml:12: layer 'conv1' (convolution)"
  std::string Context() const;

 private:
  YAML::Node Find(const std::string& key);
  static bool Present(const YAML::Node& node);
  bool ParseInt(const YAML::Node& node, int64_t* out) const;

  const LayerSpec& spec_;
  std::set<std::string> known_;
  Status error_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_LAYER_PARAMS_H_
