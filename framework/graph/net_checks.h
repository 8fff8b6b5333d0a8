// Checks a network passes before anything is planned or run, kept apart
// from Net's build phases so that each rule is one function:
//
//   * every tensor a layer declares (outputs, parameters, saved tensors) has
//     positive dimensions and at most kMaxTensorElements elements, computed
//     without overflow - so the planner's byte arithmetic never wraps;
//   * the network has a loss layer, and every layer feeds one: a layer whose
//     output reaches no loss gets no gradient and is dead weight in every
//     plan, which is almost always a wiring mistake in the file.
//
// Ceilings the network builder enforces are here too, for tools and docs.
#ifndef SPILL_FRAMEWORK_GRAPH_NET_CHECKS_H_
#define SPILL_FRAMEWORK_GRAPH_NET_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/graph/layer.h"
#include "framework/schedule/schedule.h"

namespace spill {

constexpr int64_t kMaxBatch = 1 << 20;  // examples per batch

// `outputs`, `params` and `aux` of `layer`, checked as described above;
// errors are kOutOfMemory for sizes (no budget holds them) and name the tensor.
Status CheckTensorSizes(const Layer& layer, const std::vector<Shape>& outputs,
                        const std::vector<ParamSpec>& params, const std::vector<AuxSpec>& aux);

// Every layer of `decls` feeds one of the layers marked is_loss.
Status CheckLossesReachable(const std::vector<LayerDecl>& decls,
                            const std::vector<SourceLocation>& where, const std::string& file);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_NET_CHECKS_H_
