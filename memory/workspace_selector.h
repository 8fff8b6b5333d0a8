// Choice of a computation algorithm and its workspace under the free device
// memory of a step (SuperNeurons §3.5). Functional tensors are allocated
// first; the workspace comes from what remains, and each operation takes the
// fastest algorithm whose workspace fits.
//
// A pure function: candidates (name, measured time, workspace bytes) and the
// free bytes in, a choice and the reason out.
//
// Policies, for comparison:
//   dynamic         fastest whose workspace fits the free bytes (the default)
//   fastest         fastest regardless of free memory (the runtime must evict
//                   or fail to make room)
//   memory_optimal  smallest workspace, the earliest candidate among equals
//   cap             fastest whose workspace fits min(cap, free bytes) - a fixed
//                   limit such as Caffe's 8 MiB
//   pin             always the named algorithm (equivalence tests pin one, as
//                   algorithms round differently)
// Ties are broken without timings, so choices are deterministic: equal
// times go to the smaller workspace, then to the earlier candidate; equal
// workspaces under memory_optimal (and when nothing fits) go to the earlier
// candidate, whatever the times. The candidate order is the backend's own
// (cuDNN's heuristic ranking, fixed when a layer is shaped; a fixed list on
// the CPU), while times are re-measured in every run: two runs or two
// memory modes that ordered equal-workspace candidates by time could pick
// different algorithms, which round differently.
#ifndef SPILL_MEMORY_WORKSPACE_SELECTOR_H_
#define SPILL_MEMORY_WORKSPACE_SELECTOR_H_

#include <cstddef>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/schedule/declarations.h"

namespace spill {

struct WorkspacePolicy {
  enum class Kind { kDynamic, kFastest, kMemoryOptimal, kCap, kPin };
  Kind kind = Kind::kDynamic;
  size_t cap = 0;    // kCap only
  std::string name;  // kPin only

  std::string ToString() const;
};

// "dynamic", "fastest", "memory_optimal", "cap:8MiB" or "pin:im2col_image".
StatusOr<WorkspacePolicy> ParseWorkspacePolicy(const std::string& text);

struct AlgorithmSelection {
  int index = -1;      // into the candidates; -1 when the list is empty
  std::string reason;  // e.g. "fastest within 12.0 MiB free"
};

AlgorithmSelection SelectAlgorithm(const std::vector<AlgorithmCandidate>& candidates,
                                   size_t free_bytes, const WorkspacePolicy& policy);

}  // namespace spill

#endif  // SPILL_MEMORY_WORKSPACE_SELECTOR_H_
