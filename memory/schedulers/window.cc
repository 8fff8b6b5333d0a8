#include "memory/schedulers/window.h"

#include <algorithm>

#include "memory/allocators/allocator.h"
#include "memory/liveness.h"
#include "memory/scheduler_registry.h"
#include "memory/schedulers/tensor_sequence.h"

namespace spill {
namespace {

// A phase is planned again after each backtrack; every backtrack moves at
// least one prefetch a step later, so this bounds a pathological case only.
constexpr int kMaxBacktracks = 100000;

// Tensors count as the chosen allocator takes them (whole chunks under va).
Charge ChargeOf(const MemoryOptions& options) {
  return
      [allocator = options.allocator, settings = options.settings](size_t bytes, bool persistent) {
        return ChargedBytes(allocator, bytes, settings, persistent);
      };
}

// Where the scheduler has put a tensor, as the runtime will find it.
enum class Where {
  kNone,     // not created yet, or released
  kCreated,  // in the window, created by a step still ahead
  kIn,       // on the device, or on its way there
  kOut,      // swap-out begun, not yet waited for
  kHost,     // swap-out waited for: on the host only
};

// One planning pass over the phase. `stopper[i]`: the first step at which
// sequence entry i may enter the window (backtracking raises it).
class WindowPass {
 public:
  WindowPass(const Schedule& schedule, const TensorSequence& seq, const Liveness& liveness,
             const WindowSettings& settings, std::vector<int>* stopper)
      : schedule_(schedule),
        seq_(seq),
        liveness_(liveness),
        settings_(settings),
        stopper_(*stopper),
        where_(seq.bytes.size(), Where::kNone),
        count_(seq.bytes.size(), 0),
        entry_(seq.bytes.size(), -1) {}

  // True when the phase is planned; false when it backtracked (the stopper
  // changed and the phase must be planned again).
  StatusOr<bool> Run(TransferPlan* plan, WindowStats* stats);

 private:
  Status SwapIn(int s, std::vector<TransferAction>* begin);
  StatusOr<bool> PlaceCreated(int s, std::vector<TransferAction>* begin);
  Status Backtrack(int s, size_t need);
  Status SwapOut(int s, std::vector<TransferAction>* after);
  bool WaitOldest(std::vector<TransferAction>* begin);
  void Cancel(TensorId t, std::vector<TransferAction>* begin);
  size_t Bytes(TensorId t) const { return seq_.bytes[t]; }
  void NotePeak() { stats_.peak = std::max(stats_.peak, in_ + out_); }
  std::string StepName(int s) const;

