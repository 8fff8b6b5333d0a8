// The fixed rules of the DQN planner's paper (§4.5), shared by the planners
// that choose per tensor only whether to keep, offload or drop it (dqn,
// greedy, the exhaustive optimum): when a dropped tensor is rebuilt, when an
// offloaded one leaves the device and when it comes back. Every rule reads
// the projected memory curve of the plan (the evaluator's), never the pool
// at run time, and emits explicit actions; nothing the runtime does then
// depends on the budget.
//
//   drop      after the tensor's last forward use; rebuilt when its first
//             backward step reads it (sources rebuilt on the way).
//   offload   the copy begins after the step that writes it; the device
//             block is freed after the first step at or past its last
//             forward use that ends after the copy does (no stall), or
//             earlier where holding it would put the curve over the limit.
//   prefetch  in order of first backward use (no overtaking), each as early
//             as bringing it back keeps the curve within the limit until its
//             use, and not before backward begins; one that fits nowhere
//             comes back when it is read.
//   again     an offloaded activation read by two backward steps far apart
//             leaves again after the first (no copy: its host copy is
//             current) where holding it would put the curve over the limit
//             between them, and comes back as early as the curve allows.
//   late      parameters living in host memory come one step ahead of each
//             step of their layer, or with the step itself where the step
//             ahead is over the limit.
// The curve is the evaluator's per-step peak with every offloaded tensor
// absent between its last forward use and its first backward use, each
// freeing and prefetch then adding it back over the steps it covers - exact
// inside those steps, an upper bound at the step a prefetch starts.
#ifndef SPILL_MEMORY_PLANNERS_RULES_H_
#define SPILL_MEMORY_PLANNERS_RULES_H_

#include <functional>
#include <string>
#include <vector>

#include "memory/evaluate.h"
#include "memory/planners/planner_settings.h"

namespace spill {

using Choices = std::vector<TensorChoice>;  // per tensor

// The profile a planner times plans on: memory.planner.profile by name, or
// under 'cpu' this machine's as the program calibrated it
// (MemoryOptions::measured_profile; an error where none was).
StatusOr<DeviceProfile> PlannerProfile(const MemoryOptions& options);
// The evaluator's model a planner works on under `options`: times on the
// profile memory.planner.profile, candidates of at least memory.min_offload.
StatusOr<EvalModel> PlannerModel(const NetworkView& view, const MemoryOptions& options);
// What a planner does on a model: its plans, or kOutOfMemory.
using ModelPlanner = std::function<StatusOr<PhasePlans>(EvalModel& model)>;
// `plan` on the planner's model (PlannerModel). memory.min_offload bounds
// the search, not what fits: where no plan fits and the setting was left at
// its default, `plan` runs again with every tensor a candidate, and its
// report is the one returned if that finds none either.
StatusOr<PhasePlans> PlanOnModel(const NetworkView& view, const MemoryOptions& options,
                                 const ModelPlanner& plan);
// The same for a planner that builds its own model from the options (dqn,
// milp): where it finds no plan and memory.min_offload was left at its
// default, it plans again with the setting at 0.
using OptionsPlanner = std::function<StatusOr<PhasePlans>(const MemoryOptions& options)>;
StatusOr<PhasePlans> PlanWidening(const NetworkView& view, const MemoryOptions& options,
                                  const OptionsPlanner& plan);
// The limit a plan is made for: memory.planner.limit, or the device budget.
size_t PlannerLimit(const MemoryOptions& options);
// What is left at step `step` that memory.min_offload alone keeps there:
// "" when nothing, else a clause naming how many tensors and bytes, and
// that a lower memory.min_offload lets the planners move them.
std::string BelowMinimumAt(const EvalModel& model, int step);
// The same at the peak step of the plan `d` stands for (no decisions:
// keeping every tensor).
std::string BelowMinimumAtPeak(const EvalModel& model, const Decisions& d);
// "a; b", or whichever is not empty.
std::string Joined(const std::string& a, const std::string& b);
// A planner's out-of-memory report: no plan it found keeps within `limit`;
// `best_peak` is the lowest peak it reached (0: it reached no plan at all).
Status NoPlanWithin(const std::string& planner, const EvalModel& model, size_t limit,
                    size_t best_peak, const std::string& detail);

// The `late` rule on `curve` (a plan's memory per step): the parameters of
// the layer of each step whose step ahead is over `limit` come late in `d`,
// and leave that step's curve.
void ComeLate(const EvalModel& model, size_t limit, std::vector<size_t>* curve, Decisions* d);

class PlanRules {
 public:
  PlanRules(const EvalModel& model, size_t limit);

  // The decisions `choices` stand for under the rules.
  void Complete(const Choices& choices, Decisions* decisions);
  // Completes and evaluates; `decisions` (may be null) receives the plan.
  const Evaluation& Evaluate(const Choices& choices, Decisions* decisions = nullptr);

  const EvalModel& model() const { return model_; }
  size_t limit() const { return limit_; }
  bool Fits(const Evaluation& e) const { return e.peak <= limit_; }

 private:
  // The `again` rule, on the curve the others left.
  void LeaveAgain(const Choices& choices, Decisions* d);
  // The `late` rule, on the curve the others left.
  void ComeLate(Decisions* d);

  const EvalModel& model_;
  size_t limit_;
  Evaluator evaluator_;
  Decisions decisions_;
  std::vector<size_t> curve_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_RULES_H_
