#include "memory/planners/rules.h"

#include <algorithm>

#include "memory/mobility.h"

namespace spill {

StatusOr<DeviceProfile> PlannerProfile(const MemoryOptions& options) {
  const std::string name = ReadPlannerSettings(options.settings).profile;
  if (name != kMeasuredProfile) return FindDeviceProfile(name);
  if (options.measured_profile == nullptr) {
    return InvalidArgument(
        "memory.planner.profile: 'cpu' is this machine, measured: the programs calibrate it for "
        "a run on the CPU device (train, plan, widest, deepest, bench_train); name a GPU profile "
        "otherwise");
  }
  return *options.measured_profile;
}

StatusOr<EvalModel> PlannerModel(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, PlannerProfile(options));
  return BuildEvalModel(view, options, profile, options.settings.Bytes(MinOffloadSetting()));
}

namespace {

// Whether a planner that found `plans` should plan again with every tensor
// a candidate: it found none, and memory.min_offload was left at its default.
bool Widens(const StatusOr<PhasePlans>& plans, const MemoryOptions& options) {
  return !plans.ok() && plans.status().code() == StatusCode::kOutOfMemory &&
         !options.settings.Given(MinOffloadSetting().key);
}

}  // namespace

StatusOr<PhasePlans> PlanWidening(const NetworkView& view, const MemoryOptions& options,
                                  const OptionsPlanner& plan) {
  StatusOr<PhasePlans> plans = plan(options);
  if (!Widens(plans, options)) return plans;
  MemoryOptions every = options;
  SPILL_RETURN_IF_ERROR(every.settings.Set(MinOffloadSetting().key, "0"));
  SPILL_ASSIGN_OR_RETURN(const EvalModel narrow, PlannerModel(view, options));
  SPILL_ASSIGN_OR_RETURN(const EvalModel wide, PlannerModel(view, every));
  if (wide.candidates.size() == narrow.candidates.size()) return plans;
  return plan(every);
}

StatusOr<PhasePlans> PlanOnModel(const NetworkView& view, const MemoryOptions& options,
                                 const ModelPlanner& plan) {
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
  StatusOr<PhasePlans> plans = plan(model);
  if (!Widens(plans, options)) return plans;
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, PlannerProfile(options));
  SPILL_ASSIGN_OR_RETURN(EvalModel every, BuildEvalModel(view, options, profile, 0));
  if (every.candidates.size() == model.candidates.size()) return plans;
  return plan(every);
}

size_t PlannerLimit(const MemoryOptions& options) {
  return ReadPlannerSettings(options.settings).LimitUnder(options.device_budget);
}

Status NoPlanWithin(const std::string& planner, const EvalModel& model, size_t limit,
                    size_t best_peak, const std::string& detail) {
  return OutOfMemory(
      planner + " found no plan within its limit of " + FormatBytes(static_cast<double>(limit)) +
      " (" + std::to_string(limit) + " bytes): " +
      (best_peak > 0
           ? "the lowest peak it reached is " + FormatBytes(static_cast<double>(best_peak)) + ", "
           : "") +
      "liveness peaks at " + FormatBytes(static_cast<double>(model.base_peak)) + " with " +
      std::to_string(model.candidates.size()) + " tensors to offload or drop" +
      (detail.empty() ? "" : "; " + detail) + " (raise memory.planner.limit or the device budget)");
}

std::string BelowMinimumAt(const EvalModel& model, int step) {
  std::vector<bool> candidate(model.schedule->tensors.size(), false);
  for (TensorId t : model.candidates) candidate[t] = true;
  size_t count = 0, bytes = 0;
  for (TensorId t = 0; t < static_cast<TensorId>(candidate.size()); ++t) {
    if (candidate[t] || !(model.offloadable[t] || model.droppable[t])) continue;
    const bool first =
        model.leaves_after[t] >= 0 && model.leaves_after[t] < step && step < model.needed_at[t];
    const bool again =
        model.again_after[t] >= 0 && model.again_after[t] < step && step < model.again_needed_at[t];
    if (!first && !again) continue;
    ++count;
    bytes += model.bytes[t];
  }
  if (count == 0) return "";
  return std::to_string(count) + " tensors under memory.min_offload (" +
         FormatBytes(static_cast<double>(bytes)) +
         " in all) could leave the device there: a lower memory.min_offload lets the planners "
         "move them";
}

std::string BelowMinimumAtPeak(const EvalModel& model, const Decisions& d) {
  Evaluator evaluator(model);
  const bool whole = d.size() == model.schedule->tensors.size();
  return BelowMinimumAt(model, evaluator.Run(whole ? d : KeepAll(model)).peak_step);
}

