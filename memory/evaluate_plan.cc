// The evaluator's model of a network and the plans its decisions stand for
// (evaluate.h).
#include <algorithm>

#include "memory/evaluate.h"
#include "memory/heap_pool.h"
#include "memory/recompute_policy.h"
#include "memory/workspace_selector.h"

namespace spill {
namespace {

// The workspace and algorithm names of an active step as the runtime's
// ChooseWorkspace gives them with no memory pressure.
size_t StepWorkspace(const NetworkView& view, const Step& step, const WorkspacePolicy& policy,
                     std::string* choice, std::vector<int>* indices) {
  const int ops = view.algorithms ? view.algorithms->NumOps(step.layer, step.pass) : 0;
  const int64_t images = view.StepImages(step.layer, step.pass);
  if (ops == 0) return view.FixedWorkspace(step, images);
  size_t bytes = 0;
  for (int op = 0; op < ops; ++op) {
    const std::vector<AlgorithmCandidate> candidates =
        view.algorithms->Candidates(step.layer, step.pass, op, images);
    const AlgorithmSelection s = SelectAlgorithm(candidates, kUnlimitedBudget, policy);
    indices->push_back(s.index);
    if (s.index < 0) continue;
    bytes = std::max(bytes, candidates[s.index].workspace);
    *choice += (choice->empty() ? "" : " ") + candidates[s.index].name;
  }
  return bytes;
}

size_t Blocks(size_t bytes) { return bytes == 0 ? 0 : RoundToBlocks(bytes); }

// Every step's algorithms under `policy` with no memory pressure, their
// workspaces (in pool blocks) and the iteration's modelled costs with them.
struct StepAlgorithms {
  std::vector<size_t> workspace;
  std::vector<std::vector<int>> algorithms;
  IterationCosts costs;
};
StepAlgorithms ModelStepAlgorithms(const NetworkView& view, const WorkspacePolicy& policy,
                                   const DeviceProfile& profile) {
  const Schedule& schedule = *view.schedule;
  const int steps = static_cast<int>(schedule.steps.size());
  StepAlgorithms out;
  out.workspace.assign(steps, 0);
  out.algorithms.assign(steps, {});
  MemoryLog log;  // the algorithms of each step, for the cost model
  for (int s = 0; s < steps; ++s) {
    StepRecord record;
    record.step = s;
    record.pass = schedule.steps[s].pass;
    record.layer = schedule.steps[s].layer;
    if (schedule.steps[s].active) {
      out.workspace[s] = Blocks(
          StepWorkspace(view, schedule.steps[s], policy, &record.algorithm, &out.algorithms[s]));
    }
    log.steps.push_back(record);
  }
  out.costs = ModelCosts(view, log, profile, nullptr);
  return out;
}

// Every step's algorithms of least workspace (the pinned ones under a
// pinned policy), as EvalModel::lean.
void SetLeanAlternatives(const NetworkView& view, const MemoryOptions& options,
                         const DeviceProfile& profile, EvalModel* m) {
  WorkspacePolicy lean;
  lean.kind = WorkspacePolicy::Kind::kMemoryOptimal;
  if (options.workspace.kind == WorkspacePolicy::Kind::kPin) lean = options.workspace;
  StepAlgorithms a = ModelStepAlgorithms(view, lean, profile);
  m->lean.assign(m->num_steps(), {});
  for (int s = 0; s < m->num_steps(); ++s) {
    m->lean[s] = {a.workspace[s], a.costs.step_seconds[s], std::move(a.algorithms[s])};
  }
}

// An activation gradient's gap: the longest stretch between two of its
// uses in a row, from the step that first writes it up to the step that
// next writes it (adding into it), while its host copy, taken after the
// first write, stays current (GradientGaps). It is worth moving out when
// another step runs in between - a residual block's shortcut gradient, held
// while the branch runs backward.
struct GradientGap {
  int from = -1, to = -1;  // the uses around it; -1: none
};

std::vector<GradientGap> GradientGaps(const Schedule& schedule, const Liveness& liveness) {
  const size_t count = schedule.tensors.size();
  std::vector<GradientGap> gaps(count);
  std::vector<int> previous(count, -1);  // its latest use so far (-1: none, or written again)
  for (int s = 0; s < static_cast<int>(schedule.steps.size()); ++s) {
    const Step& step = schedule.steps[s];
    for (const std::vector<TensorId>* ids : {&step.reads, &step.writes}) {
      for (TensorId t : *ids) {
        if (schedule.tensors[t].kind != TensorKind::kActivationGrad) continue;
        if (liveness.first_use[t] == s) {
          previous[t] = s;
          continue;
        }
        if (previous[t] < 0 || previous[t] == s) continue;
        GradientGap& g = gaps[t];
        if (g.from < 0 || s - previous[t] > g.to - g.from) g = {previous[t], s};
        const bool writes =
            std::find(step.writes.begin(), step.writes.end(), t) != step.writes.end();
        previous[t] = writes ? -1 : s;
      }
    }
  }
  return gaps;
}

void ClassifyGradient(TensorId t, const GradientGap& gap, EvalModel* m) {
  m->leaves_after[t] = gap.from;
  m->needed_at[t] = gap.to;
  m->offloadable[t] = gap.from >= 0 && gap.to - gap.from >= 2;
}

void NoSecondGap(TensorId t, EvalModel* m) {
  m->again_after[t] = -1;
  m->again_needed_at[t] = -1;
}

void ClassifyTensors(const NetworkView& view, EvalModel* m) {
  const Schedule& schedule = *m->schedule;
  const size_t count = schedule.tensors.size();
  const int n = m->num_layers;
  m->leaves_after.assign(count, -1);
  m->needed_at.assign(count, -1);
  m->again_after.assign(count, -1);
  m->again_needed_at.assign(count, -1);
  std::vector<int> backward_use(count, -1);  // the latest backward step that used it
  std::vector<bool> backward_write(count, false);
  for (int s = 0; s < m->num_steps(); ++s) {
    for (const std::vector<TensorId>* ids : {&schedule.steps[s].reads, &schedule.steps[s].writes}) {
      for (TensorId t : *ids) {
        if (s < n) {
          m->leaves_after[t] = std::max(m->leaves_after[t], s);
          continue;
        }
        if (m->needed_at[t] < 0) m->needed_at[t] = s;
        backward_write[t] = backward_write[t] || ids == &schedule.steps[s].writes;
        const int from = backward_use[t];
        if (from >= 0 && s - from >= 2 && s - from > m->again_needed_at[t] - m->again_after[t]) {
          m->again_after[t] = from;
          m->again_needed_at[t] = s;
        }
        backward_use[t] = s;
      }
    }
  }
  m->offloadable.assign(count, false);
  m->droppable.assign(count, false);
  m->forward_only.assign(count, false);
  m->sources.assign(count, {});
  const std::vector<GradientGap> gaps = GradientGaps(schedule, m->liveness);
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    const TensorInfo& info = schedule.tensors[t];
    if (info.kind == TensorKind::kActivationGrad) {
      ClassifyGradient(t, gaps[t], m);
      NoSecondGap(t, m);
      continue;
    }
    const bool forward = m->liveness.first_use[t] >= 0 && m->liveness.first_use[t] < n;
    const bool backward = m->needed_at[t] >= 0;
    // Leaving again needs a host copy that is still current.
    if (!forward || !IsTransient(info.kind) || !backward || backward_write[t]) NoSecondGap(t, m);
    if (!forward || !IsTransient(info.kind)) continue;
    m->offloadable[t] = backward;
    const LayerSummary& layer = view.layer(info.layer);
    // A layer is rerun to rebuild its only output (a second output would be
    // rebuilt too, whatever its state); never the input or the loss.
    const bool rerunnable = info.kind == TensorKind::kActivation && !layer.is_input &&
                            !layer.is_loss && schedule.layers[info.layer].outputs.size() == 1;
    if (!rerunnable) continue;
    m->droppable[t] = backward;
    m->forward_only[t] = !backward;
    m->sources[t] = RebuildSources(schedule, t);
  }
  for (TensorId t = 0; t < static_cast<TensorId>(count); ++t) {
    if (m->needed_at[t] >= 0) m->by_need.push_back(t);
    if (m->again_needed_at[t] >= 0) m->by_again_need.push_back(t);
  }
  std::stable_sort(m->by_need.begin(), m->by_need.end(),
                   [&](TensorId a, TensorId b) { return m->needed_at[a] < m->needed_at[b]; });
  std::stable_sort(m->by_again_need.begin(), m->by_again_need.end(), [&](TensorId a, TensorId b) {
    return m->again_needed_at[a] < m->again_needed_at[b];
  });
}

// Adds `bytes` to the steps [first, last] of `visiting`, clamped.
void Visit(size_t bytes, int first, int last, std::vector<size_t>* visiting) {
  const int steps = static_cast<int>(visiting->size());
  for (int s = std::max(first, 0); s <= std::min(last, steps - 1); ++s) (*visiting)[s] += bytes;
}

// Persistent tensors on the device all iteration, and those that live in
// host memory (memory.params) on the device over the steps their layer's
// transfers bring them in for (AddLayerParameterTransfers): parameters and
// solver state from the step before each of the layer's steps to the step
// after it; a gradient from its backward step, to the step after it where
// it is updated in host memory.
void CountPersistent(const Schedule& schedule, const MemoryOptions& options, EvalModel* m) {
  m->visiting.assign(m->num_steps(), 0);
  m->writing.assign(m->num_steps(), 0);
  std::vector<bool> visits(schedule.tensors.size(), false);
  for (TensorId t = 0; t < static_cast<TensorId>(schedule.tensors.size()); ++t) {
    const TensorInfo& info = schedule.tensors[t];
    if (IsTransient(info.kind)) continue;
    visits[t] = options.params.HomeOnHost(info.bytes);
    if (!visits[t]) m->persistent += m->bytes[t];
  }
  for (int layer = 0; layer < schedule.num_layers(); ++layer) {
    const int f = schedule.forward_step[layer], b = schedule.backward_step[layer];
    for (TensorId p : schedule.layers[layer].params) {
      if (!visits[p]) continue;
      Visit(m->bytes[p], f - 1, f + 1, &m->visiting);
      if (schedule.steps[b].active) {
        Visit(m->bytes[p], b - 1, options.update_on_host ? b : b + 1, &m->visiting);
      }
    }
  }
  m->host_params.assign(schedule.num_layers(), {});
  m->comes_ahead.assign(m->num_steps(), 0);
  m->visit_back.assign(schedule.tensors.size(), -1);
  m->returning.assign(m->num_steps(), {});
  for (int layer = 0; layer < schedule.num_layers(); ++layer) {
    const int b = schedule.backward_step[layer];
    for (TensorId p : schedule.layers[layer].params) {
      if (!visits[p]) continue;
      m->host_params[layer].push_back(p);
      m->has_host_params = true;
      const int f = schedule.forward_step[layer];
      if (f > 0) m->comes_ahead[f - 1] += m->bytes[p];
      if (schedule.steps[b].active) m->comes_ahead[b - 1] += m->bytes[p];
      // Without a backward step, what a rebuild brought stays.
      m->visit_back[p] = schedule.steps[b].active ? b - 1 : m->num_steps();
      if (schedule.steps[b].active) m->returning[b - 1].push_back(p);
    }
  }
  for (const ParameterSlot& slot : schedule.parameters) {
    const int b = schedule.backward_step[slot.layer];
    if (!visits[slot.param] || !schedule.steps[b].active) continue;
    // Written by the backward step: placed with its writes, after its reads.
    m->writing[b] += m->bytes[slot.grad];
    if (options.update_on_host) Visit(m->bytes[slot.grad], b + 1, b + 1, &m->visiting);
    if (options.update_on_host) continue;
    for (TensorId s : slot.state) Visit(m->bytes[s], b - 1, b + 1, &m->visiting);
  }
}

}  // namespace

