// search: the fastest plan a local search finds, starting from greedy's.
//
// Greedy (greedy.cc) takes, at each peak, the move that adds the least time
// per byte it frees there. A copy hidden under compute costs it nothing, so
// it offloads first, and the offloads it took one by one at no cost may
// together need more link time than the forward pass has; it never goes
// back on a move. This planner keeps greedy's space (keep, offload or drop
// per tensor, completed by the fixed rules of rules.h and timed by the
// evaluator) and searches it for the least simulated iteration:
//   1. seeds: greedy from keeping everything, and greedy from plans that
//      first drop the tensors that are cheap to rebuild (cheapest per byte
//      first, each whose rebuild - with the sources dropped before it - takes
//      less than a quarter or a half of its copy to the host); the fastest
//      that fits;
//   2. descent: every other choice of every candidate in turn, a change
//      kept when the plan still fits and is faster, until a sweep changes
//      nothing;
//   3. annealing: random changes, a plan over the limit priced by how far
//      over it is, a slower one accepted with a probability that falls to
//      zero over memory.planner.evaluations evaluations (seeded by
//      memory.planner.seed);
//   4. descent again from the fastest plan that fit.
// Its plan is never slower than greedy's on the planner's profile. No plan
// when no seed fits. The mode then places its plans (PlanAndPlace below):
// it searches at the limit and a few lower ones, and keeps the plan whose
// placement by the run's allocator is fastest.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/planning/planner.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"

namespace spill {

namespace {

constexpr TensorChoice kChoices[] = {TensorChoice::kKeep, TensorChoice::kOffload,
                                     TensorChoice::kDrop};

bool Allowed(const EvalModel& m, TensorId t, TensorChoice c) {
  if (c == TensorChoice::kOffload) return m.offloadable[t];
  if (c == TensorChoice::kDrop) return m.droppable[t];
  return true;
}

// The time to rebuild `t` under `choices`: its layer's forward, and that of
// every source gone with it (forward-only or dropped), each once.
double RebuildSeconds(const EvalModel& m, const Choices& choices, TensorId t,
                      std::vector<TensorId>* stack, std::vector<int>* seen, int mark) {
  double seconds = 0;
  stack->assign(1, t);
  while (!stack->empty()) {
    const TensorId x = stack->back();
    stack->pop_back();
    if ((*seen)[x] == mark) continue;
    (*seen)[x] = mark;
    seconds += m.costs.recompute_seconds[m.schedule->tensors[x].layer];
    for (TensorId y : m.sources[x]) {
      if (m.forward_only[y] || choices[y] == TensorChoice::kDrop) stack->push_back(y);
    }
  }
  return seconds;
}

// Drops, cheapest to rebuild per byte first, every candidate whose rebuild
// takes less than `fraction` of its copy to the host while every earlier
// drop stays within its own bound.
Choices CheapDrops(const EvalModel& m, double fraction) {
  Choices choices(m.schedule->tensors.size(), TensorChoice::kKeep);
  const double bandwidth = m.profile.link.d2h_bytes_per_second;
  if (bandwidth <= 0) return choices;
  auto bound = [&](TensorId t) { return fraction * static_cast<double>(m.bytes[t]) / bandwidth; };
  auto per_byte = [&](TensorId t) {
    return m.costs.recompute_seconds[m.schedule->tensors[t].layer] /
           static_cast<double>(m.bytes[t]);
  };
  std::vector<TensorId> order;
  for (TensorId t : m.candidates) {
    if (m.droppable[t]) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](TensorId a, TensorId b) { return per_byte(a) < per_byte(b); });
  std::vector<TensorId> stack, dropped;
  std::vector<int> seen(choices.size(), -1);
  int mark = 0;
  for (TensorId t : order) {
    choices[t] = TensorChoice::kDrop;
    dropped.push_back(t);
    for (TensorId x : dropped) {
      if (RebuildSeconds(m, choices, x, &stack, &seen, mark++) >= bound(x)) {
        choices[t] = TensorChoice::kKeep;
        dropped.pop_back();
        break;
      }
    }
  }
  return choices;
}

Choices ChoicesOf(const Decisions& d) {
  Choices choices(d.size(), TensorChoice::kKeep);
  for (size_t t = 0; t < d.size(); ++t) choices[t] = d[t].choice;
  return choices;
}

// Each step's algorithms, switched between the model's own and its lean
// alternative (EvalModel::lean) on the model itself, which the rules and the
// evaluator read.
class Algorithms {
 public:
  explicit Algorithms(EvalModel& m) : m_(m), lean_(m.num_steps(), false) {
    for (int s = 0; s < m.num_steps(); ++s) {
      if (m.lean[s].algorithms != m.algorithms[s]) steps_.push_back(s);
    }
  }
  // The steps whose lean algorithms differ from their own.
  const std::vector<int>& steps() const { return steps_; }
  const std::vector<bool>& lean() const { return lean_; }