std::string Joined(const std::string& a, const std::string& b) {
  return a.empty() || b.empty() ? a + b : a + "; " + b;
}

PlanRules::PlanRules(const EvalModel& model, size_t limit)
    : model_(model), limit_(limit), evaluator_(model) {}

void PlanRules::Complete(const Choices& choices, Decisions* d) {
  const EvalModel& m = model_;
  *d = KeepAll(m);
  bool offloads = false;
  for (TensorId t : m.candidates) {
    const int lfu = m.leaves_after[t], u = m.needed_at[t];
    if (choices[t] == TensorChoice::kDrop) {
      (*d)[t] = {TensorChoice::kDrop, lfu, u};
    } else if (choices[t] == TensorChoice::kOffload) {
      (*d)[t] = {TensorChoice::kOffload, u - 1, u};  // held until backward: copy times
      offloads = true;
    }
  }
  if (!offloads) {
    if (m.has_host_params) {
      curve_ = evaluator_.Run(*d).step_peak;
      ComeLate(d);
    }
    return;
  }
  // Every offloaded tensor held: when each copy ends, with no stall.
  const Evaluation& held = evaluator_.Run(*d);
  curve_ = held.step_peak;
  for (TensorId t : m.candidates) {
    if (choices[t] != TensorChoice::kOffload) continue;
    for (int s = m.leaves_after[t] + 1; s < m.needed_at[t]; ++s) {
      curve_[s] -= m.bytes[t];
    }
  }
  // Freed once the copy is done, or where the room is needed.
  for (TensorId t : m.candidates) {
    if (choices[t] != TensorChoice::kOffload) continue;
    const int u = m.needed_at[t];
    int g = m.leaves_after[t];
    while (g + 1 < u && held.step_end[g] < held.offload_end[t] &&
           curve_[g + 1] + m.bytes[t] <= limit_) {
      curve_[++g] += m.bytes[t];
    }
    (*d)[t].out = g;
    (*d)[t].in = u;
  }
  // Back in order of use, each as early as the curve allows.
  int earliest = m.num_layers;
  for (TensorId t : m.by_need) {
    if (choices[t] != TensorChoice::kOffload) continue;
    const int u = m.needed_at[t];
    const int lower = std::max(earliest, (*d)[t].out + 1);
    int q = u;
    while (q - 1 >= lower && curve_[q - 1] + m.bytes[t] <= limit_) --q;
    for (int s = q; s < u; ++s) curve_[s] += m.bytes[t];
    (*d)[t].in = q;
    earliest = std::max(earliest, q);
  }
  LeaveAgain(choices, d);
  ComeLate(d);
}

void PlanRules::LeaveAgain(const Choices& choices, Decisions* d) {
  const EvalModel& m = model_;
  for (TensorId t : m.by_again_need) {
    if (choices[t] != TensorChoice::kOffload) continue;
    const int a = m.again_after[t], v = m.again_needed_at[t];
    const auto first = curve_.begin() + a + 1, last = curve_.begin() + v;
    if (*std::max_element(first, last) <= limit_) continue;
    for (auto it = first; it != last; ++it) *it -= m.bytes[t];
    int q = v;
    while (q - 1 > a && curve_[q - 1] + m.bytes[t] <= limit_) --q;
    for (int s = q; s < v; ++s) curve_[s] += m.bytes[t];
    (*d)[t].again_out = a;
    (*d)[t].again_in = q;
  }
}

void ComeLate(const EvalModel& m, size_t limit, std::vector<size_t>* curve, Decisions* d) {
  const Schedule& schedule = *m.schedule;
  for (int s = 0; s + 1 < m.num_steps(); ++s) {
    if ((*curve)[s] <= limit) continue;
    if (!schedule.steps[s + 1].active) continue;
    const int layer = schedule.steps[s + 1].layer;
    const uint8_t visit = s + 1 < m.num_layers ? kLateForward : kLateBackward;
    for (TensorId p : m.host_params[layer]) {
      (*d)[p].late |= visit;
      (*curve)[s] -= m.bytes[p];
    }
  }
}

void PlanRules::ComeLate(Decisions* d) { spill::ComeLate(model_, limit_, &curve_, d); }

const Evaluation& PlanRules::Evaluate(const Choices& choices, Decisions* decisions) {
  Complete(choices, &decisions_);
  if (decisions != nullptr) *decisions = decisions_;
  return evaluator_.Run(decisions_);
}

}  // namespace spill
