// Typed access to a layer's YAML parameters. Each accessor declares a key
// (with its default and its range) as it reads it, so a layer's constructor
// is the single place its parameters are defined. After construction, any
// key in the file that no accessor asked for is an error that lists the keys
// the layer knows. The conversions and messages are those of the one YAML
// reader (framework/config/yaml_reader.h):
//   models/x.yaml:12: layer 'conv1' (convolution): groups: must be an integer in [1, 1048576] (got
//   '0')
#ifndef SPILL_FRAMEWORK_CONFIG_LAYER_PARAMS_H_
#define SPILL_FRAMEWORK_CONFIG_LAYER_PARAMS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/config/net_spec.h"
#include "framework/config/yaml_reader.h"

namespace spill {

// Ceilings on the sizes a layer may declare: they keep every shape
// computation far from 64-bit overflow, and the network checks the size of
// every tensor it derives from them (framework/graph/net_checks.h).
constexpr int64_t kMaxLayerExtent = 1 << 20;  // channels, filters, outputs, kernels, image sides
constexpr int64_t kMaxLayerStride = 1 << 16;  // strides, dilations, padding
// The most elements one tensor (or one layer's unfolded workspace) may have:
// 1 TiB of float32, beyond any device budget.
constexpr int64_t kMaxTensorElements = int64_t{1} << 38;

// A layer's entry read as a YamlMap (Int, RequiredInt, Float, Bool, String,
// Choice, Fail, ok: the one reader's accessors and messages), with the forms
// layers use for pairs and lists, and errors that name the layer.
class LayerParams : public YamlMap {
 public:
  explicit LayerParams(const LayerSpec& spec);

  const LayerSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }

  // An integer or a list [h, w] in [min, max]; an integer n means [n, n].
  std::array<int64_t, 2> Pair(const std::string& key, std::array<int64_t, 2> fallback, int64_t min,
                              int64_t max);
  std::array<int64_t, 2> RequiredPair(const std::string& key, int64_t min, int64_t max);
  std::vector<int64_t> RequiredIntList(const std::string& key, int64_t min, int64_t max,
                                       size_t max_items);

  // The first error, or an unknown-key error listing the keys the layer
  // type takes, or OK.
  Status Finish() const;
  // "models/x.yaml:12: layer 'conv1' (convolution)"
  std::string Context() const;

 private:
  const LayerSpec& spec_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CONFIG_LAYER_PARAMS_H_
