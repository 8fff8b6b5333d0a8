// The program of milp.h on CBC's C interface. Time in microseconds, memory
// in KiB (pool blocks), so that coefficients stay within a few decades.
#include "memory/planners/milp.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memory/planners/rules.h"

namespace spill {
namespace {

constexpr double kMicroseconds = 1e6;
constexpr double kMemoryUnit = 1024;  // bytes per unit of the memory rows
constexpr int kMaxRounds = 4;         // solves with tightened rows
constexpr double kHalf = 0.5;         // binaries read back
constexpr double kUpperSlack = 1;     // microseconds over the start's time still sought
constexpr double kInfinity = std::numeric_limits<double>::max();

using ModelPtr = std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)>;

// A linear expression over columns plus a constant.
struct Linear {
  std::vector<int> cols;
  std::vector<double> coefs;
  double constant = 0;
  void Add(int col, double coef) {
    cols.push_back(col);
    coefs.push_back(coef);
  }
};

struct Candidate {
  TensorId t = kNoTensor;
  int p = 0, lfu = 0, u = 0, pstart = 0;
  int o = -1, d = -1;  // columns; -1: not open to it
  // F over [lfu+1, u-1], P over [pstart, u-1]: a column per step where it
  // may change (-1: 0 there), repeated over the steps where it may not.
  std::vector<int> f, q;
  int a = -1, b = -1;  // starts of its copies out and in
  int issued = -1;     // when its copy in could start, were no other copy before it
  // A second gap (EvalModel::again_after, again_needed_at) is an entry of
  // its own after every first one: lfu its first backward read, u the
  // next, pstart the step after lfu, o whether it leaves again; it has no
  // copy out (its host copy is current) and no p. `parent`: the first
  // gap's entry (-1 for a first gap); `second`: the second's (-1: none).
  int parent = -1, second = -1;
};

// A tensor a rebuild reruns: a droppable candidate (its column is d) or a
// forward-only input of one (y). It is rebuilt in the gap before one of
// `positions` (z: one binary each, summing to the column); each trigger
// says "rebuilt at or before `step` when every column of `cols` is 1".
struct Rebuild {
  TensorId t = kNoTensor;
  int col = -1;
  struct Trigger {
    int step;
    std::vector<int> cols;
  };
  std::vector<Trigger> triggers;
  std::vector<int> positions, z;
  double seconds = 0;  // its layer's recomputation, in microseconds
};

class Program {
 public:
  // `upper`: the program's time of a plan known to be its point (in
  // microseconds); only plans no slower are sought, and it bounds every time.
  // `ordered`: only plans whose copies in the run issues in the program's
  // order - first read, first in - are points (no prefetch overtakes one
  // read sooner; a rebuild's source is back before the rebuild's step), so
  // that the program's time of its plan is the run's.
  Program(const EvalModel& m, const std::vector<double>& step_limit,
          double upper = std::numeric_limits<double>::infinity(), bool ordered = false)
      : m_(m),
        step_limit_(step_limit),
        model_(Cbc_newModel(), Cbc_deleteModel),
        upper_(upper),
        ordered_(ordered) {}

  void Build();
  Cbc_Model* cbc() { return model_.get(); }
  int columns() const { return columns_; }
  int rows() const { return rows_; }
  // The plan `d` as CBC's first incumbent; with `fix`, the only plan (its
  // binaries fixed: the program then gives its own time of that plan).
  void Start(const Decisions& d, bool fix = false);
  Decisions Read(const double* x) const;
  // The device bytes the program counts at step `s` for the solution `x`
  // (the keep-all peak less what its memory row has absent there).
  double BytesAt(const double* x, int s) const;

