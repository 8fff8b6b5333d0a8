#include "framework/graph/initializer.h"

#include <cmath>

#include "framework/base/random.h"

namespace spill {

std::vector<float> InitialValues(const ParamSpec& spec, uint64_t seed, const std::string& name) {
  const int64_t n = spec.shape.numel();
  std::vector<float> values(n);
  const Initializer& init = spec.init;
  const uint64_t stream = MixSeed(seed, HashString(name));
  switch (init.kind) {
    case Initializer::Kind::kConstant:
      for (auto& v : values) v = init.value;
      break;
    case Initializer::Kind::kHeNormal: {
      const double std = std::sqrt(2.0 / static_cast<double>(init.fan_in));
      for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(std * NormalAt(stream, i));
      break;
    }
    case Initializer::Kind::kXavierUniform: {
      const double bound = std::sqrt(6.0 / static_cast<double>(init.fan_in + init.fan_out));
      for (int64_t i = 0; i < n; ++i) {
        values[i] = static_cast<float>((2.0 * UniformAt(stream, i) - 1.0) * bound);
      }
      break;
    }
    case Initializer::Kind::kNormal:
      for (int64_t i = 0; i < n; ++i)
        values[i] = static_cast<float>(init.value * NormalAt(stream, i));
      break;
    case Initializer::Kind::kUniform:
      for (int64_t i = 0; i < n; ++i) {
        values[i] = static_cast<float>((2.0 * UniformAt(stream, i) - 1.0) * init.value);
      }
      break;
  }
  return values;
}

Status InitializeParameters(const Net& net, TensorStore& store, uint64_t seed) {
  const Schedule& schedule = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    const LayerDecl& decl = net.decl(id);
    for (size_t p = 0; p < decl.params.size(); ++p) {
      TensorId tensor = schedule.layers[id].params[p];
      const std::string& name = schedule.tensors[tensor].name;
      std::vector<float> values = InitialValues(decl.params[p], seed, name);
      SPILL_RETURN_IF_ERROR(store.WriteTensor(tensor, values.data()));
    }
  }
  return Status::Ok();
}

}  // namespace spill
