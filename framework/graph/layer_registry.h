// Layer types register themselves next to their code, per device:
//
//   SPILL_REGISTER_LAYER(convolution, kCpu, CpuConvolutionLayer);
//
// The class needs a constructor taking LayerParams& (framework/config/layer_params.h).
// There is no central list of names; an unknown type is an error listing the
// registered ones. Bazel libraries holding registrations need
// `alwayslink = True`.
#ifndef SPILL_FRAMEWORK_GRAPH_LAYER_REGISTRY_H_
#define SPILL_FRAMEWORK_GRAPH_LAYER_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/registry.h"
#include "framework/device/device.h"
#include "framework/graph/layer.h"

namespace spill {

using LayerFactory = std::function<std::unique_ptr<Layer>(LayerParams&)>;

class LayerRegistry {
 public:
  static LayerRegistry& Get();

  bool Register(const std::string& type, DeviceType device, LayerFactory factory);
  // Builds a layer from its spec; unknown types, unknown keys and bad values
  // are errors naming the file, line and layer.
  StatusOr<std::unique_ptr<Layer>> Create(const LayerSpec& spec, DeviceType device) const;
  std::vector<std::string> Types(DeviceType device) const;

 private:
  LayerRegistry();
  // One registry of types per device (DeviceType's values).
  Registry<LayerFactory>& For(DeviceType device) { return *devices_[static_cast<int>(device)]; }
  const Registry<LayerFactory>& For(DeviceType device) const {
    return *devices_[static_cast<int>(device)];
  }

  std::vector<std::unique_ptr<Registry<LayerFactory>>> devices_;
};

}  // namespace spill

#define SPILL_REGISTER_LAYER(type_name, device, Class)                          \
  static const bool spill_registered_##type_name##_##device =                   \
      ::spill::LayerRegistry::Get().Register(                                   \
          #type_name, ::spill::DeviceType::device,                              \
          [](::spill::LayerParams& params) -> std::unique_ptr<::spill::Layer> { \
            return std::make_unique<Class>(params);                             \
          })

#endif  // SPILL_FRAMEWORK_GRAPH_LAYER_REGISTRY_H_