StatusOr<EvalModel> BuildEvalModel(const NetworkView& view, const MemoryOptions& options,
                                   const DeviceProfile& profile, size_t min_bytes) {
  const Schedule& schedule = *view.schedule;
  EvalModel m;
  m.schedule = &schedule;
  m.num_layers = schedule.num_layers();
  m.profile = profile;
  if (m.num_layers == 0) return InvalidArgument("the network has no layers");
  for (const TensorInfo& t : schedule.tensors) {
    m.bytes.push_back(RoundToBlocks(std::max<size_t>(t.bytes, 1)));
  }
  CountPersistent(schedule, options, &m);
  StepAlgorithms own = ModelStepAlgorithms(view, options.workspace, profile);
  m.workspace = std::move(own.workspace);
  m.algorithms = std::move(own.algorithms);
  m.costs = std::move(own.costs);
  SetLeanAlternatives(view, options, profile, &m);
  m.liveness = AnalyzeLiveness(schedule, Phase::kTrain);
  ClassifyTensors(view, &m);
  for (TensorId t = 0; t < static_cast<TensorId>(schedule.tensors.size()); ++t) {
    if ((m.offloadable[t] || m.droppable[t]) && schedule.tensors[t].bytes >= min_bytes) {
      m.candidates.push_back(t);
    }
  }
  std::stable_sort(m.candidates.begin(), m.candidates.end(), [&](TensorId a, TensorId b) {
    return m.liveness.first_use[a] < m.liveness.first_use[b];
  });
  Evaluator evaluator(m);
  const Evaluation& base = evaluator.Run(KeepAll(m));
  m.base_seconds = base.seconds;
  m.base_peak = base.peak;
  m.base_step_peak = base.step_peak;
  return m;
}

