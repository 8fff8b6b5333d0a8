#include "framework/graph/layer_registry.h"

#include <set>

#include "framework/base/strings.h"
#include "framework/config/layer_params.h"
#include "framework/config/net_spec.h"

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

LayerRegistry::LayerRegistry() {
  for (DeviceType device : {DeviceType::kCpu, DeviceType::kCuda}) {
    SPILL_CHECK(static_cast<int>(device) == static_cast<int>(devices_.size()));
    devices_.push_back(std::make_unique<Registry<LayerFactory>>(
        std::string(DeviceTypeName(device)) + " layer type", "types"));
  }
}

bool LayerRegistry::Register(const std::string& type, DeviceType device, LayerFactory factory) {
  return For(device).Add(type, std::move(factory));
}

std::vector<std::string> LayerRegistry::Types(DeviceType device) const {
  return For(device).Names();
}

StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const LayerSpec& spec,
                                                       DeviceType device) const {
  std::string context = spec.where.ToString() + ": layer '" + spec.name + "'";
  if (const LayerFactory* factory = For(device).Find(spec.type)) {
    LayerParams params(spec);
    std::unique_ptr<Layer> layer = (*factory)(params);
    SPILL_RETURN_IF_ERROR(params.Finish());
    layer->SetIdentity(spec);
    return layer;
  }
  std::set<std::string> all;
  for (const auto& registry : devices_) {
    for (const std::string& type : registry->Names()) all.insert(type);
  }
  if (all.count(spec.type) > 0) {
    // Only --config=cuda builds link the CUDA layers.
    const std::string hint =
        device == DeviceType::kCuda ? " in this build (CUDA layers come with --config=cuda)" : "";
    return Unimplemented(context + ": type '" + spec.type + "' has no " + DeviceTypeName(device) +
                         " implementation" + hint);
  }
  return InvalidArgument(context + ": unknown layer type '" + spec.type +
                         "'; known types: " + Join(all));
}

}  // namespace spill