  void Toggle(int s) {
    std::swap(m_.workspace[s], m_.lean[s].workspace);
    std::swap(m_.algorithms[s], m_.lean[s].algorithms);
    std::swap(m_.costs.step_seconds[s], m_.lean[s].seconds);
    const Step& step = m_.schedule->steps[s];
    if (step.pass == Pass::kForward)
      m_.costs.recompute_seconds[step.layer] = m_.costs.step_seconds[s];
    lean_[s] = !lean_[s];
  }
  void Set(const std::vector<bool>& lean) {
    for (int s : steps_) {
      if (lean_[s] != lean[s]) Toggle(s);
    }
  }
  void SetAll(bool lean) { Set(std::vector<bool>(lean_.size(), lean)); }

 private:
  EvalModel& m_;
  std::vector<bool> lean_;
  std::vector<int> steps_;
};

// A plan of the search: a choice per tensor, lean algorithms or not per step.
struct Point {
  Choices choices;
  std::vector<bool> lean;
  double seconds = 0;
};

// The search's state: the fastest plan that fits so far, and the model's
// algorithms, which it leaves as that plan's between moves.
class Search {
 public:
  Search(PlanRules& rules, Algorithms& algorithms, Point start, int budget)
      : rules_(rules),
        m_(rules.model()),
        algorithms_(algorithms),
        best_(std::move(start)),
        budget_(budget) {
    algorithms_.Set(best_.lean);
  }

  // First-improvement sweeps from the fastest plan until one changes nothing:
  // every other choice of every candidate, every step's algorithms switched.
  void Descend() {
    for (bool improved = true; improved;) {
      improved = false;
      for (TensorId t : m_.candidates) {
        for (TensorChoice c : kChoices) {
          if (c == best_.choices[t] || !Allowed(m_, t, c)) continue;
          Choices tried = best_.choices;
          tried[t] = c;
          improved |= Keep(rules_.Evaluate(tried), [&] { best_.choices = std::move(tried); });
        }
      }
      for (int s : algorithms_.steps()) {
        algorithms_.Toggle(s);
        if (!Keep(rules_.Evaluate(best_.choices), [&] { best_.lean = algorithms_.lean(); })) {
          algorithms_.Toggle(s);
        } else {
          improved = true;
        }
      }
    }
  }