Decisions KeepAll(const EvalModel& model) { return Decisions(model.schedule->tensors.size()); }

Decisions RandomDecisions(const EvalModel& model, std::mt19937_64& rng) {
  Decisions d = KeepAll(model);
  for (TensorId t : model.candidates) {
    std::vector<TensorChoice> choices = {TensorChoice::kKeep};
    if (model.offloadable[t]) choices.push_back(TensorChoice::kOffload);
    if (model.droppable[t]) choices.push_back(TensorChoice::kDrop);
    const TensorChoice c = choices[rng() % choices.size()];
    if (c == TensorChoice::kKeep) continue;
    const int lfu = model.leaves_after[t], u = model.needed_at[t];
    const int out = lfu + static_cast<int>(rng() % (u - lfu));
    const int in = out + 1 + static_cast<int>(rng() % (u - out));
    d[t] = {c, out, in};
    const int a = model.again_after[t], v = model.again_needed_at[t];
    if (c != TensorChoice::kOffload || a < 0 || rng() % 2 == 0) continue;
    d[t].again_out = a + static_cast<int>(rng() % (v - a));
    d[t].again_in = d[t].again_out + 1 + static_cast<int>(rng() % (v - d[t].again_out));
  }
  for (const std::vector<TensorId>& params : model.host_params) {
    for (TensorId p : params) d[p].late = static_cast<uint8_t>(rng() % 4);
  }
  return d;
}