 private:
  // Start's values of offloaded candidate `c` (back: when it is back, -1
  // when it is not offloaded).
  void StartOffload(const Candidate& c, int out, int back, std::vector<double>* value,
                    std::vector<int>* cols) const;
  // Columns and rows are gathered here and handed to CBC at once (Load):
  // CBC's matrix grows by a copy per row added singly.
  int Col(double lb, double ub, double obj, bool integer) {
    col_lower_.push_back(lb);
    col_upper_.push_back(ub);
    objective_.push_back(obj);
    integer_.push_back(integer);
    return columns_++;
  }
  // A row of `e` (a column named twice is one entry: CBC takes each once).
  void Row(const Linear& e, char sense, double rhs) {
    std::vector<std::pair<int, double>> terms;
    for (size_t i = 0; i < e.cols.size(); ++i) terms.emplace_back(e.cols[i], e.coefs[i]);
    std::sort(terms.begin(), terms.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<int> cols;
    std::vector<double> coefs;
    for (const auto& [col, coef] : terms) {
      if (!cols.empty() && cols.back() == col) {
        coefs.back() += coef;
      } else {
        cols.push_back(col);
        coefs.push_back(coef);
      }
    }
    for (size_t i = 0; i < cols.size(); ++i) entries_.push_back({cols[i], rows_, coefs[i]});
    rhs -= e.constant;
    row_lower_.push_back(sense == 'L' ? -kInfinity : rhs);
    row_upper_.push_back(sense == 'G' ? kInfinity : rhs);
    ++rows_;
  }
  // The columns of F_is, P_is of candidate i (-1 where they are 0).
  static int ColF(const Candidate& c, int s) {
    if (c.o < 0 || s <= c.lfu) return -1;
    return s >= c.u ? c.o : c.f[s - c.lfu - 1];
  }
  static int ColP(const Candidate& c, int s) {
    if (c.o < 0 || s < c.pstart) return -1;
    return s >= c.u ? c.o : c.q[s - c.pstart];
  }
  // F_is, P_is of candidate i into `e` with `coef` (nothing where they are 0).
  static void AddF(Linear* e, const Candidate& c, int s, double coef) {
    if (ColF(c, s) >= 0) e->Add(ColF(c, s), coef);
  }
  static void AddP(Linear* e, const Candidate& c, int s, double coef) {
    if (ColP(c, s) >= 0) e->Add(ColP(c, s), coef);
  }
  double CopySeconds(TensorId t, bool to_host) const {
    const LinkProfile& link = m_.profile.link;
    const double bandwidth = to_host ? link.d2h_bytes_per_second : link.h2d_bytes_per_second;
    return link.latency_seconds + (bandwidth > 0 ? m_.schedule->tensors[t].bytes / bandwidth : 0);
  }
  void AddCandidates();
  // o, F and P of `c` over its window.
  void OpenGap(Candidate* c);
  void AddSecondGaps();
  // Calls f(entry) for each entry of tensor t: its first gap and its second.
  template <typename F>
  void ForEntries(TensorId t, F&& f) const {
    if (index_[t] < 0) return;
    const Candidate& c = cands_[index_[t]];
    f(c);
    if (c.second >= 0) f(cands_[c.second]);
  }
  void AddRebuilds();
  void AddRebuildPositions(const Rebuild& r);
  void AddMemoryRows();
  // The keep-all peak at step `s` with the parameters prefetched there for
  // the next step brought late instead (free in the evaluator's time, which
  // does not count parameter copies; Read's plans bring them late where the
  // replay needs it).
  double KeepAllBytes(int s) const {
    return static_cast<double>(m_.base_step_peak[s] - m_.comes_ahead[s]);
  }
  void AddTimeline();
  void AddRebuildWaits();
  // The rebuilds that may run in the gap before `step` into `e` (minus their
  // seconds), returning the most they can add up to.
  double AddRebuildsAt(Linear* e, int step) const;
  // The ordered program's rows (see the constructor): `in`, the copies in by
  // first read.
  void AddOrderRows(const std::vector<Candidate*>& in);
  // The rebuilds in the gap before `step` that read `t` into `e`, `coef`
  // each; whether there are any.
  bool AddRebuildsReading(Linear* e, TensorId t, int step, double coef) const;
  bool AddIssueRow(const Candidate& c, int s, bool rebuilds);
  // The ordered program's: issued >= S_s while q >= s (the run issues s's
  // prefetches once s's reads are in place, copies waited for, rebuilds
  // run; none of them fetches a source on demand there).
  void AddStartIssueRow(const Candidate& c, int s);
  void AddQueueRows();
  void AddQueueRow(int a, int b, bool outs, bool ins);
  // The copies of the span from step a to b into `e` (minus their seconds),
  // returning the most they can add up to.
  // `outs` / `ins`: whether the copies out / in count (both on a link that
  // carries one way at a time, each alone on a duplex one).
  double QueueTerms(int a, int b, bool outs, bool ins, Linear* e) const;
  void Load();  // the gathered columns and rows into CBC
  // Bytes of `c` absent at step s (between its last forward use and its
  // first backward one), into `e` with `coef` per byte unit.
  void AddAbsent(Linear* e, const Candidate& c, int s, double coef) const;
  // The rebuild of tensor `t`, or null.
  const Rebuild* RebuildOf(TensorId t) const {
    return rebuild_index_[t] >= 0 ? &rebuilds_[rebuild_index_[t]] : nullptr;
  }

  const EvalModel& m_;
  const std::vector<double>& step_limit_;
  ModelPtr model_;
  struct Entry {
    int col, row;
    double value;
  };
  std::vector<double> col_lower_, col_upper_, objective_, row_lower_, row_upper_;
  std::vector<bool> integer_;
  std::vector<Entry> entries_;
  int columns_ = 0, rows_ = 0;
  std::vector<Candidate> cands_;
  std::vector<int> index_;            // tensor -> candidate index, -1
  std::vector<bool> over_;            // per step: over the limit with every tensor kept
  std::vector<int> memory_row_;       // per step: its memory row, -1
  std::vector<double> memory_const_;  // per step: its row's constant term
  std::vector<Rebuild> rebuilds_;
  std::vector<int> rebuild_index_;         // tensor -> rebuilds_ index, -1
  std::vector<std::vector<int>> readers_;  // per tensor: the rebuilds_ that read it
  // Per step: the rebuilds that may run in the gap before it (z, seconds).
  std::vector<std::vector<std::pair<int, double>>> rebuilds_at_;
  std::vector<int> start_;                 // per step: the column of when its computation starts
  std::vector<double> earliest_, latest_;  // per step: bounds of its start
  double upper_;
  double horizon_ = 0;  // every time lies within [0, horizon_] (AddTimeline)
  bool ordered_ = false;
  int end_ = -1;  // the column of when the iteration's computation ends
};

// A plan is no worse for freeing an offloaded tensor later, up to the first
// step over the limit it is absent at, and prefetching it earlier, back to
// just after the last such step (or the first backward step), and for
// keeping it when it is absent at none: its memory rows are the same, its
// copies' rows weaker, and it is present wherever it was. So F changes only
// at steps over the limit, P only after them, and the optimum is the same.
void Program::AddCandidates() {
  const int n = m_.num_layers;
  const int steps = m_.num_steps();
  over_.assign(steps, false);
  for (int s = 0; s < steps; ++s) {
    over_[s] = KeepAllBytes(s) > step_limit_[s];
  }
  index_.assign(m_.schedule->tensors.size(), -1);
  for (TensorId t : m_.candidates) {
    Candidate c;
    c.t = t;
    c.p = m_.liveness.first_use[t];
    c.lfu = m_.leaves_after[t];
    c.u = m_.needed_at[t];
    c.pstart = std::max(c.lfu + 1, n);
    if (m_.offloadable[t]) OpenGap(&c);
    if (m_.droppable[t]) {
      c.d = Col(0, 1, 0, true);
    }
    index_[t] = static_cast<int>(cands_.size());
    cands_.push_back(std::move(c));
  }
  AddSecondGaps();
  for (const Candidate& c : cands_) {
    if (c.parent >= 0 && ordered_) {  // leaves again only if offloaded
      Linear e;
      e.Add(c.o, 1);
      e.Add(cands_[c.parent].o, -1);
      Row(e, 'L', 0);
    }
    if (c.o >= 0 && c.d >= 0) {
      Linear e;
      e.Add(c.o, 1);
      e.Add(c.d, 1);
      Row(e, 'L', 1);
    }
    if (c.o < 0) continue;
    for (int s = c.lfu + 1; s < c.u; ++s) {  // F_is <= F_i,s+1
      if (ColF(c, s) < 0 || ColF(c, s) == ColF(c, s + 1)) continue;
      Linear e;
      AddF(&e, c, s, 1);
      AddF(&e, c, s + 1, -1);
      Row(e, 'L', 0);
    }
    for (int s = c.pstart; s < c.u; ++s) {  // P_is <= P_i,s+1 and P_is <= F_is
      if (ColP(c, s) < 0) continue;
      if (ColP(c, s) != ColP(c, s + 1)) {
        Linear e;
        AddP(&e, c, s, 1);
        AddP(&e, c, s + 1, -1);
        Row(e, 'L', 0);
      }
      if (s > c.pstart && ColP(c, s) == ColP(c, s - 1) && ColF(c, s) == ColF(c, s - 1)) continue;
      Linear back;
      AddP(&back, c, s, 1);
      AddF(&back, c, s, -1);
      Row(back, 'L', 0);
    }
  }
}

void Program::OpenGap(Candidate* c) {
  c->o = Col(0, 1, 0, true);
  int col = -1;
  for (int s = c->lfu + 1; s < c->u; ++s) {
    if (over_[s]) col = Col(0, 1, 0, true);
    c->f.push_back(col);
  }
  col = -1;
  for (int s = c->pstart; s < c->u; ++s) {
    if (s == c->pstart || over_[s - 1]) col = Col(0, 1, 0, true);
    c->q.push_back(col);
  }
}

// An offloaded tensor read twice in backward with steps between may leave
// again after the first read, with no copy out, and come back for the
// second (rules.h, "again"): an entry like a first gap's wherever a step
// over the limit lies between. The ordered program ties it to its first
// gap's offload (the run's plans); the other does not, which keeps every
// plan a point of it (an offload whose first gap holds no step over the
// limit is kept in its image).
void Program::AddSecondGaps() {
  const size_t firsts = cands_.size();
  for (size_t i = 0; i < firsts; ++i) {
    const TensorId t = cands_[i].t;
    if (cands_[i].o < 0 || m_.again_after[t] < 0) continue;
    Candidate c;
    c.t = t;
    c.p = -1;
    c.lfu = m_.again_after[t];
    c.u = m_.again_needed_at[t];
    c.pstart = c.lfu + 1;
    c.parent = static_cast<int>(i);
    bool over = false;
    for (int s = c.lfu + 1; s < c.u; ++s) over = over || over_[s];
    if (!over) continue;
    OpenGap(&c);
    cands_[i].second = static_cast<int>(cands_.size());
    cands_.push_back(std::move(c));
  }
}

// Rebuild triggers, dependents first (larger ids): a droppable candidate is
// rebuilt when backward first reads it, or earlier with a dropped tensor
// rebuilt from it; a forward-only input, with the first such tensor. Chains
// are followed through forward-only tensors, and two droppable tensors deep
// (a trigger of at most kMaxTriggerColumns columns).
void Program::AddRebuilds() {
  constexpr size_t kMaxTriggerColumns = 3;
  const TensorId count = static_cast<TensorId>(m_.schedule->tensors.size());
  rebuild_index_.assign(count, -1);
  readers_.assign(count, {});
  rebuilds_at_.assign(m_.num_steps() + 1, {});
  std::vector<std::vector<Rebuild::Trigger>> inherited(count);
  for (TensorId t = count - 1; t >= 0; --t) {
    const bool candidate = index_[t] >= 0 && cands_[index_[t]].d >= 0;
    if (!candidate && inherited[t].empty()) continue;
    Rebuild r;
    r.t = t;
    if (candidate) {
      const Candidate& c = cands_[index_[t]];
      r.col = c.d;
      r.triggers.push_back({c.u, {c.d}});
      for (Rebuild::Trigger& g : inherited[t]) {
        if (g.step >= c.u || g.cols.size() >= kMaxTriggerColumns) continue;
        g.cols.push_back(c.d);
        r.triggers.push_back(std::move(g));
      }
    } else {
      if (!m_.forward_only[t]) continue;
      r.col = Col(0, 1, 0, false);  // y: rerun with a dropped dependent (the triggers set it)
      r.triggers = std::move(inherited[t]);
    }
    for (const Rebuild::Trigger& g : r.triggers) {
      if (std::find(r.positions.begin(), r.positions.end(), g.step) == r.positions.end()) {
        r.positions.push_back(g.step);
      }
    }
    std::sort(r.positions.begin(), r.positions.end());
    Linear sum;  // exactly one position when rebuilt
    for (size_t i = 0; i < r.positions.size(); ++i) {
      r.z.push_back(Col(0, 1, 0, true));
      sum.Add(r.z.back(), 1);
    }
    sum.Add(r.col, -1);
    Row(sum, 'E', 0);
    for (const Rebuild::Trigger& g : r.triggers) {  // at or before the trigger's step
      Linear e;
      for (size_t i = 0; i < r.positions.size() && r.positions[i] <= g.step; ++i) {
        e.Add(r.z[i], 1);
      }
      for (int col : g.cols) e.Add(col, -1);
      Row(e, 'G', 1.0 - static_cast<double>(g.cols.size()));
    }
    AddRebuildPositions(r);
    for (TensorId x : m_.sources[t]) {  // what this rebuild needs is rebuilt by then
      for (const Rebuild::Trigger& g : r.triggers) inherited[x].push_back(g);
    }
    for (TensorId x : m_.sources[t]) readers_[x].push_back(static_cast<int>(rebuilds_.size()));
    r.seconds = m_.costs.recompute_seconds[m_.schedule->tensors[t].layer] * kMicroseconds;
    for (size_t i = 0; i < r.positions.size(); ++i) {
      rebuilds_at_[r.positions[i]].push_back({r.z[i], r.seconds});
    }
    rebuild_index_[t] = static_cast<int>(rebuilds_.size());
    rebuilds_.push_back(std::move(r));
  }
}

// A rebuild runs at the step of a trigger that fires, not before: the
// runtime rebuilds a tensor when it is first read or when a dependent's
// rebuild needs it, so with the rows above it runs at the earliest trigger
// that fires. z_i <= the sum of the triggers at position i that fire (a
// trigger of several columns fires through w <= each of them).
void Program::AddRebuildPositions(const Rebuild& r) {
  for (size_t i = 0; i < r.positions.size(); ++i) {
    Linear e;
    e.Add(r.z[i], 1);
    for (const Rebuild::Trigger& g : r.triggers) {
      if (g.step != r.positions[i]) continue;
      if (g.cols.size() == 1) {
        e.Add(g.cols[0], -1);
        continue;
      }
      const int w = Col(0, 1, 0, false);
      for (int col : g.cols) {
        Linear below;
        below.Add(w, 1);
        below.Add(col, -1);
        Row(below, 'L', 0);
      }
      e.Add(w, -1);
    }
    Row(e, 'L', 0);
  }
}

void Program::AddAbsent(Linear* e, const Candidate& c, int s, double coef) const {
  AddF(e, c, s, coef);
  AddP(e, c, s, -coef);
  if (c.d < 0) return;
  e->Add(c.d, coef);  // dropped, until rebuilt
  const Rebuild* r = RebuildOf(c.t);
  for (size_t i = 0; i < r->positions.size() && r->positions[i] <= s; ++i) {
    e->Add(r->z[i], -coef);
  }
}

void Program::AddMemoryRows() {
  memory_row_.assign(m_.num_steps(), -1);
  memory_const_.assign(m_.num_steps(), 0);
  for (int s = 0; s < m_.num_steps(); ++s) {
    if (!over_[s]) continue;
    memory_row_[s] = rows_;
    const double over = (KeepAllBytes(s) - step_limit_[s]) / kMemoryUnit;
    Linear e;  // bytes absent at s >= what is over
    for (const Candidate& c : cands_) {
      if (s > c.lfu && s < c.u)
        AddAbsent(&e, c, s, static_cast<double>(m_.bytes[c.t]) / kMemoryUnit);
    }
    memory_const_[s] = e.constant;
    Row(e, 'G', over);
  }
  // An offloaded source of a dropped tensor is on the device when that is
  // rebuilt (still there, or brought back for it).
  for (const Rebuild& r : rebuilds_) {
    for (TensorId x : m_.sources[r.t]) {
      ForEntries(x, [&](const Candidate& src) {
        if (src.o < 0) return;
        for (size_t i = 0; i < r.positions.size(); ++i) {
          if (r.positions[i] >= src.u) continue;
          Linear e;  // F_x - P_x (absent) + z <= 1
          AddF(&e, src, r.positions[i], 1);
          AddP(&e, src, r.positions[i], -1);
          e.Add(r.z[i], 1);
          Row(e, 'L', 1);
        }
      });
    }
  }
}

// The timeline: when each step's computation starts (rebuilds run in the
// gap before the step that reads them), when each copy starts. Copies out
// are first in, first out in the order their writers run, copies in in the
// order of their reads (the fixed rules never let one overtake another);
// that they share a queue is the queue rows' (AddQueueRows). A copy out ends before
// the step after g starts (the host waits there), a copy in before its
// reader starts (the computation waits).
void Program::AddTimeline() {
  const int steps = m_.num_steps();
  auto compute = [&](int s) { return m_.costs.step_seconds[s] * kMicroseconds; };
  double horizon = 0;  // no plan's iteration takes longer
  for (int s = 0; s < steps; ++s) horizon += compute(s);
  for (const Candidate& c : cands_) {
    horizon += (CopySeconds(c.t, true) + CopySeconds(c.t, false)) * kMicroseconds;
  }
  for (const Rebuild& r : rebuilds_) horizon += r.seconds;
  // Every time lies within [0, upper]; step s starts once the steps before
  // it have computed (earliest_) and early enough for the rest to end by
  // `upper` (latest_). The big Ms below are these spans, not the horizon.
  const double upper = std::min(horizon, upper_);
  horizon_ = upper;
  earliest_.assign(steps + 1, 0);
  latest_.assign(steps + 1, upper);
  for (int s = 1; s <= steps; ++s) earliest_[s] = earliest_[s - 1] + compute(s - 1);
  for (int s = steps - 1; s >= 0; --s) latest_[s] = latest_[s + 1] - compute(s);
  for (int s = 0; s < steps; ++s) start_.push_back(Col(earliest_[s], latest_[s], 0, false));
  end_ = Col(earliest_[steps], upper, 1, false);
  std::vector<Linear> gap(steps + 1);  // S_s - S_{s-1} - rebuilds >= compute_{s-1}
  for (int s = 1; s <= steps; ++s) {
    gap[s].Add(s < steps ? start_[s] : end_, 1);
    gap[s].Add(start_[s - 1], -1);
  }
  for (int s = 1; s <= steps; ++s) {
    AddRebuildsAt(&gap[s], s);
    Row(gap[s], 'G', compute(s - 1));
  }
  std::vector<Candidate*> out, in;
  for (Candidate& c : cands_) {
    if (c.o < 0) continue;
    c.b = Col(0, upper, 0, false);
    c.issued = Col(0, upper, 0, false);
    in.push_back(&c);
    if (c.parent >= 0) continue;  // a second gap has no copy out
    c.a = Col(0, upper, 0, false);
    out.push_back(&c);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate* x, const Candidate* y) { return x->p < y->p; });
  std::stable_sort(in.begin(), in.end(),
                   [](const Candidate* x, const Candidate* y) { return x->u < y->u; });
  for (size_t k = 0; k < out.size(); ++k) {
    const Candidate& c = *out[k];
    const double copy = CopySeconds(c.t, true) * kMicroseconds;
    // A >= end of its writer's computation (kept: a copy of no length, in
    // the queue's order of writers, that delays no other).
    Linear begin;
    begin.Add(c.a, 1);
    begin.Add(start_[c.p], -1);
    Row(begin, 'G', compute(c.p));
    if (k + 1 < out.size()) {  // the next copy out starts after this one
      Linear next;
      next.Add(out[k + 1]->a, 1);
      next.Add(c.a, -1);
      next.Add(c.o, -copy);
      Row(next, 'G', 0);
    }
    // S_s >= A + copy + the rebuilds before s once freed by s: the host
    // waits for the copy where it frees the block, after step s-1, and only
    // then runs s's rebuilds.
    for (int s = c.lfu + 1; s <= c.u && s < steps; ++s) {
      if (ColF(c, s) < 0 || ColF(c, s) == ColF(c, s - 1)) continue;  // its first step binds
      Linear done;
      done.Add(start_[s], 1);
      done.Add(c.a, -1);
      const double big = upper + copy - earliest_[s] + AddRebuildsAt(&done, s);
      AddF(&done, c, s, -big);
      Row(done, 'G', copy - big);
    }
  }
  for (size_t k = 0; k < in.size(); ++k) {
    const Candidate& c = *in[k];
    const double copy = CopySeconds(c.t, false) * kMicroseconds;
    for (int s = c.pstart; s <= c.u; ++s) {
      if (s < c.u && ColP(c, s) == ColP(c, s - 1)) continue;  // its last step binds
      if (ordered_) {
        AddStartIssueRow(c, s);
      } else if (AddIssueRow(c, s, /*rebuilds=*/true)) {
        AddIssueRow(c, s, /*rebuilds=*/false);
      }
    }
    Linear queued;  // B >= when it could start
    queued.Add(c.b, 1);
    queued.Add(c.issued, -1);
    Row(queued, 'G', 0);
    Linear done;  // the reader starts after the copy in
    done.Add(start_[c.u], 1);
    done.Add(c.b, -1);
    done.Add(c.o, -copy);
    Row(done, 'G', 0);
  }
  // First in, first out by read. The rules bring a second gap's tensor back
  // as early as the curve allows, which may be ahead of a copy for an
  // earlier read: outside the ordered program (whose order rows keep its
  // plans in this order) those copies keep their place on the queue rows
  // only.
  std::vector<const Candidate*> fifo;
  for (const Candidate* c : in) {
    if (ordered_ || c->parent < 0) fifo.push_back(c);
  }
  for (size_t k = 0; k + 1 < fifo.size(); ++k) {
    Linear next;
    next.Add(fifo[k + 1]->b, 1);
    next.Add(fifo[k]->b, -1);
    next.Add(fifo[k]->o, -CopySeconds(fifo[k]->t, false) * kMicroseconds);
    Row(next, 'G', 0);
  }
  AddRebuildWaits();
  if (ordered_) AddOrderRows(in);
}

// The copies in, by first read, are issued in that order: where a later one
// is back (P = 1), every offloaded earlier one is back too. Y_k(s), the most
// of P_j(s) over j >= k, carries that past the tensors kept between them;
// P changes only at the steps after one over the limit and at the windows'
// starts, so those steps suffice. A rebuild's offloaded source comes back
// before the rebuild's step: fetched as the rebuild reads it, it would go
// ahead of prefetches issued before it.
void Program::AddOrderRows(const std::vector<Candidate*>& in) {
  const int steps = m_.num_steps();
  std::vector<bool> changes(steps, false);
  for (const Candidate* c : in) changes[c->pstart] = true;
  for (int s = m_.num_layers + 1; s < steps; ++s) changes[s] = changes[s] || over_[s - 1];
  for (int s = m_.num_layers; s < steps; ++s) {
    if (!changes[s]) continue;
    int later = -1;  // Y_{k+1}(s)
    for (int k = static_cast<int>(in.size()) - 1; k >= 0; --k) {
      const Candidate& c = *in[k];
      if (s >= c.u) continue;  // back by its read: its order no longer matters
      if (later >= 0) {        // P_k(s) >= Y_{k+1}(s) when k is offloaded
        Linear e;
        AddP(&e, c, s, 1);
        e.Add(later, -1);
        e.Add(c.o, -1);
        Row(e, 'G', -1);
      }
      if (ColP(c, s) < 0) continue;  // Y_k(s) = Y_{k+1}(s)
      const int y = Col(0, 1, 0, false);
      Linear own;
      own.Add(y, 1);
      AddP(&own, c, s, -1);
      Row(own, 'G', 0);
      if (later >= 0) {
        Linear carried;
        carried.Add(y, 1);
        carried.Add(later, -1);
        Row(carried, 'G', 0);
      }
      later = y;
    }
  }
  for (const Rebuild& r : rebuilds_) {
    for (TensorId x : m_.sources[r.t]) {
      ForEntries(x, [&](const Candidate& src) {
        if (src.o < 0) return;
        for (size_t i = 0; i < r.positions.size(); ++i) {
          const int pos = r.positions[i];
          if (pos >= src.u || ColF(src, pos) < 0) continue;
          Linear e;  // P_x(pos - 1) >= z_i + F_x(pos) - 1
          AddP(&e, src, pos - 1, 1);
          e.Add(r.z[i], -1);
          AddF(&e, src, pos, -1);
          Row(e, 'G', -1);
        }
      });
    }
  }
}

// A rebuild in the gap before step `pos` whose source left the device before
// `pos` waits for that source's copy in, then recomputes, and so do the
// rebuilds in that gap that need it (its dependents): the step starts after
// all of them (the runtime brings the source back before it reruns the layer).
void Program::AddRebuildWaits() {
  // Per rebuild, the rebuilds that need it, directly or through others
  // (dependents have larger ids: rebuilds_ lists them first).
  std::vector<std::vector<int>> dependents(rebuilds_.size());
  for (size_t k = 0; k < rebuilds_.size(); ++k) {
    for (TensorId x : m_.sources[rebuilds_[k].t]) {
      const int j = rebuild_index_[x];
      if (j < 0) continue;
      std::vector<int>& into = dependents[j];
      into.push_back(static_cast<int>(k));
      into.insert(into.end(), dependents[k].begin(), dependents[k].end());
      std::sort(into.begin(), into.end());
      into.erase(std::unique(into.begin(), into.end()), into.end());
    }
  }
  for (size_t k = 0; k < rebuilds_.size(); ++k) {
    const Rebuild& r = rebuilds_[k];
    for (TensorId x : m_.sources[r.t]) {
      ForEntries(x, [&](const Candidate& src) {
        if (src.o < 0) return;
        const double copy = CopySeconds(x, false) * kMicroseconds;
        for (size_t i = 0; i < r.positions.size(); ++i) {
          const int pos = r.positions[i];
          if (pos >= src.u || ColF(src, pos) < 0) continue;
          // S_pos >= when x's copy is issued + copy + this rebuild + its
          // dependents' at pos, when z_i = 1 and x is freed by pos.
          Linear e;
          e.Add(start_[pos], 1);
          // The ordered program's copies in are first in, first out as the
          // run issues them: the copy starts at B. Otherwise a source fetched
          // for the rebuild may overtake the queue: it starts once issued.
          e.Add(ordered_ ? src.b : src.issued, -1);
          double after = 0;
          for (int j : dependents[k]) {
            const Rebuild& d = rebuilds_[j];
            const auto at = std::find(d.positions.begin(), d.positions.end(), pos);
            if (at == d.positions.end()) continue;
            e.Add(d.z[at - d.positions.begin()], -d.seconds);
            after += d.seconds;
          }
          const double big = horizon_ + copy + r.seconds + after;
          e.Add(r.z[i], -big);
          AddF(&e, src, pos, -big);
          Row(e, 'G', copy + r.seconds - 2 * big);
        }
      });
    }
  }
}

double Program::AddRebuildsAt(Linear* e, int step) const {
  double most = 0;
  for (const auto& [z, seconds] : rebuilds_at_[step]) {
    e->Add(z, -seconds);
    most += seconds;
  }
  return most;
}

// Issued >= end of step s-1 (and, with `rebuilds`, of the rebuilds before
// s: the runtime rebuilds as s reads, then issues s's prefetches) while
// q >= s. A copy brought back for a rebuild at s is issued amid them: the
// rebuilds count only when none at s reads it. Returns whether one may.
bool Program::AddIssueRow(const Candidate& c, int s, bool rebuilds) {
  const double compute = m_.costs.step_seconds[s - 1] * kMicroseconds;
  Linear begin;
  begin.Add(c.issued, 1);
  begin.Add(start_[s - 1], -1);
  double rebuilding = 0;
  bool read = false;
  if (rebuilds) {
    rebuilding = AddRebuildsAt(&begin, s);
    read = AddRebuildsReading(&begin, c.t, s, rebuilding);
  }
  const double big = latest_[s - 1] + compute + rebuilding;
  AddP(&begin, c, s - 1, big);
  begin.Add(c.o, -big);
  Row(begin, 'G', compute - big);
  return read;
}

void Program::AddStartIssueRow(const Candidate& c, int s) {
  const double big = latest_[s];
  Linear begin;
  begin.Add(c.issued, 1);
  begin.Add(start_[s], -1);
  AddP(&begin, c, s - 1, big);
  begin.Add(c.o, -big);
  Row(begin, 'G', -big);
}

bool Program::AddRebuildsReading(Linear* e, TensorId t, int step, double coef) const {
  bool any = false;
  for (int k : readers_[t]) {
    const Rebuild& r = rebuilds_[k];
    for (size_t i = 0; i < r.positions.size(); ++i) {
      if (r.positions[i] != step) continue;
      e->Add(r.z[i], coef);
      any = true;
    }
  }
  return any;
}

double Program::QueueTerms(int a, int b, bool outs, bool ins, Linear* e) const {
  double most = 0;
  for (const Candidate& c : cands_) {
    if (c.o < 0) continue;
    if (outs && c.parent < 0 && c.p >= a && ColF(c, b) >= 0) {
      const double copy = CopySeconds(c.t, true) * kMicroseconds;
      AddF(e, c, b, -copy);
      most += copy;
    }
    if (ins && c.u <= b && a < c.u) {
      const double copy = CopySeconds(c.t, false) * kMicroseconds;
      e->Add(c.o, -copy);
      AddP(e, c, a, copy);
      most += copy;
    }
  }
  return most;
}

// The copy queues: every copy whose window lies between the starts of steps
// a and b runs in that span, after step a computes, on its direction's
// queue; over a link that carries one way at a time both directions share
// the span (one row), over a duplex link each has it (a row each way). A copy out of i
// is in it when its writer runs at or after a and it is freed before b
// (F_ib); a copy in, when it is prefetched after step a (q_i > a:
// o_i - P_ia) and read by b. A row is written only where a and b are steps
// at which some term starts or stops counting or changes its column (any
// other is implied by one of a shorter span with the same terms), and where
// its copies could outlast the span's computation (or the timeline's gap
// rows imply it: the span computes for earliest_[b] - earliest_[a] at least).
void Program::AddQueueRow(int a, int b, bool outs, bool ins) {
  Linear e;
  const double most = QueueTerms(a, b, outs, ins, &e);
  const double rhs = m_.costs.step_seconds[a] * kMicroseconds;
  if (e.cols.empty() || rhs + most <= earliest_[b] - earliest_[a]) return;
  e.Add(start_[b], 1);
  e.Add(start_[a], -1);
  Row(e, 'G', rhs);
}

void Program::AddQueueRows() {
  const int steps = m_.num_steps();
  std::vector<bool> from(steps, false), to(steps, false);
  for (const Candidate& c : cands_) {
    if (c.o < 0) continue;
    for (int s = 0; s < steps; ++s) {
      from[s] = from[s] || s == c.p || s == c.u - 1 || ColP(c, s) != ColP(c, s + 1);
      to[s] = to[s] || s == c.u || (s > 0 && ColF(c, s) != ColF(c, s - 1));
    }
  }
  for (int a = 0; a < steps; ++a) {
    for (int b = a + 1; b < steps && from[a]; ++b) {
      if (!to[b]) continue;
      if (m_.profile.link.duplex) {
        AddQueueRow(a, b, /*outs=*/true, /*ins=*/false);
        AddQueueRow(a, b, /*outs=*/false, /*ins=*/true);
      } else {
        AddQueueRow(a, b, /*outs=*/true, /*ins=*/true);
      }
    }
  }
}

void Program::Build() {
  AddCandidates();
  AddRebuilds();
  AddMemoryRows();
  AddTimeline();
  AddQueueRows();
  Load();
}

void Program::Load() {
  std::vector<CoinBigIndex> start(columns_ + 1, 0);
  for (const Entry& e : entries_) ++start[e.col + 1];
  for (int c = 0; c < columns_; ++c) start[c + 1] += start[c];
  std::vector<CoinBigIndex> next(start.begin(), start.end() - 1);
  std::vector<int> index(entries_.size());
  std::vector<double> value(entries_.size());
  for (const Entry& e : entries_) {
    index[next[e.col]] = e.row;
    value[next[e.col]++] = e.value;
  }
  Cbc_loadProblem(model_.get(), columns_, rows_, start.data(), index.data(), value.data(),
                  col_lower_.data(), col_upper_.data(), objective_.data(), row_lower_.data(),
                  row_upper_.data());
  for (int c = 0; c < columns_; ++c) {
    if (integer_[c]) Cbc_setInteger(model_.get(), c);
  }
  Cbc_setObjSense(model_.get(), 1);
}

void Program::Start(const Decisions& d, bool fix) {
  std::vector<double> value(columns_, 0.0);
  std::vector<int> cols;
  std::vector<int> back(m_.schedule->tensors.size(), -1);  // offloaded: when it is back
  std::vector<int> back_again(back.size(), -1);            // the same over its second gap
  for (const Candidate& c : cands_) {
    const TensorDecision& x = d[c.t];
    if (c.d >= 0) {
      cols.push_back(c.d);
      value[c.d] = x.choice == TensorChoice::kDrop ? 1 : 0;
    }
    if (c.parent >= 0) continue;
    if (c.o >= 0 && x.choice == TensorChoice::kOffload) back[c.t] = x.in;
    if (c.second >= 0 && x.choice == TensorChoice::kOffload && x.again_out >= 0) {
      back_again[c.t] = x.again_in;
    }
  }
  for (const Rebuild& r : rebuilds_) {  // dependents first: their columns are set
    int first = -1;                     // the earliest trigger that fires
    for (const Rebuild::Trigger& g : r.triggers) {
      bool fires = true;
      for (int col : g.cols) fires = fires && value[col] > kHalf;
      if (fires && (first < 0 || g.step < first)) first = g.step;
    }
    if (index_[r.t] < 0) value[r.col] = first >= 0 ? 1 : 0;
    for (size_t i = 0; i < r.positions.size(); ++i) {
      cols.push_back(r.z[i]);
      value[r.z[i]] = value[r.col] > kHalf && r.positions[i] == first ? 1 : 0;
    }
    if (value[r.col] < kHalf) continue;
    for (TensorId x : m_.sources[r.t]) {  // an offloaded source comes back for the rebuild
      if (index_[x] < 0 || back[x] < 0) continue;
      const Candidate& src = cands_[index_[x]];
      if (first < src.u) {
        back[x] = std::min(back[x], std::max({first, src.pstart, d[x].out + 1}));
      } else if (back_again[x] >= 0 && first > d[x].again_out && first < back_again[x]) {
        back_again[x] = std::max(first, d[x].again_out + 1);
      }
    }
  }
  for (const Candidate& c : cands_) {
    if (c.parent < 0) {
      StartOffload(c, d[c.t].out, back[c.t], &value, &cols);
    } else {
      StartOffload(c, d[c.t].again_out, back_again[c.t], &value, &cols);
    }
  }
  std::vector<double> values;
  for (int col : cols) {
    values.push_back(value[col]);
    if (fix) {
      Cbc_setColLower(model_.get(), col, value[col]);
      Cbc_setColUpper(model_.get(), col, value[col]);
    }
  }
  Cbc_setMIPStartI(model_.get(), static_cast<int>(cols.size()), cols.data(), values.data());
}

// Offloaded (back >= 0): absent over [out + 1, back - 1]; as the program's
// columns have it, from the first step over the limit there to just after
// the last (kept when there is none).
void Program::StartOffload(const Candidate& c, int out, int back, std::vector<double>* value,
                           std::vector<int>* cols) const {
  if (c.o < 0) return;
  cols->push_back(c.o);
  int first = -1, last = -1;
  for (int s = out + 1; back >= 0 && s < back; ++s) {
    if (!over_[s]) continue;
    if (first < 0) first = s;
    last = s;
  }
  (*value)[c.o] = first >= 0 ? 1 : 0;
  const int g = first - 1, q = std::max(last + 1, c.pstart);
  for (int s = c.lfu + 1; s < c.u; ++s) {
    if (ColF(c, s) < 0 || ColF(c, s) == ColF(c, s - 1)) continue;
    cols->push_back(ColF(c, s));
    (*value)[cols->back()] = first >= 0 && g < s ? 1 : 0;
  }
  for (int s = c.pstart; s < c.u; ++s) {
    if (ColP(c, s) < 0 || (s > c.pstart && ColP(c, s) == ColP(c, s - 1))) continue;
    cols->push_back(ColP(c, s));
    (*value)[cols->back()] = first >= 0 && q <= s ? 1 : 0;
  }
}

Decisions Program::Read(const double* x) const {
  Decisions d = KeepAll(m_);
  auto one = [&](int col) { return col >= 0 && x[col] > kHalf; };
  // When `c` leaves (after g) and is back (before q).
  auto window = [&](const Candidate& c) {
    int g = c.lfu, q = c.u;
    while (g + 1 < c.u && !one(ColF(c, g + 1))) ++g;
    for (int s = c.u - 1; s >= c.pstart && one(ColP(c, s)); --s) q = s;
    return std::make_pair(g, std::max(q, g + 1));
  };
  for (const Candidate& c : cands_) {  // first gaps, then second ones
    TensorDecision& to = d[c.t];
    if (c.parent >= 0) {  // leaves again only if offloaded (the other program does not tie them)
      if (!one(c.o) || to.choice != TensorChoice::kOffload) continue;
      std::tie(to.again_out, to.again_in) = window(c);
    } else if (one(c.d)) {
      to = {TensorChoice::kDrop, c.lfu, c.u};
    } else if (one(c.o)) {
      const auto [g, q] = window(c);
      to = {TensorChoice::kOffload, g, q};
    }
  }
  return d;
}

double Program::BytesAt(const double* x, int s) const {
  const double keep_all = KeepAllBytes(s);
  const int row = memory_row_[s];
  if (row < 0) return keep_all;
  double absent = memory_const_[s];
  for (const Entry& e : entries_) {
    if (e.row == row) absent += e.value * x[e.col];
  }
  return keep_all - absent * kMemoryUnit;
}

// The program's time of the plan `d` (every binary fixed to it), in
// microseconds; kOutOfMemory when `d` breaks its memory rows.
StatusOr<double> ProgramTime(const EvalModel& model, const std::vector<double>& step_limit,
                             const Decisions& d, bool ordered = false) {
  Program program(model, step_limit, std::numeric_limits<double>::infinity(), ordered);
  program.Build();
  Cbc_Model* m = program.cbc();
  Cbc_setLogLevel(m, 0);
  Cbc_setParameter(m, "threads", "1");
  program.Start(d, /*fix=*/true);
  Cbc_solve(m);
  if (Cbc_bestSolution(m) == nullptr) {
    return OutOfMemory("the plan is not a point of the program (its memory rows)");
  }
  return Cbc_getObjValue(m);
}

double ComputeMicroseconds(const EvalModel& model) {
  double compute = 0;
  for (int s = 0; s < model.num_steps(); ++s) {
    compute += model.costs.step_seconds[s] * kMicroseconds;
  }
  return compute;
}

}  // namespace

