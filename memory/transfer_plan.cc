#include "memory/transfer_plan.h"

#include <algorithm>
#include <sstream>

#include "framework/base/strings.h"

namespace spill {

const char* TransferOpName(TransferOp op) {
  switch (op) {
    case TransferOp::kBeginOffload:
      return "begin_offload";
    case TransferOp::kFinishOffload:
      return "finish_offload";
    case TransferOp::kFinishOffloadLazily:
      return "finish_offload_lazily";
    case TransferOp::kCancelOffload:
      return "cancel_offload";
    case TransferOp::kPrefetch:
      return "prefetch";
    case TransferOp::kDrop:
      return "drop";
    case TransferOp::kRebuild:
      return "rebuild";
    case TransferOp::kRelease:
      return "release";
    case TransferOp::kUpdate:
      return "update";
    case TransferOp::kGather:
      return "gather";
    case TransferOp::kReduceScatter:
      return "reduce_scatter";
  }
  return "?";
}

void TransferPlan::Resize(int steps) {
  before.assign(steps, {});
  after.assign(steps, {});
}

int TransferPlan::Count(TransferOp op) const {
  int n = 0;
  for (const auto* lists : {&before, &after}) {
    for (const auto& list : *lists) {
      for (const TransferAction& a : list) n += a.op == op;
    }
  }
  return n;
}

std::string TransferPlan::ToString(const Schedule& schedule) const {
  std::ostringstream out;
  for (int s = 0; s < num_steps(); ++s) {
    for (const auto& [label, list] : {std::pair{"before", &before[s]}, {"after", &after[s]}}) {
      if (list->empty()) continue;
      out << s + 1 << " " << label << ":";
      for (const TransferAction& a : *list) {
        out << " " << TransferOpName(a.op) << " " << schedule.tensors[a.tensor].name;
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace spill