  // Simulated annealing over `budget_` evaluations from the fastest plan: a
  // random tensor's choice changed, or a random step's algorithms switched.
  void Anneal(uint64_t seed) {
    const size_t moves = m_.candidates.size() + algorithms_.steps().size();
    if (budget_ <= 0 || moves == 0) return;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uniform(0, 1);
    Choices now = best_.choices;
    double now_cost = best_.seconds;
    const double start_temperature = kStartTemperature * best_.seconds;
    for (int i = 0; i < budget_;) {
      const size_t pick = rng() % moves;
      const TensorChoice c = kChoices[rng() % 3];
      // Applied now; `undo` puts it back.
      std::function<void()> undo;
      if (pick < m_.candidates.size()) {
        const TensorId t = m_.candidates[pick];
        if (c == now[t] || !Allowed(m_, t, c)) continue;
        undo = [&now, t, was = now[t]] { now[t] = was; };
        now[t] = c;
      } else {
        const int step = algorithms_.steps()[pick - m_.candidates.size()];
        undo = [this, step] { algorithms_.Toggle(step); };
        algorithms_.Toggle(step);
      }
      ++i;
      const Evaluation& e = rules_.Evaluate(now);
      const double cost = Cost(e);
      const double temperature = start_temperature * (1 - static_cast<double>(i) / budget_);
      if (cost >= now_cost &&
          (temperature <= 0 || uniform(rng) >= std::exp((now_cost - cost) / temperature))) {
        undo();
        continue;
      }
      now_cost = cost;
      if (rules_.Fits(e) && e.seconds < best_.seconds) best_ = {now, algorithms_.lean(), e.seconds};
    }
    algorithms_.Set(best_.lean);
  }

  const Point& best() const { return best_; }

 private:
  static constexpr double kBetter = 1e-9;            // relative: what counts as faster
  static constexpr double kStartTemperature = 0.01;  // of the starting plan's time
  static constexpr double kOverPrice = 20;           // time added per limit exceeded

  // Whether `e` fits and is faster than the best; if so `take` makes it the
  // best.
  template <typename Take>
  bool Keep(const Evaluation& e, Take take) {
    if (!rules_.Fits(e) || e.seconds >= best_.seconds * (1 - kBetter)) return false;
    best_.seconds = e.seconds;
    take();
    return true;
  }

  // A plan's time, raised by kOverPrice times the fraction of the limit its
  // peak exceeds it by.
  double Cost(const Evaluation& e) const {
    const double limit = static_cast<double>(rules_.limit());
    const double over = e.peak > rules_.limit() ? (static_cast<double>(e.peak) - limit) / limit : 0;
    return e.seconds * (1 + kOverPrice * over);
  }

  PlanRules& rules_;
  const EvalModel& m_;
  Algorithms& algorithms_;
  Point best_;
  int budget_;
};

// The fastest of greedy's plans from the seeds, with every step's own
// algorithms and then with every step's lean ones; none when none fits.
StatusOr<Point> Seed(PlanRules& rules, Algorithms& algorithms) {
  const EvalModel& m = rules.model();
  const Choices keep(m.schedule->tensors.size(), TensorChoice::kKeep);
  Status first = Status::Ok();
  Point best;
  for (bool lean : {false, true}) {
    if (lean && algorithms.steps().empty()) break;
    algorithms.SetAll(lean);
    for (const Choices& seed : {keep, CheapDrops(m, 0.25), CheapDrops(m, 0.5)}) {
      StatusOr<Decisions> d = PlanGreedyFrom(rules, seed, "search");
      if (!d.ok()) {
        if (first.ok()) first = d.status();
        continue;
      }
      Choices c = ChoicesOf(*d);
      const double seconds = rules.Evaluate(c).seconds;
      if (best.choices.empty() || seconds < best.seconds) {
        best = {std::move(c), algorithms.lean(), seconds};
      }
    }
  }
  if (best.choices.empty()) return first;
  return best;
}

}  // namespace

StatusOr<Decisions> PlanSearch(PlanRules& rules, EvalModel& model, int evaluations, uint64_t seed) {
  if (model.base_peak <= rules.limit()) return KeepAll(model);  // nothing is faster
  Algorithms algorithms(model);
  SPILL_ASSIGN_OR_RETURN(Point start, Seed(rules, algorithms));
  Search search(rules, algorithms, std::move(start), evaluations);
  search.Descend();
  search.Anneal(seed);
  search.Descend();
  Decisions decisions;
  rules.Evaluate(search.best().choices, &decisions);
  return decisions;
}