namespace {

// "" when `x`'s second gap is unused or valid; else what is wrong with it.
std::string CheckSecondGap(const EvalModel& model, TensorId t, const TensorDecision& x) {
  if (x.again_out < 0 && x.again_in < 0) return "";
  if (x.choice != TensorChoice::kOffload) {
    return ": only an offloaded tensor leaves again (its host copy is current), not a " +
           std::string(TensorChoiceName(x.choice)) + "ed one";
  }
  const int a = model.again_after[t], v = model.again_needed_at[t];
  if (a < 0) return " has no second gap (no two backward reads with a step between)";
  if (x.again_out < a || x.again_out >= x.again_in || x.again_in > v) {
    return ": leaves again after step " + std::to_string(x.again_out) + " and is back before " +
           std::to_string(x.again_in) + "; expected " + std::to_string(a) +
           " <= again_out < again_in <= " + std::to_string(v);
  }
  return "";
}

}  // namespace

std::string CheckDecisions(const EvalModel& model, const Decisions& d) {
  const Schedule& schedule = *model.schedule;
  if (d.size() != schedule.tensors.size()) {
    return "decisions for " + std::to_string(d.size()) + " tensors; the network has " +
           std::to_string(schedule.tensors.size());
  }
  for (TensorId t = 0; t < static_cast<TensorId>(d.size()); ++t) {
    const TensorDecision& x = d[t];
    const std::string name = "'" + schedule.tensors[t].name + "'";
    const std::string again = CheckSecondGap(model, t, x);
    if (!again.empty()) return name + again;
    if (x.late != 0 && (model.visit_back[t] < 0 || x.late > (kLateForward | kLateBackward))) {
      return name + ": only a parameter living in host memory comes late, for its forward (" +
             std::to_string(kLateForward) + ") or backward (" + std::to_string(kLateBackward) +
             ") step; got " + std::to_string(x.late);
    }
    if (x.choice == TensorChoice::kKeep) continue;
    const bool allowed =
        x.choice == TensorChoice::kOffload ? model.offloadable[t] : model.droppable[t];
    if (!allowed) {
      return name + " cannot be " +
             (x.choice == TensorChoice::kOffload ? "offloaded (not written in forward and read "
                                                   "in backward)"
                                                 : "dropped (its layer cannot rebuild it alone)");
    }
    const int lfu = model.leaves_after[t], u = model.needed_at[t];
    if (x.out < lfu || x.out >= x.in || x.in > u) {
      return name + ": " + TensorChoiceName(x.choice) + " after step " + std::to_string(x.out) +
             " and back before step " + std::to_string(x.in) + "; expected " + std::to_string(lfu) +
             " <= out < in <= " + std::to_string(u);
    }
  }
  return "";
}

