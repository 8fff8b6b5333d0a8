// The DQN planner's environment (the paper's §4.5-4.8): one decision per
// candidate tensor in schedule order - keep, offload or drop it - with the
// fixed rules of rules.h placing frees, prefetches and rebuilds on the
// projected memory curve. A state is the decisions so far; undecided
// tensors are kept. After each decision the environment scores the
// projected plan with the evaluator:
//   reward    -(time added by the decision) / (the keep-all iteration's
//             time): with gamma 1 the return is the plan's overhead;
//   terminal  after the last candidate (a plan that fits may still get
//             faster: a drop that frees room lets an offload leave later,
//             without a stall); ending over the limit costs a further -1 (a
//             whole iteration). When everything kept fits, there is nothing
//             to decide.
// Every state's projected plan is a whole plan, so the learner keeps the
// best one that fits from any state of any episode.
#ifndef SPILL_MEMORY_PLANNERS_DQN_ENVIRONMENT_H_
#define SPILL_MEMORY_PLANNERS_DQN_ENVIRONMENT_H_

#include <cstdint>
#include <vector>

#include "memory/planners/dqn/op_graph.h"
#include "memory/planners/rules.h"

namespace spill {

constexpr double kInfeasiblePenalty = 1.0;  // iterations

// Decisions on candidates 0..k-1, by index into EvalModel::candidates.
using Prefix = std::vector<uint8_t>;  // TensorChoice values

class DqnEnvironment {
 public:
  DqnEnvironment(const EvalModel& model, size_t limit, const OpGraph& graph);

  void Reset();
  // Decides the current candidate; returns the reward.
  double Step(TensorChoice choice);

  int k() const { return k_; }
  int num_candidates() const { return static_cast<int>(model_.candidates.size()); }
  bool done() const { return done_; }
  bool fits() const { return fits_; }
  double seconds() const { return seconds_; }
  size_t peak() const { return peak_; }
  const Prefix& prefix() const { return prefix_; }
  const Decisions& decisions() const { return decisions_; }

  // The choices open for candidate `k` (keep first).
  std::vector<TensorChoice> Actions(int k) const;
  // The node that stands for `choice` on candidate `k`.
  int ActionNode(int k, TensorChoice choice) const;
  int CurrentNode(int k) const { return graph_.current_node[k]; }
  // Feature 5 of every node in the state (prefix, k).
  void OpenFeatures(const Prefix& prefix, int k, std::vector<float>* open) const;

 private:
  const EvalModel& model_;
  const OpGraph& graph_;
  PlanRules rules_;
  Choices choices_;
  Prefix prefix_;
  Decisions decisions_;
  int k_ = 0;
  bool done_ = false, fits_ = false;
  double seconds_ = 0;
  size_t peak_ = 0;
};

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_DQN_ENVIRONMENT_H_
