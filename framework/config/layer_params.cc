#include "framework/config/layer_params.h"

namespace spill {
namespace {

YamlOrigin OriginOf(const LayerSpec& spec) {
  YamlOrigin origin;
  origin.file = spec.where.file;
  origin.line = spec.where.line;
  if (!spec.where.instantiated.empty()) origin.note = " (" + spec.where.instantiated + ")";
  origin.subject = "layer '" + spec.name + "' (" + spec.type + ")";
  return origin;
}

std::array<int64_t, 2> ToArray(const std::vector<int64_t>& v) { return {v[0], v[1]}; }

}  // namespace

LayerParams::LayerParams(const LayerSpec& spec)
    : YamlMap(spec.params, OriginOf(spec), ""), spec_(spec) {}

std::string LayerParams::Context() const {
  return spec_.where.ToString() + ": layer '" + spec_.name + "' (" + spec_.type + ")";
}

std::array<int64_t, 2> LayerParams::Pair(const std::string& key, std::array<int64_t, 2> fallback,
                                         int64_t min, int64_t max) {
  return ToArray(YamlMap::Pair(key, {fallback[0], fallback[1]}, min, max));
}

std::array<int64_t, 2> LayerParams::RequiredPair(const std::string& key, int64_t min, int64_t max) {
  return ToArray(YamlMap::Pair(key, {min, min}, min, max, /*required=*/true));
}

std::vector<int64_t> LayerParams::RequiredIntList(const std::string& key, int64_t min, int64_t max,
                                                  size_t max_items) {
  return IntList(key, min, max, max_items, /*required=*/true);
}

Status LayerParams::Finish() const { return YamlMap::Finish(spec_.type + " layers take"); }

}  // namespace spill
