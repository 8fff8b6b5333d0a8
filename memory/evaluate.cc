// The evaluator's replay: the memory runtime's handling of a transfer plan
// (runtime.cc, runtime_residency.cc, residency.cc) restricted to the actions
// planners emit, and the timeline simulator's clocks (sim/timeline.cc), in
// one pass. Each function below names the runtime function it mirrors; a
// change there must change here (tests/evaluate_test.cc catches a drift).
#include "memory/evaluate.h"

#include <algorithm>

#include "memory/heap_pool.h"

namespace spill {
namespace {

enum Where : uint8_t { kUnallocated, kDevice, kOffloading, kHost, kPrefetching, kDropped };

enum Flag : uint8_t {
  kDeferred = 1,      // past its last use, kept for a dropped tensor's rebuild
  kHoldsSources = 2,  // dropped: counted in its sources' references
  kHostValid = 4,     // its host copy is current
  kHasHost = 8,       // it has a host block
  kDropping = 16,     // simulator: its next free is a drop's (no wait)
};

constexpr double kNoCopy = -1;

}  // namespace

const char* TensorChoiceName(TensorChoice choice) {
  switch (choice) {
    case TensorChoice::kKeep:
      return "keep";
    case TensorChoice::kOffload:
      return "offload";
    case TensorChoice::kDrop:
      return "drop";
  }
  return "?";
}

class Evaluator::Replay {
 public:
  Replay(const EvalModel& model, const CompactPlan& plan, Snapshot* s, Evaluation* out)
      : m_(model), schedule_(*model.schedule), plan_(plan), s_(*s), out_(*out) {}

  // Runs the steps from s_.step to the end, taking a snapshot before
  // `take_at` into `take`.
  void Run(int take_at, Snapshot* take) {
    const int steps = m_.num_steps();
    for (int step = s_.step; step < steps; ++step) {
      if (take != nullptr && step == take_at) {
        s_.step = step;
        s_.partial = out_;
        *take = s_;
      }
      RunStep(step);
    }
    s_.step = steps;
    Compute(m_.costs.update_seconds);  // the solver's update
    out_.seconds = std::max({s_.host, s_.compute_end, s_.copies.latest()});
    for (int step = 0; step < steps; ++step) {
      if (out_.peak_step < 0 || out_.step_peak[step] > out_.peak) {
        out_.peak = out_.step_peak[step];
        out_.peak_step = step;
      }
    }
  }

 private:
  uint8_t& where(TensorId t) { return s_.state[t]; }
  bool has(TensorId t, Flag f) const { return (s_.flags[t] & f) != 0; }
  void set(TensorId t, Flag f) { s_.flags[t] |= f; }
  void clear(TensorId t, Flag f) { s_.flags[t] &= static_cast<uint8_t>(~f); }
  bool OnDevice(TensorId t) const {
    const uint8_t w = s_.state[t];
    return w == kDevice || w == kOffloading || w == kPrefetching;
  }

  // ---- The allocator (ideal accounting) ----
  void Alloc(size_t bytes) {
    s_.total += bytes;
    peak_ = std::max(peak_, s_.total);
  }
  void FreeBlock(TensorId t) {  // residency FreeDevice + simulator kFree
    s_.total -= m_.bytes[t];
    if (s_.pending[t] != kNoCopy && !has(t, kDropping)) HostWaits(s_.pending[t]);
    s_.pending[t] = kNoCopy;
    clear(t, kDropping);
  }

  // ---- The simulator's clocks (timeline.cc, Simulator) ----
  double ComputeTail() const { return std::max(s_.compute_end, s_.compute_ready); }
  void Compute(double seconds) {
    if (m_.profile.inline_compute) {
      s_.host += seconds;
      s_.compute_end = s_.host;
      return;
    }
    const double free = std::max(s_.compute_end, s_.host);
    const double start = std::max(free, s_.compute_ready);
    s_.compute_end = start + seconds;
  }
  void ComputeWaits(double until) {
    if (m_.profile.inline_compute) {
      s_.host = std::max(s_.host, until);
    } else {
      s_.compute_ready = std::max(s_.compute_ready, until);
    }
  }
  void HostWaits(double until) { s_.host = std::max(s_.host, until); }
  void Copy(TensorId t, size_t bytes, bool to_host) {
    const LinkProfile& link = m_.profile.link;
    const double bandwidth = to_host ? link.d2h_bytes_per_second : link.h2d_bytes_per_second;
    const double seconds = link.latency_seconds + (bandwidth > 0 ? bytes / bandwidth : 0);
    double& clock = s_.copies.of(to_host);
    const double start = std::max({clock, ComputeTail(), s_.host});
    clock = start + seconds;
    s_.pending[t] = clock;
  }
  void ComputeEvent(int step) {
    s_.host += m_.costs.host_step_seconds;
    Compute(m_.costs.step_seconds[step]);
    if (m_.costs.sync_after[step]) s_.host = std::max(s_.host, ComputeTail());
  }

