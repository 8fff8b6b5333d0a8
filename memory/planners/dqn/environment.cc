#include "memory/planners/dqn/environment.h"

namespace spill {
namespace {

constexpr float kOpen = 1.0f, kTaken = 0.5f;

}  // namespace

DqnEnvironment::DqnEnvironment(const EvalModel& model, size_t limit, const OpGraph& graph)
    : model_(model), graph_(graph), rules_(model, limit) {}

void DqnEnvironment::Reset() {
  choices_.assign(model_.schedule->tensors.size(), TensorChoice::kKeep);
  prefix_.clear();
  k_ = 0;
  const Evaluation& e = rules_.Evaluate(choices_, &decisions_);
  seconds_ = e.seconds;
  peak_ = e.peak;
  fits_ = rules_.Fits(e);
  done_ = fits_ || num_candidates() == 0;  // nothing to decide
}

double DqnEnvironment::Step(TensorChoice choice) {
  choices_[model_.candidates[k_]] = choice;
  prefix_.push_back(static_cast<uint8_t>(choice));
  ++k_;
  const double before = seconds_;
  const Evaluation& e = rules_.Evaluate(choices_, &decisions_);
  seconds_ = e.seconds;
  peak_ = e.peak;
  fits_ = rules_.Fits(e);
  done_ = k_ == num_candidates();
  double reward = -(seconds_ - before) / model_.base_seconds;
  if (done_ && !fits_) reward -= kInfeasiblePenalty;
  return reward;
}

std::vector<TensorChoice> DqnEnvironment::Actions(int k) const {
  std::vector<TensorChoice> actions = {TensorChoice::kKeep};
  const TensorId t = model_.candidates[k];
  if (model_.offloadable[t] && graph_.offload_node[k] >= 0) {
    actions.push_back(TensorChoice::kOffload);
  }
  if (model_.droppable[t] && graph_.drop_node[k] >= 0) actions.push_back(TensorChoice::kDrop);
  return actions;
}

int DqnEnvironment::ActionNode(int k, TensorChoice choice) const {
  switch (choice) {
    case TensorChoice::kOffload:
      return graph_.offload_node[k];
    case TensorChoice::kDrop:
      return graph_.drop_node[k];
    case TensorChoice::kKeep:
      break;
  }
  return kNothingNode;
}

void DqnEnvironment::OpenFeatures(const Prefix& prefix, int k, std::vector<float>* open) const {
  open->assign(graph_.num_nodes, 0.0f);
  (*open)[kNothingNode] = kOpen;
  for (int j = 0; j < num_candidates(); ++j) {
    for (TensorChoice c : {TensorChoice::kOffload, TensorChoice::kDrop}) {
      const int node = ActionNode(j, c);
      if (node < 0) continue;
      if (j < k) {
        (*open)[node] = prefix[j] == static_cast<uint8_t>(c) ? kTaken : 0.0f;
      } else {
        const TensorId t = model_.candidates[j];
        (*open)[node] = (c == TensorChoice::kOffload ? model_.offloadable[t] : model_.droppable[t])
                            ? kOpen
                            : 0.0f;
      }
    }
  }
}

}  // namespace spill
