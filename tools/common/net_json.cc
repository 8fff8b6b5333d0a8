#include "tools/common/net_json.h"

#include <nlohmann/json.hpp>

#include "framework/base/units.h"

namespace spill {
namespace {

using Json = nlohmann::ordered_json;

// A YAML value as JSON: booleans and numbers keep their type, other scalars
// are strings, null is null.
Json FromYaml(const YAML::Node& node) {
  if (node.IsMap()) {
    Json out = Json::object();
    for (const auto& item : node) out[item.first.Scalar()] = FromYaml(item.second);
    return out;
  }
  if (node.IsSequence()) {
    Json out = Json::array();
    for (const auto& item : node) out.push_back(FromYaml(item));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "false") return s == "true";
  if (auto i = ParseInt64(s); i.ok()) return *i;
  if (auto d = ParseFiniteDouble(s); d.ok()) return *d;
  return s;
}

Json ShapeJson(const Shape& s) { return {s.n(), s.c(), s.h(), s.w()}; }

Json LayerJson(const Net& net, int id) {
  const Schedule& s = net.schedule();
  const LayerDecl& d = net.decl(id);
  Json inputs = Json::array(), outputs = Json::array(), tensors = Json::array();
  for (const auto& in : d.inputs) inputs.push_back({net.decl(in.layer).name, in.output});
  for (const Shape& shape : d.output_shapes) outputs.push_back(ShapeJson(shape));
  for (size_t p = 0; p < d.params.size(); ++p) {
    tensors.push_back({{"name", s.tensors[s.layers[id].params[p]].name},
                       {"shape", ShapeJson(d.params[p].shape)},
                       {"trainable", d.params[p].trainable},
                       {"decay_mult", d.params[p].decay_mult}});
  }
  return {
      {"name", d.name},   {"type", net.layer(id).type()}, {"params", FromYaml(net.spec(id).params)},
      {"inputs", inputs}, {"outputs", outputs},           {"tensors", tensors}};
}

}  // namespace

std::string NetToJson(const Net& net) {
  Json layers = Json::array();
  for (int id : net.schedule().route) layers.push_back(LayerJson(net, id));
  const Json out = {{"name", net.name()}, {"batch", net.batch()}, {"layers", layers}};
  return out.dump() + "\n";
}

}  // namespace spill