  // ---- Residency transitions (residency.cc) ----
  void BeginPrefetch(TensorId t) {
    Alloc(m_.bytes[t]);
    Copy(t, schedule_.tensors[t].bytes, /*to_host=*/false);
    out_.to_device += schedule_.tensors[t].bytes;
    where(t) = kPrefetching;
  }
  void FinishPrefetch(TensorId t) {
    if (s_.pending[t] != kNoCopy) ComputeWaits(s_.pending[t]);
    s_.pending[t] = kNoCopy;
    where(t) = kDevice;
  }
  void BeginOffload(TensorId t) {
    if (!has(t, kHostValid)) {
      set(t, kHasHost);
      Copy(t, schedule_.tensors[t].bytes, /*to_host=*/true);
      out_.offload_end[t] = s_.pending[t];
      out_.to_host += schedule_.tensors[t].bytes;
      set(t, kHostValid);
    }
    where(t) = kOffloading;
  }
  void FinishOffload(TensorId t) {
    if (s_.pending[t] != kNoCopy) HostWaits(s_.pending[t]);
    s_.pending[t] = kNoCopy;
    FreeBlock(t);
    where(t) = kHost;
  }
  void ReleaseBlocks(TensorId t) {  // ResidencyManager::Release
    if (OnDevice(t)) FreeBlock(t);
    clear(t, kHasHost);
    clear(t, kHostValid);
    where(t) = kUnallocated;
  }

  // ---- Runtime policies (runtime.cc, runtime_residency.cc) ----
  void Release(TensorId t) {  // MemoryRuntime::Release
    Unreference(t);
    ReleaseBlocks(t);
    clear(t, kDeferred);
  }
  void Retire(TensorId t) {
    if (s_.refs[t] > 0) {
      set(t, kDeferred);
    } else {
      Release(t);
    }
  }
  void Unreference(TensorId t) {
    if (!has(t, kHoldsSources)) return;
    clear(t, kHoldsSources);
    for (TensorId x : m_.sources[t]) {
      if (--s_.refs[x] == 0 && has(x, kDeferred)) Release(x);
    }
  }
  void Drop(TensorId t) {
    set(t, kDropping);
    FreeBlock(t);
    clear(t, kHasHost);
    clear(t, kHostValid);
    where(t) = kDropped;
    if (has(t, kHoldsSources)) return;
    set(t, kHoldsSources);
    for (TensorId x : m_.sources[t]) ++s_.refs[x];
  }
  void EnsureOnDevice(TensorId t) {
    switch (where(t)) {
      case kPrefetching:
        FinishPrefetch(t);
        return;
      case kHost:
        BeginPrefetch(t);
        FinishPrefetch(t);
        return;
      case kDropped:
        Rebuild(t);
        return;
      default:
        return;
    }
  }
  void Rebuild(TensorId t) {  // MemoryRuntime::Rebuild (on the device, speed-centric)
    const int layer = schedule_.tensors[t].layer;
    const LayerTensors& lt = schedule_.layers[layer];
    for (const std::vector<TensorId>* group : {&lt.inputs, &lt.aux}) {
      for (TensorId x : *group) EnsureOnDevice(x);
    }
    for (TensorId p : m_.host_params[layer]) {  // in until the backward visit
      if (where(p) == kDevice || now_ >= plan_.visit_back[p]) continue;
      Alloc(m_.bytes[p]);
      where(p) = kDevice;
    }
    for (TensorId o : lt.outputs) {
      if (!OnDevice(o)) {
        Alloc(m_.bytes[o]);
        where(o) = kDevice;
      }
    }
    const size_t workspace = m_.workspace[schedule_.forward_step[layer]];
    Alloc(workspace);  // the forward's workspace, for the recomputation
    s_.host += m_.costs.host_step_seconds;
    Compute(m_.costs.recompute_seconds[layer]);
    ++out_.recomputations;
    s_.total -= workspace;
    Unreference(t);
    for (TensorId o : lt.outputs) clear(o, kHostValid);
  }
  void PrepareWrite(TensorId t) {
    if (where(t) == kOffloading) {  // CancelOffload (planners emit none)
      if (s_.pending[t] != kNoCopy) ComputeWaits(s_.pending[t]);
      where(t) = kDevice;
    }
    if (!OnDevice(t)) {
      Alloc(m_.bytes[t]);
      if (where(t) == kHost) clear(t, kHostValid);
      where(t) = kDevice;
    }
  }
  void RunBefore(const TransferAction& a) {
    if (a.op == TransferOp::kPrefetch) {
      if (where(a.tensor) == kHost) BeginPrefetch(a.tensor);
    } else if (a.op == TransferOp::kRebuild) {
      if (where(a.tensor) == kDropped) Rebuild(a.tensor);
    }
  }
  void RunAfter(const TransferAction& a) {
    const TensorId t = a.tensor;
    switch (a.op) {
      case TransferOp::kBeginOffload:
        if (where(t) == kDevice) BeginOffload(t);
        return;
      case TransferOp::kFinishOffload:
        if (where(t) == kOffloading) FinishOffload(t);
        return;
      case TransferOp::kDrop:
        if (where(t) == kDevice) Drop(t);
        return;
      case TransferOp::kRelease:
        Retire(t);
        return;
      default:
        return;
    }
  }