StatusOr<double> MilpOverheadOf(const EvalModel& model, size_t limit, const Decisions& d) {
  const std::vector<double> step_limit(model.num_steps(), static_cast<double>(limit));
  SPILL_ASSIGN_OR_RETURN(const double time, ProgramTime(model, step_limit, d));
  return (time - ComputeMicroseconds(model)) / kMicroseconds;
}

// The solves of the program (ordered or not, see Program) from `start`:
// its bound and its plan, replayed.
StatusOr<MilpResult> SolveRounds(const EvalModel& model, size_t limit, double time_limit_seconds,
                                 const Decisions* start, bool ordered) {
  MilpResult result;
  std::vector<double> step_limit(model.num_steps(), static_cast<double>(limit));
  Evaluator evaluator(model);
  PlanRules rules(model, limit);
  // The iteration's computation with every tensor kept, in microseconds.
  const double compute = ComputeMicroseconds(model);
  // The starting plan's own time bounds the first solve's (its big Ms too).
  double upper = std::numeric_limits<double>::infinity();
  if (start != nullptr) {
    const StatusOr<double> time = ProgramTime(model, step_limit, *start, ordered);
    if (time.ok()) upper = *time + kUpperSlack;
  }
  MilpResult best;  // the fastest plan that fit, of every round
  for (int round = 0; round < kMaxRounds; ++round) {
    // Later rounds tighten the memory rows: the start may no longer be a point.
    Program program(model, step_limit, round == 0 ? upper : std::numeric_limits<double>::infinity(),
                    ordered);
    program.Build();
    Cbc_Model* m = program.cbc();
    Cbc_setLogLevel(m, 0);
    Cbc_setParameter(m, "threads", "1");
    Cbc_setParameter(m, "timeMode", "elapsed");
    Cbc_setParameter(m, "seconds", std::to_string(time_limit_seconds).c_str());
    // No CGL preprocessing: CBC 2.10 crashes in CglPreProcess::postProcess
    // when the time limit ends a solve after a starting plan was accepted
    // but before the root relaxation was solved (the residual test network
    // at one second, tests/feasibility_test.cc). The solves are slower to
    // prove optimality without it, but a time limit is then a result.
    Cbc_setParameter(m, "preprocess", "off");
    if (start != nullptr && upper < std::numeric_limits<double>::infinity()) program.Start(*start);
    Cbc_solve(m);
    result.rounds = round + 1;
    result.columns = program.columns();
    result.rows = program.rows();
    if (round == 0) {
      result.optimal = Cbc_isProvenOptimal(m) != 0;
      result.lower_bound =
          std::max(0.0, (Cbc_getBestPossibleObjValue(m) - compute) / kMicroseconds);
      if (Cbc_isProvenInfeasible(m)) break;  // no plan of the space fits: the bound stands alone
    }
    const double* x = Cbc_bestSolution(m);
    if (x == nullptr) break;
    result.objective = (Cbc_getObjValue(m) - compute) / kMicroseconds;
    // Proven optimal, the program's optimum is the bound (CBC's best
    // possible value can be one from before the search closed).
    if (round == 0 && result.optimal) {
      result.lower_bound = std::max(result.lower_bound, result.objective);
    }
    result.decisions = program.Read(x);
    if (model.has_host_params) {  // parameters late where the replay is over
      std::vector<size_t> curve = evaluator.Run(result.decisions).step_peak;
      ComeLate(model, limit, &curve, &result.decisions);
    }
    const std::string wrong = CheckDecisions(model, result.decisions);
    if (!wrong.empty()) return Internal("the MILP's plan is not a plan: " + wrong);
    const Evaluation own = evaluator.Run(result.decisions);
    Evaluation e = own;
    // The program times copies loosely; its choices timed by the fixed rules
    // may do better.
    Choices choices(model.schedule->tensors.size(), TensorChoice::kKeep);
    for (TensorId t : model.candidates) choices[t] = result.decisions[t].choice;
    Decisions timed;
    const Evaluation& by_rules = rules.Evaluate(choices, &timed);
    result.retimed = by_rules.peak <= limit && (e.peak > limit || by_rules.seconds < e.seconds);
    if (result.retimed) {
      result.decisions = timed;
      e = by_rules;
    }
    result.seconds = e.seconds;
    result.peak = e.peak;
    result.feasible = e.peak <= limit;
    if (result.feasible && (best.decisions.empty() || e.seconds < best.seconds)) best = result;
    // The ordered program's own plan is what it times: solved again until
    // that fits, its choices by the rules kept meanwhile.
    if (own.peak <= limit || (result.feasible && !ordered)) break;
    // What the program left out at each step over (what rebuilds add), taken
    // off that step's limit: this plan's own gap, so that the same plan is
    // out of the next solve, and at least the excess.
    for (int s = 0; s < model.num_steps(); ++s) {
      if (own.step_peak[s] <= limit) continue;
      const double excess = static_cast<double>(own.step_peak[s] - limit);
      const double gap = static_cast<double>(own.step_peak[s]) - program.BytesAt(x, s);
      step_limit[s] = std::min(step_limit[s] - excess, static_cast<double>(limit) - gap);
    }
  }
  if (!best.decisions.empty() && (!result.feasible || best.seconds < result.seconds)) {
    best.rounds = result.rounds;
    best.optimal = result.optimal;
    best.lower_bound = result.lower_bound;
    return best;
  }
  return result;
}