namespace {

// Calls add(t, step) for every prefetch `d` lists - the first gap's and the
// second's, ahead of the read that needs them - in order of that read.
template <typename Add>
void ForEachPrefetch(const EvalModel& model, const Decisions& d, Add&& add) {
  const std::vector<TensorId>& first = model.by_need;
  const std::vector<TensorId>& second = model.by_again_need;
  size_t i = 0, j = 0;
  while (i < first.size() || j < second.size()) {
    const bool take_first =
        j == second.size() ||
        (i < first.size() && model.needed_at[first[i]] <= model.again_needed_at[second[j]]);
    if (take_first) {
      const TensorId t = first[i++];
      if (d[t].choice == TensorChoice::kOffload && d[t].in < model.needed_at[t]) add(t, d[t].in);
    } else {
      const TensorId t = second[j++];
      if (d[t].again_out >= 0 && d[t].again_in < model.again_needed_at[t]) add(t, d[t].again_in);
    }
  }
}

}  // namespace

namespace {

// A late visit's parameters are not on the device at the step before it;
// a rebuild there brings them in, and they count as brought until the visit.
void CountLateParameters(const EvalModel& model, const Decisions& d, CompactPlan* plan) {
  const Schedule& schedule = *model.schedule;
  plan->unvisited.assign(model.num_steps(), 0);
  if (!model.has_host_params) return;  // nothing visits: no per-tensor copy per evaluation
  plan->visit_back = model.visit_back;
  for (int layer = 0; layer < model.num_layers; ++layer) {
    const int f = schedule.forward_step[layer], b = schedule.backward_step[layer];
    for (TensorId p : model.host_params[layer]) {
      if ((d[p].late & kLateForward) != 0 && f > 0) plan->unvisited[f - 1] += model.bytes[p];
      if ((d[p].late & kLateBackward) != 0 && schedule.steps[b].active) {
        plan->unvisited[b - 1] += model.bytes[p];
        plan->visit_back[p] = b;
      }
    }
  }
}

}  // namespace

