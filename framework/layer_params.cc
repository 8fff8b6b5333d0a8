#include "framework/layer_params.h"

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
    : spec_(spec), map_(spec.params, OriginOf(spec), "") {}

std::string LayerParams::Context() const {
  return spec_.where.ToString() + ": layer '" + spec_.name + "' (" + spec_.type + ")";
}

void LayerParams::Fail(const std::string& key, const std::string& message) {
  map_.Fail(key, message);
}

int64_t LayerParams::Int(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  return map_.Int(key, fallback, min, max);
}

int64_t LayerParams::RequiredInt(const std::string& key, int64_t min, int64_t max) {
  return map_.RequiredInt(key, min, max);
}

double LayerParams::Float(const std::string& key, double fallback, const Bounds& bounds) {
  return map_.Float(key, fallback, bounds);
}

bool LayerParams::Bool(const std::string& key, bool fallback) { return map_.Bool(key, fallback); }

std::string LayerParams::String(const std::string& key, const std::string& fallback) {
  return map_.String(key, fallback);
}

std::string LayerParams::Choice(const std::string& key, const std::vector<std::string>& choices,
                                const std::string& fallback) {
  return map_.Choice(key, choices, fallback);
}

std::array<int64_t, 2> LayerParams::Pair(const std::string& key, std::array<int64_t, 2> fallback,
                                         int64_t min, int64_t max) {
  return ToArray(map_.Pair(key, {fallback[0], fallback[1]}, min, max));
}

std::array<int64_t, 2> LayerParams::RequiredPair(const std::string& key, int64_t min, int64_t max) {
  return ToArray(map_.Pair(key, {min, min}, min, max, /*required=*/true));
}

std::vector<int64_t> LayerParams::RequiredIntList(const std::string& key, int64_t min, int64_t max,
                                                  size_t max_items) {
  return map_.IntList(key, min, max, max_items, /*required=*/true);
}

Status LayerParams::Finish() const { return map_.Finish(spec_.type + " layers take"); }

}  // namespace spill