StatusOr<MilpResult> SolveMilp(const EvalModel& model, size_t limit, double time_limit_seconds,
                               const Decisions* start) {
  const auto begin = std::chrono::steady_clock::now();
  // The bound is the program's over the whole space; the plan, the ordered
  // program's, whose time is the run's, unless the other's replays faster.
  SPILL_ASSIGN_OR_RETURN(MilpResult result,
                         SolveRounds(model, limit, time_limit_seconds, start, /*ordered=*/false));
  SPILL_ASSIGN_OR_RETURN(const MilpResult ordered,
                         SolveRounds(model, limit, time_limit_seconds, start, /*ordered=*/true));
  result.rounds += ordered.rounds;
  if (ordered.feasible && (!result.feasible || ordered.seconds <= result.seconds)) {
    result.decisions = ordered.decisions;
    result.seconds = ordered.seconds;
    result.peak = ordered.peak;
    result.objective = ordered.objective;
    result.retimed = ordered.retimed;
    result.feasible = true;
    result.ordered = true;
  }
  Evaluator evaluator(model);
  if (start != nullptr) {  // the plan CBC started from may still be the faster one
    const Evaluation& e = evaluator.Run(*start);
    if (e.peak <= limit && (!result.feasible || e.seconds < result.seconds)) {
      result.decisions = *start;
      result.seconds = e.seconds;
      result.peak = e.peak;
      result.feasible = true;
      result.retimed = false;
      result.kept_start = true;
    }
  }
  result.solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace spill