void BuildCompactPlan(const EvalModel& model, const Decisions& d, CompactPlan* plan) {
  const Schedule& schedule = *model.schedule;
  const int steps = model.num_steps();
  const TensorId count = static_cast<TensorId>(schedule.tensors.size());
  plan->keep_until = model.liveness.last_use;
  plan->drop_at.assign(count, -1);
  std::vector<int>& keep = plan->keep_until;
  std::vector<int>& drop = plan->drop_at;
  // Dependents before their sources (a layer's outputs have larger ids than
  // its inputs): a source lives until its last dependent is dropped, and a
  // forward-only source is dropped then too.
  for (TensorId t = count - 1; t >= 0; --t) {
    if (d[t].choice == TensorChoice::kDrop) {
      drop[t] = d[t].out;
    } else if (drop[t] == -2) {  // a forward-only source of a dropped tensor
      drop[t] = keep[t];
    }
    if (drop[t] < 0) continue;
    for (TensorId x : model.sources[t]) {
      keep[x] = std::max(keep[x], drop[t]);
      if (model.forward_only[x] && d[x].choice == TensorChoice::kKeep) drop[x] = -2;
    }
  }
  // Lists by counting: after a step, offloads begin, finish, tensors are
  // dropped, then released; before it, prefetches, then rebuilds.
  enum { kBegin, kFinish, kDropList, kRelease, kAfterKinds };
  std::vector<int> count_after(static_cast<size_t>(steps) * kAfterKinds + 1, 0);
  std::vector<int> count_before(static_cast<size_t>(steps) * 2 + 1, 0);
  auto after_slot = [&](int s, int kind) { return s * kAfterKinds + kind; };
  auto visit = [&](auto&& add_after, auto&& add_before) {
    for (TensorId t = 0; t < count; ++t) {
      if (d[t].choice != TensorChoice::kOffload) continue;
      add_after(model.liveness.first_use[t], kBegin, TransferOp::kBeginOffload, t);
      if (d[t].again_out >= 0) add_after(d[t].again_out, kBegin, TransferOp::kBeginOffload, t);
    }
    for (TensorId t = 0; t < count; ++t) {
      if (d[t].choice != TensorChoice::kOffload) continue;
      add_after(d[t].out, kFinish, TransferOp::kFinishOffload, t);
      if (d[t].again_out >= 0) add_after(d[t].again_out, kFinish, TransferOp::kFinishOffload, t);
    }
    for (TensorId t = count - 1; t >= 0; --t) {
      if (drop[t] >= 0) add_after(drop[t], kDropList, TransferOp::kDrop, t);
    }
    for (TensorId t = 0; t < count; ++t) {
      if (keep[t] >= 0 && IsTransient(schedule.tensors[t].kind)) {
        add_after(keep[t], kRelease, TransferOp::kRelease, t);
      }
    }
    // Prefetches in order of need, first and second gaps merged.
    ForEachPrefetch(model, d,
                    [&](TensorId t, int in) { add_before(in, 0, TransferOp::kPrefetch, t); });
    for (TensorId t : model.by_need) {
      if (d[t].choice != TensorChoice::kDrop || d[t].in >= model.needed_at[t]) continue;
      add_before(d[t].in, 1, TransferOp::kRebuild, t);
    }
  };
  visit([&](int s, int kind, TransferOp, TensorId) { ++count_after[after_slot(s, kind) + 1]; },
        [&](int s, int kind, TransferOp, TensorId) { ++count_before[s * 2 + kind + 1]; });
  for (size_t i = 1; i < count_after.size(); ++i) count_after[i] += count_after[i - 1];
  for (size_t i = 1; i < count_before.size(); ++i) count_before[i] += count_before[i - 1];
  plan->after.resize(count_after.back());
  plan->before.resize(count_before.back());
  plan->after_start.resize(steps + 1);
  plan->before_start.resize(steps + 1);
  for (int s = 0; s <= steps; ++s) {
    plan->after_start[s] = count_after[std::min(s * kAfterKinds, steps * kAfterKinds)];
    plan->before_start[s] = count_before[std::min(s * 2, steps * 2)];
  }
  visit(
      [&](int s, int kind, TransferOp op, TensorId t) {
        plan->after[count_after[after_slot(s, kind)]++] = {op, t};
      },
      [&](int s, int kind, TransferOp op, TensorId t) {
        plan->before[count_before[s * 2 + kind]++] = {op, t};
      });
  CountLateParameters(model, d, plan);
}

