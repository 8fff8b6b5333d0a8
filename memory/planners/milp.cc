// The program of milp.h on CBC's C interface. Time in microseconds, memory
// in KiB (pool blocks), so that coefficients stay within a few decades.
#include "memory/planners/milp.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace spill {
namespace {

constexpr double kMicroseconds = 1e6;
constexpr double kMemoryUnit = 1024;  // bytes per unit of the memory rows
constexpr int kMaxRounds = 4;         // solves with tightened rows
constexpr double kHalf = 0.5;         // binaries read back
constexpr double kUnbounded = std::numeric_limits<double>::max();  // CBC's infinity

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
  int o = -1, d = -1;                   // columns; -1: not open to it
  std::vector<int> f, q;                // F over [lfu+1, u-1], P over [pstart, u-1]
  int rebuild_lo = 0, rebuild_hi = -1;  // steps its rebuild may run at
};

class Program {
 public:
  Program(const EvalModel& m, const std::vector<double>& step_limit)
      : m_(m), step_limit_(step_limit), model_(Cbc_newModel(), Cbc_deleteModel) {}

  void Build();
  Cbc_Model* cbc() { return model_.get(); }
  int columns() const { return columns_; }
  int rows() const { return rows_; }
  void Start(const Decisions& d);
  Decisions Read(const double* x) const;

 private:
  int Col(double lb, double ub, double obj, bool integer) {
    Cbc_addCol(model_.get(), "", lb, ub, obj, integer ? 1 : 0, 0, nullptr, nullptr);
    return columns_++;
  }
  void Row(const Linear& e, char sense, double rhs) {
    Cbc_addRow(model_.get(), "", static_cast<int>(e.cols.size()), e.cols.data(), e.coefs.data(),
               sense, rhs - e.constant);
    ++rows_;
  }
  // F_is, P_is of candidate i into `e` with `coef` (nothing where they are 0).
  void AddF(Linear* e, const Candidate& c, int s, double coef) const {
    if (c.o < 0 || s <= c.lfu) return;
    e->Add(s >= c.u ? c.o : c.f[s - c.lfu - 1], coef);
  }
  void AddP(Linear* e, const Candidate& c, int s, double coef) const {
    if (c.o < 0 || s < c.pstart) return;
    e->Add(s >= c.u ? c.o : c.q[s - c.pstart], coef);
  }
  double CopySeconds(TensorId t, bool to_host) const {
    const LinkProfile& link = m_.profile.link;
    const double bandwidth = to_host ? link.d2h_bytes_per_second : link.h2d_bytes_per_second;
    return link.latency_seconds + (bandwidth > 0 ? m_.schedule->tensors[t].bytes / bandwidth : 0);
  }
  void AddCandidates();
  void AddRecomputation();
  void AddMemoryRows();
  void AddStallRows();

  const EvalModel& m_;
  const std::vector<double>& step_limit_;
  ModelPtr model_;
  int columns_ = 0, rows_ = 0;
  std::vector<Candidate> cands_;
  std::vector<int> index_;                    // tensor -> candidate index, -1
  std::vector<std::vector<int>> dependents_;  // candidate -> droppable candidates rebuilt from it
  std::vector<int> y_;                        // tensor -> column of "rerun with a dependent", -1
  std::vector<int> y_lo_, y_hi_;              // its rebuild steps
};