namespace {

// Placement costs what the evaluator does not count (it sums live bytes):
// holes, and compaction's moves where a request finds none. So the search
// plans at `placements` limits - the limit, then each 3% of it lower - and
// each plan is placed as the run places it (Plan() with the plans given:
// the options' allocator and compaction) and timed on the planner's
// profile; the fastest that fits the device budget is the plan. A plan
// placed with no compaction ends the sweep: a lower limit only adds
// transfers. Where the fastest is not at the limit, the limit between it
// and the next higher one (which did not fit, or placed slower) is halved
// kRefinements times, towards the higher half wherever the midpoint's plan
// fits and is faster. None fits: the plan at the limit, whose run reports
// where it does not.
constexpr double kPlacementStep = 0.03;
constexpr int kRefinements = 3;

// One limit's plan, placed (or not: a single placement asked for).
struct Placement {
  size_t limit = 0;
  PhasePlans plans;
  bool fits = false;
  bool compacted = false;
  double seconds = 0;
};

StatusOr<Placement> PlanAt(const NetworkView& view, const MemoryOptions& options, EvalModel& model,
                           const PlannerSettings& settings, size_t limit, bool place) {
  PlanRules rules(model, limit);
  SPILL_ASSIGN_OR_RETURN(Decisions d,
                         PlanSearch(rules, model, settings.evaluations, settings.seed));
  Placement p;
  p.limit = limit;
  p.plans = ToPhasePlans(model, d);
  if (!place) return p;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan placed, Plan(view, options, p.plans, model.profile));
  p.fits = placed.fits;
  p.compacted = placed.compacted > 0;
  p.seconds = placed.seconds;
  return p;
}

bool Faster(const Placement& a, const Placement* than) {
  return a.fits && (than == nullptr || a.seconds < than->seconds);
}

StatusOr<PhasePlans> PlanAndPlace(const NetworkView& view, const MemoryOptions& options,
                                  EvalModel& model) {
  const PlannerSettings settings = ReadPlannerSettings(options.settings);
  const size_t limit = PlannerLimit(options);
  const bool place = settings.placements > 1;
  std::vector<Placement> swept;
  int best = -1;
  for (int i = 0; i < settings.placements; ++i) {
    const size_t at = static_cast<size_t>(static_cast<double>(limit) * (1 - kPlacementStep * i));
    StatusOr<Placement> p = PlanAt(view, options, model, settings, at, place);
    if (!p.ok()) {
      if (i == 0) return p.status();
      break;  // a lower limit finds no plan either
    }
    swept.push_back(std::move(*p));
    if (!place) break;
    if (Faster(swept.back(), best < 0 ? nullptr : &swept[best])) best = i;
    // Placed without a move: a lower limit only adds transfers.
    if (swept.back().fits && !swept.back().compacted) break;
  }
  if (best <= 0) return std::move(swept[std::max(best, 0)].plans);
  Placement chosen = std::move(swept[best]);
  size_t low = chosen.limit, high = swept[best - 1].limit;
  for (int r = 0; r < kRefinements; ++r) {
    const size_t mid = low + (high - low) / 2;
    StatusOr<Placement> p = PlanAt(view, options, model, settings, mid, place);
    if (p.ok() && Faster(*p, &chosen)) {
      chosen = std::move(*p);
      low = mid;
    } else {
      high = mid;
    }
  }
  return std::move(chosen.plans);
}

const bool kSearch = RegisterScheduler(
    {"search",
     "greedy's plan, improved by descent and annealing over keep, offload and drop to the least "
     "simulated time within memory.planner.limit, at that limit and a few lower ones, each "
     "placed by the run's allocator; the fastest placed plan that fits",
     [](const NetworkView& view, const MemoryOptions& options) {
       return PlanOnModel(view, options,
                          [&](EvalModel& model) { return PlanAndPlace(view, options, model); });
     },
     {PlannerSettingKeys().limit, PlannerSettingKeys().profile, PlannerSettingKeys().evaluations,
      PlannerSettingKeys().seed, PlannerSettingKeys().placements, MinOffloadSetting()}});

}  // namespace
}  // namespace spill
