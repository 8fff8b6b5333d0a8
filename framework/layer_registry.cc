#include "framework/layer_registry.h"

#include <algorithm>
#include <set>

#include "framework/layer_params.h"
#include "framework/net_spec.h"
#include "framework/strings.h"

namespace spill {

void Layer::SetIdentity(const LayerSpec& spec) {
  name_ = spec.name;
  type_ = spec.type;
  where_ = spec.where;
}

LayerRegistry& LayerRegistry::Get() {
  static LayerRegistry* registry = new LayerRegistry();
  return *registry;
}

bool LayerRegistry::Register(const std::string& type, DeviceType device, LayerFactory factory) {
  for (const auto& entry : entries_) {
    SPILL_CHECK(!(entry.first.first == type && entry.first.second == device))
        << "layer type '" << type << "' registered twice for " << DeviceTypeName(device);
  }
  entries_.push_back({{type, device}, std::move(factory)});
  return true;
}

std::vector<std::string> LayerRegistry::Types(DeviceType device) const {
  std::vector<std::string> types;
  for (const auto& entry : entries_) {
    if (entry.first.second == device) types.push_back(entry.first.first);
  }
  std::sort(types.begin(), types.end());
  return types;
}

StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const LayerSpec& spec,
                                                       DeviceType device) const {
  std::string context = spec.where.ToString() + ": layer '" + spec.name + "'";
  bool other_device = false;
  for (const auto& entry : entries_) {
    if (entry.first.first != spec.type) continue;
    if (entry.first.second != device) {
      other_device = true;
      continue;
    }
    LayerParams params(spec);
    std::unique_ptr<Layer> layer = entry.second(params);
    SPILL_RETURN_IF_ERROR(params.Finish());
    layer->SetIdentity(spec);
    return layer;
  }
  if (other_device) {
    // Only --config=cuda builds link the CUDA layers.
    const std::string hint =
        device == DeviceType::kCuda ? " in this build (CUDA layers come with --config=cuda)" : "";
    return Unimplemented(context + ": type '" + spec.type + "' has no " + DeviceTypeName(device) +
                         " implementation" + hint);
  }
  std::set<std::string> all;
  for (const auto& entry : entries_) all.insert(entry.first.first);
  return InvalidArgument(context + ": unknown layer type '" + spec.type +
                         "'; known types: " + Join(all));
}

}  // namespace spill