void Program::AddCandidates() {
  const int n = m_.num_layers;
  index_.assign(m_.schedule->tensors.size(), -1);
  for (TensorId t : m_.candidates) {
    Candidate c;
    c.t = t;
    c.p = m_.liveness.first_use[t];
    c.lfu = m_.last_forward_use[t];
    c.u = m_.first_backward_use[t];
    c.pstart = std::max(c.lfu + 1, n);
    if (m_.offloadable[t]) {
      c.o = Col(0, 1, 0, true);
      for (int s = c.lfu + 1; s < c.u; ++s) c.f.push_back(Col(0, 1, 0, true));
      for (int s = c.pstart; s < c.u; ++s) c.q.push_back(Col(0, 1, 0, true));
    }
    if (m_.droppable[t]) {
      const int layer = m_.schedule->tensors[t].layer;
      c.d = Col(0, 1, m_.costs.recompute_seconds[layer] * kMicroseconds, true);
      c.rebuild_lo = c.rebuild_hi = c.u;
    }
    index_[t] = static_cast<int>(cands_.size());
    cands_.push_back(std::move(c));
  }
  dependents_.assign(cands_.size(), {});
  for (size_t i = 0; i < cands_.size(); ++i) {
    if (cands_[i].d < 0) continue;
    for (TensorId x : m_.sources[cands_[i].t]) {
      if (index_[x] >= 0) dependents_[index_[x]].push_back(static_cast<int>(i));
    }
  }
  for (const Candidate& c : cands_) {
    if (c.o >= 0 && c.d >= 0) {
      Linear e;
      e.Add(c.o, 1);
      e.Add(c.d, 1);
      Row(e, 'L', 1);
    }
    if (c.o < 0) continue;
    for (int s = c.lfu + 1; s < c.u; ++s) {  // F_is <= F_i,s+1
      Linear e;
      AddF(&e, c, s, 1);
      AddF(&e, c, s + 1, -1);
      Row(e, 'L', 0);
    }
    for (int s = c.pstart; s < c.u; ++s) {  // P_is <= P_i,s+1 and P_is <= F_is
      Linear e;
      AddP(&e, c, s, 1);
      AddP(&e, c, s + 1, -1);
      Row(e, 'L', 0);
      Linear back;
      AddP(&back, c, s, 1);
      AddF(&back, c, s, -1);
      Row(back, 'L', 0);
    }
  }
}

// Forward-only inputs are rerun with the first dropped tensor that needs
// them (y_x >= d_X, and on through their own forward-only inputs); a
// tensor's rebuild runs at its first backward read or at a dependent's.
void Program::AddRecomputation() {
  const Schedule& schedule = *m_.schedule;
  const TensorId count = static_cast<TensorId>(schedule.tensors.size());
  y_.assign(count, -1);
  y_lo_.assign(count, 1 << 30);
  y_hi_.assign(count, -1);
  for (TensorId t = count - 1; t >= 0; --t) {
    int col = -1, lo = 0, hi = -1;
    if (index_[t] >= 0 && cands_[index_[t]].d >= 0) {
      Candidate& c = cands_[index_[t]];
      col = c.d;
      c.rebuild_lo = std::min(c.rebuild_lo, y_lo_[t]);
      c.rebuild_hi = std::max(c.rebuild_hi, y_hi_[t]);
      lo = c.rebuild_lo;
      hi = c.rebuild_hi;
    } else if (y_[t] >= 0) {
      col = y_[t];
      lo = y_lo_[t];
      hi = y_hi_[t];
    }
    if (col < 0) continue;
    for (TensorId x : m_.sources[t]) {
      if (index_[x] >= 0 && cands_[index_[x]].d >= 0) {  // a droppable source: rebuilt here too
        y_lo_[x] = std::min(y_lo_[x], lo);
        y_hi_[x] = std::max(y_hi_[x], hi);
        continue;
      }
      if (!m_.forward_only[x]) continue;
      if (y_[x] < 0) {
        y_[x] =
            Col(0, 1, m_.costs.recompute_seconds[schedule.tensors[x].layer] * kMicroseconds, false);
      }
      y_lo_[x] = std::min(y_lo_[x], lo);
      y_hi_[x] = std::max(y_hi_[x], hi);
      Linear e;  // y_x >= (d or y) of t
      e.Add(y_[x], 1);
      e.Add(col, -1);
      Row(e, 'G', 0);
    }
  }
}