int FirstAffectedStep(const EvalModel& model, TensorId t) {
  int step = model.liveness.first_use[t];
  std::vector<TensorId> pending = model.sources[t];  // forward-only sources extend theirs
  while (!pending.empty()) {
    const TensorId x = pending.back();
    pending.pop_back();
    step = std::min(step, model.liveness.last_use[x]);
    if (model.forward_only[x]) {
      pending.insert(pending.end(), model.sources[x].begin(), model.sources[x].end());
    }
  }
  return step;
}

PhasePlans ToPhasePlans(const EvalModel& model, const Decisions& d) {
  const Schedule& schedule = *model.schedule;
  CompactPlan compact;
  BuildCompactPlan(model, d, &compact);
  PhasePlans plans;
  TransferPlan& train = plans.train;
  train.phase = Phase::kTrain;
  train.Resize(model.num_steps());
  for (int s = 0; s < model.num_steps(); ++s) {
    train.before[s].assign(compact.before.begin() + compact.before_start[s],
                           compact.before.begin() + compact.before_start[s + 1]);
    train.after[s].assign(compact.after.begin() + compact.after_start[s],
                          compact.after.begin() + compact.after_start[s + 1]);
  }
  train.liveness = model.liveness;
  train.liveness.last_use = compact.keep_until;
  for (auto& list : train.liveness.dies_after) list.clear();
  for (TensorId t = 0; t < static_cast<TensorId>(compact.keep_until.size()); ++t) {
    if (compact.keep_until[t] >= 0) train.liveness.dies_after[compact.keep_until[t]].push_back(t);
  }
  // The algorithms the times and workspaces were modelled with.
  train.algorithms = model.algorithms;
  for (const std::vector<TensorId>& params : model.host_params) {
    for (TensorId p : params) {
      if (d[p].late == 0) continue;
      train.late_parameters.resize(schedule.tensors.size(), 0);
      train.late_parameters[p] = d[p].late;
    }
  }
  // The runtime's own recomputation policy stays off: every drop and rebuild
  // is in the lists.
  train.recompute.droppable.assign(schedule.tensors.size(), false);
  train.recompute.segment.assign(schedule.tensors.size(), -1);
  TransferPlan& eval = plans.eval;
  eval.phase = Phase::kEval;
  eval.liveness = AnalyzeLiveness(schedule, Phase::kEval);
  eval.Resize(eval.liveness.num_steps);
  for (int s = 0; s < eval.num_steps(); ++s) {
    for (TensorId t : eval.liveness.dies_after[s])
      eval.after[s].push_back({TransferOp::kRelease, t});
  }
  eval.recompute = train.recompute;
  return plans;
}

}  // namespace spill
