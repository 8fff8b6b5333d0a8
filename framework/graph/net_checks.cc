#include "framework/graph/net_checks.h"

#include "framework/base/checked_math.h"
#include "framework/config/layer_params.h"

namespace spill {
namespace {

constexpr size_t kNamesShown = 5;  // unreachable layers named in one message

std::string Context(const Layer& layer) {
  return layer.where().ToString() + ": layer '" + layer.name() + "' (" + layer.type() + ")";
}

Status CheckShape(const Layer& layer, const std::string& tensor, const Shape& shape) {
  int64_t elements = 0;
  for (int64_t d : shape.dims) {
    if (d < 1) {
      return InvalidArgument(Context(layer) + ": " + tensor + " would be " + shape.ToString() +
                             "; every dimension must be at least 1");
    }
  }
  if (!CheckedProduct({shape.n(), shape.c(), shape.h(), shape.w()}, &elements) ||
      elements > kMaxTensorElements) {
    return OutOfMemory(Context(layer) + ": " + tensor + " would be " + shape.ToString() +
                       ", more than " + std::to_string(kMaxTensorElements) +
                       " elements (1 TiB); no device budget holds it");
  }
  return Status::Ok();
}

}  // namespace

Status CheckTensorSizes(const Layer& layer, const std::vector<Shape>& outputs,
                        const std::vector<ParamSpec>& params, const std::vector<AuxSpec>& aux) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    SPILL_RETURN_IF_ERROR(CheckShape(layer, "output " + std::to_string(i), outputs[i]));
  }
  for (const ParamSpec& p : params) {
    SPILL_RETURN_IF_ERROR(CheckShape(layer, "parameter '" + p.name + "'", p.shape));
  }
  for (const AuxSpec& a : aux) {
    SPILL_RETURN_IF_ERROR(CheckShape(layer, "saved tensor '" + a.name + "'", a.shape));
  }
  return Status::Ok();
}

Status CheckLossesReachable(const std::vector<LayerDecl>& decls,
                            const std::vector<SourceLocation>& where, const std::string& file) {
  std::vector<bool> feeds(decls.size(), false);
  std::vector<int> stack;
  for (size_t id = 0; id < decls.size(); ++id) {
    if (decls[id].is_loss) {
      feeds[id] = true;
      stack.push_back(static_cast<int>(id));
    }
  }
  if (stack.empty()) {
    return InvalidArgument(file +
                           ": the network has no loss layer (e.g. type: softmax_loss); "
                           "training and planning need one");
  }
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    for (const auto& in : decls[id].inputs) {
      if (!feeds[in.layer]) {
        feeds[in.layer] = true;
        stack.push_back(in.layer);
      }
    }
  }
  std::vector<size_t> dead;
  for (size_t id = 0; id < decls.size(); ++id) {
    if (!feeds[id]) dead.push_back(id);
  }
  if (dead.empty()) return Status::Ok();
  std::string names;
  for (size_t i = 0; i < dead.size() && i < kNamesShown; ++i) {
    names += (i ? ", '" : "'") + decls[dead[i]].name + "'";
  }
  if (dead.size() > kNamesShown)
    names += " and " + std::to_string(dead.size() - kNamesShown) + " more";
  return InvalidArgument(where[dead[0]].ToString() + ": " + std::to_string(dead.size()) +
                         " layer(s) feed no loss layer: " + names +
                         "; every layer must lead to a loss (remove them or wire them in)");
}

}  // namespace spill