void Program::AddMemoryRows() {
  for (int s = 0; s < m_.num_steps(); ++s) {
    const double over = (static_cast<double>(m_.base_step_peak[s]) - step_limit_[s]) / kMemoryUnit;
    if (over <= 0) continue;
    Linear e;  // bytes absent at s >= what is over
    for (const Candidate& c : cands_) {
      if (s <= c.lfu || s >= c.u) continue;
      const double b = static_cast<double>(m_.bytes[c.t]) / kMemoryUnit;
      AddF(&e, c, s, b);
      AddP(&e, c, s, -b);
      if (c.d >= 0) e.Add(c.d, b);
      // Back for a dependent's rebuild: present from its first backward read.
      if (c.d >= 0 && c.rebuild_lo < c.u && s >= c.rebuild_lo) {
        const int v = Col(0, 1, 0, false);
        e.Add(v, -b);
        for (int x : dependents_[index_[c.t]]) {  // rebuilt with a dropped dependent read by s
          if (cands_[x].u > s) continue;
          Linear both;  // v >= d_c + d_x - 1
          both.Add(v, 1);
          both.Add(c.d, -1);
          both.Add(cands_[x].d, -1);
          Row(both, 'G', -1);
        }
      }
    }
    Row(e, 'G', over);
  }
  // An offloaded source of a dropped tensor is back when that is rebuilt.
  for (const Candidate& c : cands_) {
    if (c.d < 0) continue;
    for (TensorId x : m_.sources[c.t]) {
      if (index_[x] < 0 || cands_[index_[x]].o < 0) continue;
      const Candidate& src = cands_[index_[x]];
      if (c.u >= src.u) continue;
      Linear e;  // P_x(u_c) >= o_x + d_c - 1
      AddP(&e, src, c.u, 1);
      e.Add(src.o, -1);
      e.Add(c.d, -1);
      Row(e, 'G', -1);
    }
  }
}

void Program::AddStallRows() {
  const int steps = m_.num_steps();
  const int z = Col(0, kUnbounded, 1, false);
  for (int width = 1;; width *= 2) {
    for (int offset : {0, width / 2}) {  // windows of `width` steps, and shifted by half
      Linear partition;                  // Z >= sum of this partition's sigmas
      partition.Add(z, 1);
      for (int a = offset - (offset > 0 ? width : 0); a < steps; a += width) {
        const int lo = std::max(a, 0), hi = std::min(a + width, steps) - 1;
        Linear e;
        double compute = 0;
        for (int s = lo; s <= hi; ++s) compute += m_.costs.step_seconds[s] * kMicroseconds;
        for (const Candidate& c : cands_) {
          if (c.o >= 0 && c.p >= lo - 1 && c.lfu < hi) {
            AddF(&e, c, hi, -CopySeconds(c.t, true) * kMicroseconds);
          }
          if (c.o >= 0 && c.u <= hi && c.u >= lo) {
            const double in = CopySeconds(c.t, false) * kMicroseconds;
            e.Add(c.o, -in);
            AddP(&e, c, lo - 1, in);
          }
        }
        if (e.cols.empty()) continue;
        for (const Candidate& c : cands_) {  // recomputation that may run inside
          if (c.d >= 0 && c.rebuild_lo <= hi && c.rebuild_hi >= lo) {
            e.Add(c.d, m_.costs.recompute_seconds[m_.schedule->tensors[c.t].layer] * kMicroseconds);
          }
        }
        for (TensorId x = 0; x < static_cast<TensorId>(y_.size()); ++x) {
          if (y_[x] >= 0 && y_lo_[x] <= hi && y_hi_[x] >= lo) {
            e.Add(y_[x], m_.costs.recompute_seconds[m_.schedule->tensors[x].layer] * kMicroseconds);
          }
        }
        const int sigma = Col(0, kUnbounded, 0, false);
        e.Add(sigma, 1);
        Row(e, 'G', -compute);  // sigma >= C - B - R
        partition.Add(sigma, -1);
      }
      if (partition.cols.size() > 1) Row(partition, 'G', 0);
      if (width == 1) break;  // no half step
    }
    if (width >= steps) break;
  }
}

