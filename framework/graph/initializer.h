// Parameter initialization: He (normal, fan-in) and Xavier (uniform) for
// weights, constants for biases and BatchNorm. Values depend only on the seed
// and the parameter's name, not on the order of layers or the device.
#ifndef SPILL_FRAMEWORK_GRAPH_INITIALIZER_H_
#define SPILL_FRAMEWORK_GRAPH_INITIALIZER_H_

#include <cstdint>
#include <vector>

#include "framework/device/device.h"
#include "framework/graph/net.h"
#include "framework/schedule/tensor_store.h"

namespace spill {

// Host values for one parameter.
std::vector<float> InitialValues(const ParamSpec& spec, uint64_t seed, const std::string& name);

// Fills every parameter of `net` held by `store` on `device`.
Status InitializeParameters(const Net& net, TensorStore& store, uint64_t seed);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_INITIALIZER_H_