  void RunStep(int s) {
    const Step& step = schedule_.steps[s];
    now_ = s;
    // Brought by a rebuild: now counted as visiting (a late visit begins a
    // step later).
    for (int r = std::max(s - 1, 0); r <= s; ++r) {
      for (TensorId p : m_.returning[r]) {
        if (plan_.visit_back[p] != s || where(p) != kDevice) continue;
        s_.total -= m_.bytes[p];
        where(p) = kUnallocated;
      }
    }
    s_.total += m_.visiting[s] - plan_.unvisited[s];  // parameters living in host memory
    peak_ = s_.total;
    for (TensorId t : step.reads) {
      if (IsTransient(schedule_.tensors[t].kind)) EnsureOnDevice(t);
    }
    for (TensorId t : step.writes) {
      if (IsTransient(schedule_.tensors[t].kind)) PrepareWrite(t);
    }
    Alloc(m_.writing[s]);
    if (step.active) Alloc(m_.workspace[s]);
    for (int i = plan_.before_start[s]; i < plan_.before_start[s + 1]; ++i) {
      RunBefore(plan_.before[i]);
    }
    out_.step_total[s] = s_.total;
    if (step.active) {
      ComputeEvent(s);
      s_.total -= m_.workspace[s];
    }
    out_.step_end[s] = ComputeTail();
    for (TensorId t : step.writes) {
      if (IsTransient(schedule_.tensors[t].kind) && where(t) != kHost) clear(t, kHostValid);
    }
    out_.step_peak[s] = peak_;
    for (int i = plan_.after_start[s]; i < plan_.after_start[s + 1]; ++i) {
      RunAfter(plan_.after[i]);
    }
    s_.total -= m_.visiting[s] - plan_.unvisited[s] + m_.writing[s];
  }

  const EvalModel& m_;
  const Schedule& schedule_;
  const CompactPlan& plan_;
  Snapshot& s_;
  Evaluation& out_;
  size_t peak_ = 0;
  int now_ = 0;  // the step being run
};

Evaluator::Evaluator(const EvalModel& model) : model_(model) {}

const Evaluation& Evaluator::Run(const Decisions& d) { return Run(d, nullptr, -1, nullptr); }

const Evaluation& Evaluator::Run(const Decisions& d, const Snapshot* from, int take_at,
                                 Snapshot* take) {
  BuildCompactPlan(model_, d, &plan_);
  const size_t tensors = model_.schedule->tensors.size();
  if (from != nullptr) {
    scratch_ = *from;
    result_ = from->partial;
  } else {
    scratch_.step = 0;
    scratch_.state.assign(tensors, kUnallocated);
    scratch_.refs.assign(tensors, 0);
    scratch_.flags.assign(tensors, 0);
    scratch_.pending.assign(tensors, kNoCopy);
    scratch_.total = model_.persistent;
    scratch_.host = scratch_.compute_end = scratch_.compute_ready = 0;
    scratch_.copies = CopyClocks(model_.profile.link);
    result_ = Evaluation();
    result_.step_peak.assign(model_.num_steps(), 0);
    result_.step_total.assign(model_.num_steps(), 0);
    result_.step_end.assign(model_.num_steps(), 0);
    result_.offload_end.assign(tensors, 0);
  }
  result_.peak = 0;
  result_.peak_step = -1;
  Replay replay(model_, plan_, &scratch_, &result_);
  replay.Run(take_at, take);
  return result_;
}

}  // namespace spill