void Program::Build() {
  Cbc_setObjSense(model_.get(), 1);
  AddCandidates();
  AddRecomputation();
  AddMemoryRows();
  AddStallRows();
}

void Program::Start(const Decisions& d) {
  std::vector<int> cols;
  std::vector<double> values;
  for (const Candidate& c : cands_) {
    const TensorDecision& x = d[c.t];
    const bool off = x.choice == TensorChoice::kOffload, drop = x.choice == TensorChoice::kDrop;
    if (c.d >= 0) {
      cols.push_back(c.d);
      values.push_back(drop ? 1 : 0);
    }
    if (c.o < 0) continue;
    cols.push_back(c.o);
    values.push_back(off ? 1 : 0);
    for (int s = c.lfu + 1; s < c.u; ++s) {
      cols.push_back(c.f[s - c.lfu - 1]);
      values.push_back(off && x.out < s ? 1 : 0);
    }
    for (int s = c.pstart; s < c.u; ++s) {
      cols.push_back(c.q[s - c.pstart]);
      values.push_back(off && x.in <= s ? 1 : 0);
    }
  }
  Cbc_setMIPStartI(model_.get(), static_cast<int>(cols.size()), cols.data(), values.data());
}

Decisions Program::Read(const double* x) const {
  Decisions d = KeepAll(m_);
  for (const Candidate& c : cands_) {
    if (c.d >= 0 && x[c.d] > kHalf) {
      d[c.t] = {TensorChoice::kDrop, c.lfu, c.u};
    } else if (c.o >= 0 && x[c.o] > kHalf) {
      int g = c.lfu, q = c.u;
      while (g + 1 < c.u && x[c.f[g + 1 - c.lfu - 1]] < kHalf) ++g;
      for (int s = c.u - 1; s >= c.pstart && x[c.q[s - c.pstart]] > kHalf; --s) q = s;
      d[c.t] = {TensorChoice::kOffload, g, std::max(q, g + 1)};
    }
  }
  return d;
}

}  // namespace

StatusOr<MilpResult> SolveMilp(const EvalModel& model, size_t limit, double time_limit_seconds,
                               const Decisions* start) {
  const auto begin = std::chrono::steady_clock::now();
  MilpResult result;
  std::vector<double> step_limit(model.num_steps(), static_cast<double>(limit));
  Evaluator evaluator(model);
  for (int round = 0; round < kMaxRounds; ++round) {
    Program program(model, step_limit);
    program.Build();
    Cbc_Model* m = program.cbc();
    Cbc_setLogLevel(m, 0);
    Cbc_setParameter(m, "threads", "1");
    Cbc_setParameter(m, "timeMode", "elapsed");
    Cbc_setParameter(m, "seconds", std::to_string(time_limit_seconds).c_str());
    if (start != nullptr) program.Start(*start);
    Cbc_solve(m);
    result.rounds = round + 1;
    result.columns = program.columns();
    result.rows = program.rows();
    if (round == 0) {
      result.optimal = Cbc_isProvenOptimal(m) != 0;
      result.lower_bound = std::max(0.0, Cbc_getBestPossibleObjValue(m) / kMicroseconds);
      if (Cbc_isProvenInfeasible(m)) break;  // no plan of the space fits: the bound stands alone
    }
    const double* x = Cbc_bestSolution(m);
    if (x == nullptr) break;
    result.objective = Cbc_getObjValue(m) / kMicroseconds;
    result.decisions = program.Read(x);
    const std::string wrong = CheckDecisions(model, result.decisions);
    if (!wrong.empty()) return Internal("the MILP's plan is not a plan: " + wrong);
    const Evaluation& e = evaluator.Run(result.decisions);
    result.seconds = e.seconds;
    result.peak = e.peak;
    result.feasible = e.peak <= limit;
    if (result.feasible) break;
    for (int s = 0; s < model.num_steps(); ++s) {  // what rebuilds add, taken off the limit
      if (e.step_peak[s] > limit) step_limit[s] -= static_cast<double>(e.step_peak[s] - limit);
    }
  }
  result.solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace spill
