#include "tools/common/checks.h"

#include <set>

#include "framework/base/strings.h"

namespace spill {

Status CheckPinnedAlgorithm(const Net& net, const WorkspacePolicy& policy) {
  if (policy.kind != WorkspacePolicy::Kind::kPin) return Status::Ok();
  std::set<std::string> names;
  for (int id = 0; id < net.num_layers(); ++id) {
    const Layer& layer = net.layer(id);
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      for (int op = 0; op < layer.num_algorithm_ops(pass); ++op) {
        for (const AlgorithmCandidate& c : layer.algorithm_candidates(pass, op, layer.batch())) {
          names.insert(c.name);
        }
      }
    }
  }
  // A network without choices (no convolutions) has nothing to pin.
  if (names.empty() || names.count(policy.name)) return Status::Ok();
  return InvalidArgument("workspace policy 'pin:" + policy.name +
                         "' names no algorithm of network '" + net.name() +
                         "'; its operations can run: " + Join(names));
}

}  // namespace spill