  const Schedule& schedule_;
  const TensorSequence& seq_;
  const Liveness& liveness_;
  const WindowSettings settings_;
  std::vector<int>& stopper_;
  std::vector<Where> where_;
  std::vector<int> count_;  // occurrences in the window
  std::vector<int> entry_;  // index of the tensor's pending swap-out in fifo_
  std::vector<TensorId> fifo_;
  size_t tail_ = 0;          // the oldest swap-out not yet waited for
  size_t head_ = 0;          // the next sequence entry to enter the window
  size_t in_ = 0;            // bytes on the device or on their way there
  size_t out_ = 0;           // bytes whose swap-out is pending
  size_t window_bytes_ = 0;  // bytes of the distinct tensors in the window
  WindowStats stats_;
};

StatusOr<bool> WindowPass::Run(TransferPlan* plan, WindowStats* stats) {
  for (int s = 0; s < seq_.num_steps(); ++s) {
    // Before step s: at the end of step s-1's list, after its swap-outs.
    std::vector<TransferAction>* begin = s == 0 ? &plan->before[0] : &plan->after[s - 1];
    SPILL_RETURN_IF_ERROR(SwapIn(s, begin));
    SPILL_ASSIGN_OR_RETURN(bool placed, PlaceCreated(s, begin));
    if (!placed) return false;
    SPILL_RETURN_IF_ERROR(SwapOut(s, &plan->after[s]));
  }
  if (head_ != seq_.tensors.size() || in_ != 0 || out_ != 0 || window_bytes_ != 0) {
    return Internal("window scheduler: the phase ends with tensors still scheduled");
  }
  *stats = stats_;
  return true;
}

// (a): tensors entering the window. A step's own tensors always enter; the
// window and the budget bound only what comes in beyond them.
Status WindowPass::SwapIn(int s, std::vector<TransferAction>* begin) {
  while (head_ < seq_.tensors.size() && stopper_[head_] <= s) {
    const TensorId t = seq_.tensors[head_];
    const size_t bytes = Bytes(t);
    if (count_[t] == 0) {
      const bool own = head_ < seq_.step_end[s];
      if (!own && (window_bytes_ + bytes > settings_.window || in_ + bytes > settings_.budget)) {
        break;
      }
      switch (where_[t]) {
        case Where::kOut:
          Cancel(t, begin);
          break;
        case Where::kNone:
          where_[t] = Where::kCreated;  // memory only when its step creates it
          break;
        case Where::kHost:
          // (b): make room by waiting for the oldest swap-outs.
          while (in_ + out_ + bytes > settings_.budget && WaitOldest(begin)) {
          }
          begin->push_back({TransferOp::kPrefetch, t});
          in_ += bytes;
          where_[t] = Where::kIn;
          stats_.prefetches++;
          break;
        case Where::kIn:
        case Where::kCreated:
          return Internal("window scheduler: '" + schedule_.tensors[t].name +
                          "' enters the window twice");
      }
      window_bytes_ += bytes;
      NotePeak();
    }
    ++count_[t];
    ++head_;
  }
  return Status::Ok();
}

// (c): the memory of the tensors step s creates; false after a backtrack.
StatusOr<bool> WindowPass::PlaceCreated(int s, std::vector<TransferAction>* begin) {
  size_t created = 0;
  for (size_t i = seq_.step_begin(s); i < seq_.step_end[s]; ++i) {
    if (where_[seq_.tensors[i]] == Where::kCreated) created += Bytes(seq_.tensors[i]);
  }
  while (in_ + out_ + created > settings_.budget) {
    if (WaitOldest(begin)) continue;
    SPILL_RETURN_IF_ERROR(Backtrack(s, in_ + created - settings_.budget));
    return false;
  }
  for (size_t i = seq_.step_begin(s); i < seq_.step_end[s]; ++i) {
    if (where_[seq_.tensors[i]] == Where::kCreated) where_[seq_.tensors[i]] = Where::kIn;
  }
  in_ += created;
  NotePeak();
  return true;
}

// Stops the latest tensors that entered the window beyond step s until step
// s + 1, until their bytes cover `need`.
Status WindowPass::Backtrack(int s, size_t need) {
  std::vector<int> count = count_;
  size_t freed = 0;
  for (size_t back = head_; back-- > seq_.step_end[s];) {
    const TensorId t = seq_.tensors[back];
    if (count[t] == 1) {  // where t entered the window
      if (where_[t] == Where::kIn) freed += Bytes(t);
      stopper_[back] = s + 1;
      if (freed >= need) return Status::Ok();
    }
    --count[t];
  }
  size_t own = 0;
  for (size_t i = seq_.step_begin(s); i < seq_.step_end[s]; ++i) own += Bytes(seq_.tensors[i]);
  return OutOfMemory("window scheduler: " + StepName(s) + " needs " +
                     FormatBytes(static_cast<double>(own)) + " for its own tensors, beyond the " +
                     FormatBytes(static_cast<double>(settings_.budget)) +
                     " the scheduler may fill (memory.window_budget)");
}

// After step s: each of its tensors that does not occur again in the window
// leaves: released at its last use, swapped out otherwise.
Status WindowPass::SwapOut(int s, std::vector<TransferAction>* after) {
  for (size_t i = seq_.step_begin(s); i < seq_.step_end[s]; ++i) {
    const TensorId t = seq_.tensors[i];
    if (count_[t] == 1) {
      if (where_[t] != Where::kIn) {
        return Internal("window scheduler: '" + schedule_.tensors[t].name +
                        "' is used while not on the device");
      }
      in_ -= Bytes(t);
      window_bytes_ -= Bytes(t);
      if (liveness_.last_use[t] == s) {
        after->push_back({TransferOp::kRelease, t});
        where_[t] = Where::kNone;
      } else {
        after->push_back({TransferOp::kBeginOffload, t});
        out_ += Bytes(t);
        where_[t] = Where::kOut;
        entry_[t] = static_cast<int>(fifo_.size());
        fifo_.push_back(t);
        stats_.offloads++;
      }
    }
    --count_[t];
  }
  return Status::Ok();
}

// Waits for the oldest pending swap-out and frees its device memory; false
// when none is pending.
bool WindowPass::WaitOldest(std::vector<TransferAction>* begin) {
  while (tail_ < fifo_.size()) {
    const size_t index = tail_++;
    const TensorId t = fifo_[index];
    if (entry_[t] != static_cast<int>(index)) continue;  // cancelled
    begin->push_back({TransferOp::kFinishOffload, t});
    out_ -= Bytes(t);
    where_[t] = Where::kHost;
    entry_[t] = -1;
    stats_.waits++;
    return true;
  }
  return false;
}

// A tensor re-enters the window before its swap-out was waited for: its
// device copy stays, no swap-in is needed.
void WindowPass::Cancel(TensorId t, std::vector<TransferAction>* begin) {
  begin->push_back({TransferOp::kCancelOffload, t});
  out_ -= Bytes(t);
  in_ += Bytes(t);
  where_[t] = Where::kIn;
  entry_[t] = -1;
  stats_.cancels++;
}

std::string WindowPass::StepName(int s) const {
  const Step& step = schedule_.steps[s];
  std::string largest;
  size_t bytes = 0;
  for (size_t i = seq_.step_begin(s); i < seq_.step_end[s]; ++i) {
    if (Bytes(seq_.tensors[i]) > bytes) {
      bytes = Bytes(seq_.tensors[i]);
      largest = schedule_.tensors[seq_.tensors[i]].name;
    }
  }
  return "step " + std::to_string(s + 1) +
         (step.pass == Pass::kForward ? " (forward" : " (backward") +
         (largest.empty() ? ")" : ", largest tensor '" + largest + "')");
}

}  // namespace

StatusOr<TransferPlan> PlanWindow(const Schedule& schedule, Phase phase,
                                  const WindowSettings& settings, WindowStats* stats,
                                  const Charge& charge) {
  const TensorSequence seq = BuildTensorSequence(schedule, phase, charge);
  const Liveness liveness = AnalyzeLiveness(schedule, phase);
  std::vector<int> stopper(seq.tensors.size(), 0);
  for (int backtracks = 0; backtracks <= kMaxBacktracks; ++backtracks) {
    TransferPlan plan;
    plan.phase = phase;
    plan.Resize(seq.num_steps());
    WindowStats pass_stats;
    WindowPass pass(schedule, seq, liveness, settings, &stopper);
    SPILL_ASSIGN_OR_RETURN(bool done, pass.Run(&plan, &pass_stats));
    if (!done) continue;
    plan.liveness = liveness;
    plan.recompute.droppable.assign(schedule.tensors.size(), false);
    plan.recompute.segment.assign(schedule.tensors.size(), -1);
    if (stats != nullptr) {
      *stats = pass_stats;
      stats->backtracks = backtracks;
    }
    return plan;
  }
  return Internal("window scheduler: no plan after " + std::to_string(kMaxBacktracks) +
                  " backtracks");
}

const SettingSpec& WindowBudgetSetting() {
  static const SettingSpec* spec = [] {
    auto* s = new SettingSpec{"window_budget", SettingKind::kSize, "1x",
                              "window: the device bytes its transfers may fill, a multiple of "
                              "the budget less persistent tensors and workspace, or bytes"};
    s->searchable = true;
    return s;
  }();
  return *spec;
}

const SettingSpec& WindowSetting() {
  static const SettingSpec* spec =
      new SettingSpec{"window", SettingKind::kSize, "1.5x",
                      "window: its look-ahead, a multiple of its budget or bytes"};
  return *spec;
}

StatusOr<WindowSettings> WindowSettingsFor(const NetworkView& view, Phase phase,
                                           const MemoryOptions& options) {
  const Charge charge = ChargeOf(options);
  auto footprint = PersistentFootprint(view, options);
  if (!footprint.ok() && footprint.status().code() != StatusCode::kOutOfMemory) {
    return footprint.status();
  }
  if (!footprint.ok()) {
    return OutOfMemory("window scheduler: the persistent tensors do not fit the " +
                       FormatBytes(static_cast<double>(options.device_budget)) +
                       " device budget (" + footprint.status().message() + ")");
  }
  const size_t persistent = *footprint;
  const size_t reserve = WorkspaceReserve(view, phase, options.workspace, charge);
  const size_t usable = UsableBytes(options.allocator, options.device_budget, options.settings);
  if (usable <= persistent + reserve) {
    return OutOfMemory("window scheduler: the persistent tensors (" +
                       FormatBytes(static_cast<double>(persistent)) +
                       ") and the largest workspace (" + FormatBytes(static_cast<double>(reserve)) +
                       ") leave nothing of the " +
                       FormatBytes(static_cast<double>(options.device_budget)) + " device budget");
  }
  WindowSettings settings;
  settings.budget = options.settings.Size(WindowBudgetSetting()).Of(usable - persistent - reserve);
  settings.window = options.settings.Size(WindowSetting()).Of(settings.budget);
  return settings;
}

namespace {

StatusOr<PhasePlans> PlanBothPhases(const NetworkView& view, const MemoryOptions& options) {
  PhasePlans plans;
  for (Phase phase : {Phase::kTrain, Phase::kEval}) {
    SPILL_ASSIGN_OR_RETURN(WindowSettings settings, WindowSettingsFor(view, phase, options));
    SPILL_ASSIGN_OR_RETURN(TransferPlan plan,
                           PlanWindow(*view.schedule, phase, settings, nullptr, ChargeOf(options)));
    (phase == Phase::kTrain ? plans.train : plans.eval) = std::move(plan);
  }
  return plans;
}

const bool kWindow = RegisterScheduler(
    {"window",
     "any transient tensor swapped in as it enters a byte window over the iteration and out "
     "after use, FIFO waits under a device budget (memory.window, memory.window_budget)",
     PlanBothPhases,
     {WindowBudgetSetting(), WindowSetting()}});

}  // namespace
}  // namespace spill
