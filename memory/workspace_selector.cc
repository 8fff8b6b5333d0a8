#include "memory/workspace_selector.h"

#include "framework/base/units.h"

namespace spill {
namespace {

// True when a is strictly better than b, two candidates that both qualify;
// a candidate comes before b in the list when neither is (the scans below
// keep the earliest of equals). By memory, times never count: they are
// measured anew in every run, and equal workspaces must be broken the same
// way in every run and every memory mode.
bool Better(const AlgorithmCandidate& a, const AlgorithmCandidate& b, bool by_memory) {
  if (by_memory) return a.workspace < b.workspace;
  if (a.seconds != b.seconds) return a.seconds < b.seconds;
  return a.workspace < b.workspace;
}

}  // namespace

std::string WorkspacePolicy::ToString() const {
  switch (kind) {
    case Kind::kDynamic:
      return "dynamic";
    case Kind::kFastest:
      return "fastest";
    case Kind::kMemoryOptimal:
      return "memory_optimal";
    case Kind::kCap:
      return "cap:" + FormatBytes(static_cast<double>(cap));
    case Kind::kPin:
      return "pin:" + name;
  }
  return "?";
}

StatusOr<WorkspacePolicy> ParseWorkspacePolicy(const std::string& text) {
  WorkspacePolicy p;
  if (text == "dynamic") return p;
  if (text == "fastest") {
    p.kind = WorkspacePolicy::Kind::kFastest;
    return p;
  }
  if (text == "memory_optimal") {
    p.kind = WorkspacePolicy::Kind::kMemoryOptimal;
    return p;
  }
  if (text.rfind("cap:", 0) == 0) {
    p.kind = WorkspacePolicy::Kind::kCap;
    SPILL_ASSIGN_OR_RETURN(p.cap, ParseBytes(text.substr(4)));
    return p;
  }
  if (text.rfind("pin:", 0) == 0 && text.size() > 4) {
    p.kind = WorkspacePolicy::Kind::kPin;
    p.name = text.substr(4);
    return p;
  }
  return InvalidArgument("unknown workspace policy '" + text +
                         "'; expected dynamic, fastest, memory_optimal, cap:SIZE (e.g. cap:8MiB) "
                         "or pin:ALGORITHM");
}

AlgorithmSelection SelectAlgorithm(const std::vector<AlgorithmCandidate>& candidates,
                                   size_t free_bytes, const WorkspacePolicy& policy) {
  AlgorithmSelection selection;
  if (candidates.empty()) {
    selection.reason = "no candidates";
    return selection;
  }
  if (policy.kind == WorkspacePolicy::Kind::kPin) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].name == policy.name) {
        selection.index = static_cast<int>(i);
        selection.reason = "pinned";
        return selection;
      }
    }
  }
  size_t limit = free_bytes;
  bool by_memory =
      policy.kind == WorkspacePolicy::Kind::kPin;  // pinned one missing: least workspace
  switch (policy.kind) {
    case WorkspacePolicy::Kind::kDynamic:
      break;
    case WorkspacePolicy::Kind::kFastest:
      limit = SIZE_MAX;
      break;
    case WorkspacePolicy::Kind::kMemoryOptimal:
      by_memory = true;
      limit = SIZE_MAX;
      break;
    case WorkspacePolicy::Kind::kCap:
      limit = std::min(free_bytes, policy.cap);
      break;
    case WorkspacePolicy::Kind::kPin:
      limit = SIZE_MAX;
      break;
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].workspace > limit) continue;
    if (selection.index < 0 || Better(candidates[i], candidates[selection.index], by_memory)) {
      selection.index = static_cast<int>(i);
    }
  }
  if (selection.index >= 0) {
    selection.reason = by_memory ? "least workspace"
                       : limit == SIZE_MAX
                           ? "fastest"
                           : "fastest within " + FormatBytes(static_cast<double>(limit));
    return selection;
  }
  // Nothing fits: the smallest workspace is the best that can be done.
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (selection.index < 0 || Better(candidates[i], candidates[selection.index], true)) {
      selection.index = static_cast<int>(i);
    }
  }
  selection.reason = "none fits " + FormatBytes(static_cast<double>(limit)) + "; least workspace";
  return selection;
}

}  // namespace spill
