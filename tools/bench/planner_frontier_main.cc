// planner_frontier: every planner's overhead against its memory reduction,
// relative to liveness (the axes of the DQN planner paper's Fig. 5), on one
// network, as JSON, an SVG plot and a Markdown table.
//
//   bazel-bin/tools/bench/planner_frontier --config models/resnet50.yaml --batch 32
//       --json r50.json --svg r50.svg [--milp] [--cache ~/.cache/spill/planner]
//
// Every point is a plan made by the runtime without a device (Plan()) under
// the `ideal` allocator - the planners plan memory, not placement - with each
// step's fastest algorithms (workspace: fastest unless --workspace says
// otherwise; convolution times from the model), and timed by the timeline simulator on a device
// profile (gtx1080ti-pcie3 by default: the paper's card; a simulation, not a measurement). Planners
// that search (dqn, greedy, milp) get limits evenly spaced from the lowest peak any of their moves
// reaches (greedy's floor, or every tensor offloaded or dropped) up to liveness's peak; the others
// their own knobs: memonger's segment length, lms's count of swapped tensors (as TFLMS's
// n_tensors), SuperNeurons' offload, recompute and both; window is planned under each limit as its
// device budget; vdnn and dymem, which take no limit, are one point each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "framework/base/files.h"
#include "framework/base/units.h"
#include "framework/graph/net.h"
#include "framework/graph/net_checks.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/planners/dqn/dqn_planner.h"
#include "memory/planners/milp.h"
#include "memory/planning/planner.h"
#include "memory/sim/timeline.h"
#include "tools/bench/frontier_svg.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

constexpr double kFloorResolution = 0.005;  // greedy's floor, relative to liveness's peak
constexpr int kMaxLimits = 50;
constexpr int kMemongerSegments[] = {2, 3, 4, 6, 8, 12, 16, 24, 32};
constexpr int kMaxLmsCount = 1 << 12;
constexpr char kAllPlanners[] = "dqn,greedy,memonger,lms,superneurons,vdnn,dymem,window";

struct Args {
  std::string config, profile = "gtx1080ti-pcie3", planners = kAllPlanners;
  std::string json, svg, cache, model;
  WorkspacePolicy workspace;  // --workspace
  int64_t batch = 32, limits = 5, episodes = 300, embedding = 32, seed = 1;
  double milp_seconds = 600;
  bool milp = false;
  size_t min_offload = *ParseBytes(MinOffloadSetting().fallback);
  size_t at = 0;  // --at: one more limit (0: none)
  ParamOverrides sets;
};

struct Point {
  std::string planner, setting;
  size_t limit = 0;  // 0: the planner's own knob
  bool fits = false;
  std::string failure;
  size_t peak = 0;
  double seconds = 0;
  double plan_seconds = 0;  // wall time to train or solve and plan
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// Which layers' forwards the plan reruns, counted by type: where a planner
// rebuilds (attention's core alone is Megatron's selective recompute).
nlohmann::ordered_json RecomputedLayersOf(const Net& net, const MemoryPlan& plan) {
  std::map<std::string, int64_t> counts;
  for (const MemoryEvent& e : plan.events) {
    if (e.type == MemoryEventType::kRecompute && e.layer >= 0) ++counts[net.layer(e.layer).type()];
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [type, count] : counts) out[type] = count;
  return out;
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class Frontier {
 public:
  Frontier(const Args& args, const Net& net, const DeviceProfile& profile)
      : args_(args), net_(net), view_(net.view()), profile_(profile) {}

  Status Run();
  const std::vector<Point>& points() const { return points_; }
  size_t liveness_peak() const { return liveness_.peak; }
  double liveness_seconds() const { return liveness_.seconds; }
  size_t floor() const { return floor_; }

 private:
  MemoryOptions Options(const std::string& mode) const {
    MemoryOptions o;
    SPILL_CHECK(ApplyMemoryMode(mode, &o).ok());
    o.allocator = "ideal";
    o.device_budget = kUnlimitedBudget;
    o.workspace = args_.workspace;
    o.record_events = true;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.17g", args_.milp_seconds);
    for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
             {"min_offload", std::to_string(args_.min_offload)},
             {"planner.profile", args_.profile},
             {"planner.episodes", std::to_string(args_.episodes)},
             {"planner.embedding", std::to_string(args_.embedding)},
             {"planner.seed", std::to_string(args_.seed)},
             {"planner.cache", args_.cache},
             {"planner.model", args_.model},
             {"planner.milp_seconds", seconds}}) {
      Set(&o, key, value);
    }
    return o;
  }
  // Sets a policy setting the flags checked already.
  static void Set(MemoryOptions* o, const std::string& key, const std::string& value) {
    const Status set = o->settings.Set(key, value);
    SPILL_CHECK(set.ok()) << set.ToString();
  }
  nlohmann::ordered_json RecomputedLayers(const MemoryPlan& plan) const {
    return RecomputedLayersOf(net_, plan);
  }
  // Plans and simulates; the point's wall time counts from `start`.
  Point Measure(const std::string& planner, const std::string& setting, size_t limit,
                const MemoryOptions& options, std::chrono::steady_clock::time_point start);
  Status FindFloor();
  Status MeasureDqn(const std::string& name, const std::string& demonstrations,
                    const std::string& setting, size_t limit);
  Status RunLimits();
  void RunKnobs();
  bool Wants(const std::string& planner) const {
    return ("," + args_.planners + ",").find("," + planner + ",") != std::string::npos;
  }

  const Args& args_;
  const Net& net_;
  const NetworkView view_;
  const DeviceProfile profile_;
  Point liveness_;
  size_t floor_ = 0;
  std::vector<Point> points_;
};

Point Frontier::Measure(const std::string& planner, const std::string& setting, size_t limit,
                        const MemoryOptions& options, std::chrono::steady_clock::time_point start) {
  Point p;
  p.planner = planner;
  p.setting = setting;
  p.limit = limit;
  auto plan = Plan(view_, options);
  p.plan_seconds = Since(start);
  if (!plan.ok() || !plan->fits) {
    p.failure = plan.ok() ? plan->failure : plan.status().message();
    return p;
  }
  const IterationCosts costs = ModelCosts(view_, plan->log, profile_, nullptr);
  const Timeline timeline = SimulateIteration(view_, plan->events, costs, profile_,
                                              BaseDeviceBytes(plan->log, plan->events));
  p.fits = true;
  p.peak = plan->peak;
  p.seconds = timeline.seconds;
  p.extra["to_host_bytes"] = plan->log.to_host;
  p.extra["recomputations"] = plan->recomputations;
  p.extra["recomputed_layers"] = RecomputedLayers(*plan);
  return p;
}

// The lowest limit to try: greedy's floor (bisection) or the peak of every
// candidate offloaded, or every one dropped where it can be, if lower.
Status Frontier::FindFloor() {
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view_, Options("greedy")));
  PlanRules frugal(model, 0);
  Choices offload(model.schedule->tensors.size(), TensorChoice::kKeep), drop = offload;
  for (TensorId t : model.candidates) {
    offload[t] = model.offloadable[t] ? TensorChoice::kOffload : TensorChoice::kDrop;
    drop[t] = model.droppable[t] ? TensorChoice::kDrop : TensorChoice::kOffload;
  }
  floor_ = std::min(frugal.Evaluate(offload).peak, frugal.Evaluate(drop).peak);
  size_t lo = model.persistent, hi = model.base_peak;
  const size_t resolution = static_cast<size_t>(kFloorResolution * model.base_peak);
  while (hi - lo > resolution) {
    const size_t mid = lo + (hi - lo) / 2;
    PlanRules rules(model, mid);
    (PlanGreedy(rules).ok() ? hi : lo) = mid;
  }
  floor_ = std::min(floor_, hi);
  return Status::Ok();
}

// The dqn planner trained under `limit`, learning from `demonstrations`.
Status Frontier::MeasureDqn(const std::string& name, const std::string& demonstrations,
                            const std::string& setting, size_t limit) {
  MemoryOptions o = Options("dqn");
  o.device_budget = limit;
  Set(&o, "planner.demonstrations", demonstrations);
  const auto start = std::chrono::steady_clock::now();
  SPILL_ASSIGN_OR_RETURN(DqnPlan trained, PlanDqn(view_, o));
  Point p = Measure(name, setting, limit, o, start);
  p.extra["episodes"] = trained.episodes;
  p.extra["best_episode"] = trained.best_episode;
  p.extra["train_seconds"] = trained.train_seconds;
  p.extra["predicted_seconds"] = trained.seconds;
  points_.push_back(std::move(p));
  return Status::Ok();
}

Status Frontier::RunLimits() {
  const size_t top = liveness_.peak;
  std::vector<size_t> limits;
  for (int i = 0; i < args_.limits; ++i)
    limits.push_back(floor_ + (top - floor_) * i / args_.limits);
  if (args_.at > 0) {
    limits.insert(std::upper_bound(limits.begin(), limits.end(), args_.at), args_.at);
  }
  for (size_t limit : limits) {
    const std::string setting = FormatBytes(static_cast<double>(limit));
    std::fprintf(stderr, "limit %s\n", setting.c_str());
    if (Wants("greedy")) {
      MemoryOptions o = Options("greedy");
      o.device_budget = limit;
      points_.push_back(Measure("greedy", setting, limit, o, std::chrono::steady_clock::now()));
    }
    if (Wants("window")) {
      MemoryOptions o = Options("window");
      o.device_budget = limit;
      points_.push_back(Measure("window", setting, limit, o, std::chrono::steady_clock::now()));
    }
    if (Wants("dqn")) SPILL_RETURN_IF_ERROR(MeasureDqn("dqn", "none", setting, limit));
    if (Wants("dqn+greedy")) {
      SPILL_RETURN_IF_ERROR(MeasureDqn("dqn+greedy", "greedy", setting, limit));
    }
    if (args_.milp) {
      MemoryOptions o = Options("milp");
      o.device_budget = limit;
      const auto start = std::chrono::steady_clock::now();
      SPILL_ASSIGN_OR_RETURN(MilpResult solved, PlanMilp(view_, o));
      Point p = Measure("milp", setting, limit, o, start);
      p.extra["lower_bound_overhead"] = solved.lower_bound / liveness_.seconds;
      p.extra["program_overhead"] = solved.objective / liveness_.seconds;
      p.extra["optimal"] = solved.optimal;
      p.extra["retimed"] = solved.retimed;
      p.extra["ordered"] = solved.ordered;
      p.extra["kept_start"] = solved.kept_start;
      p.extra["solve_seconds"] = solved.solve_seconds;
      p.extra["columns"] = solved.columns;
      p.extra["rows"] = solved.rows;
      points_.push_back(std::move(p));
    }
  }
  return Status::Ok();
}

void Frontier::RunKnobs() {
  const int layers = net_.num_layers();
  if (Wants("memonger")) {
    MemoryOptions o = Options("memonger");
    points_.push_back(Measure("memonger", "sqrt(N)", 0, o, std::chrono::steady_clock::now()));
    for (int segment : kMemongerSegments) {
      if (segment >= layers) break;
      Set(&o, "planner.segment", std::to_string(segment));
      points_.push_back(Measure("memonger", "segment " + std::to_string(segment), 0, o,
                                std::chrono::steady_clock::now()));
    }
  }
  if (Wants("lms")) {
    MemoryOptions o = Options("lms");
    Point all = Measure("lms", "all", 0, o, std::chrono::steady_clock::now());
    points_.push_back(all);
    for (int count = 1; count < kMaxLmsCount; count *= 2) {
      Set(&o, "lms_count", std::to_string(count));
      Point p = Measure("lms", std::to_string(count) + " tensors", 0, o,
                        std::chrono::steady_clock::now());
      const bool same = p.fits && p.peak == all.peak && p.seconds == all.seconds;
      points_.push_back(std::move(p));
      if (same) break;  // as many as swap at all
    }
  }
  if (Wants("superneurons")) {
    for (const char* mode : {"offload", "recompute", "offload_recompute"}) {
      points_.push_back(
          Measure("superneurons", mode, 0, Options(mode), std::chrono::steady_clock::now()));
    }
  }
  for (const char* mode : {"vdnn", "dymem"}) {
    if (Wants(mode)) {
      points_.push_back(Measure(mode, "", 0, Options(mode), std::chrono::steady_clock::now()));
    }
  }
}

Status Frontier::Run() {
  liveness_ = Measure("liveness", "", 0, Options("liveness"), std::chrono::steady_clock::now());
  if (!liveness_.fits) return Internal("liveness does not plan: " + liveness_.failure);
  SPILL_RETURN_IF_ERROR(FindFloor());
  SPILL_RETURN_IF_ERROR(RunLimits());
  RunKnobs();
  return Status::Ok();
}

nlohmann::ordered_json Json(const Args& args, const Net& net, const Frontier& f) {
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const Point& p : f.points()) {
    nlohmann::ordered_json j = {{"planner", p.planner},
                                {"setting", p.setting},
                                {"limit_bytes", p.limit},
                                {"fits", p.fits},
                                {"plan_seconds", p.plan_seconds}};
    if (p.fits) {
      j["peak_bytes"] = p.peak;
      j["iteration_seconds"] = p.seconds;
      j["reduction"] = 1.0 - static_cast<double>(p.peak) / f.liveness_peak();
      j["overhead"] = p.seconds / f.liveness_seconds() - 1.0;
    } else {
      j["failure"] = p.failure;
    }
    j.update(p.extra);
    points.push_back(j);
  }
  return {{"network", net.name()},
          {"config", args.config},
          {"batch", net.batch()},
          {"profile", args.profile},
          {"liveness",
           {{"peak_bytes", f.liveness_peak()}, {"iteration_seconds", f.liveness_seconds()}}},
          {"floor_bytes", f.floor()},
          {"points", points}};
}

void PrintTable(const Frontier& f) {
  std::printf("| planner | setting | peak | reduction | iteration | overhead | planned in |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::printf("| liveness | | %s | 0%% | %.2f ms | 0%% | |\n",
              FormatBytes(static_cast<double>(f.liveness_peak())).c_str(),
              f.liveness_seconds() * 1e3);
  for (const Point& p : f.points()) {
    if (!p.fits) {
      std::printf("| %s | %s | does not fit | | | | %.1f s |\n", p.planner.c_str(),
                  p.setting.c_str(), p.plan_seconds);
      continue;
    }
    std::printf("| %s | %s | %s | %.1f%% | %.2f ms | %.2f%% | %.1f s |\n", p.planner.c_str(),
                p.setting.c_str(), FormatBytes(static_cast<double>(p.peak)).c_str(),
                100.0 * (1.0 - static_cast<double>(p.peak) / f.liveness_peak()), p.seconds * 1e3,
                100.0 * (p.seconds / f.liveness_seconds() - 1.0), p.plan_seconds);
  }
}

// One series per planner, and the MILP's proven bound at each limit where it
// has a plan: no plan within that limit is below it.
std::vector<FrontierSeries> Series(const Frontier& f) {
  std::vector<FrontierSeries> series;
  auto add = [&](const std::string& name, FrontierPoint point) {
    auto it = std::find_if(series.begin(), series.end(),
                           [&](const FrontierSeries& s) { return s.name == name; });
    if (it == series.end()) it = series.insert(series.end(), FrontierSeries{name, {}});
    it->points.push_back(point);
  };
  for (const Point& p : f.points()) {
    if (!p.fits) continue;
    add(p.planner, {1.0 - static_cast<double>(p.peak) / f.liveness_peak(),
                    p.seconds / f.liveness_seconds() - 1.0});
  }
  // A planner that proves a bound (the MILP) draws it as a series of its own.
  for (const Point& p : f.points()) {
    if (!p.fits || !p.extra.contains("lower_bound_overhead")) continue;
    add(p.planner + " bound", {1.0 - static_cast<double>(p.limit) / f.liveness_peak(),
                               p.extra["lower_bound_overhead"].get<double>()});
  }
  return series;
}

Status Run(const Args& args) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(args.config, args.sets));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                         Net::Build(spec, {args.batch, DeviceType::kCpu}));
  SPILL_ASSIGN_OR_RETURN(auto solver, Solver::Create(SolverConfig()));  // SGD, momentum 0.9
  solver->AddState(*net);
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, FindDeviceProfile(args.profile));
  Frontier frontier(args, *net, profile);
  SPILL_RETURN_IF_ERROR(frontier.Run());
  std::printf("%s, batch %ld, on %s (simulated)\n\n", net->name().c_str(),
              static_cast<long>(net->batch()), args.profile.c_str());
  PrintTable(frontier);
  if (!args.json.empty()) {
    SPILL_RETURN_IF_ERROR(
        WriteTextFile(args.json, Json(args, *net, frontier).dump(2) + "\n", "--json"));
  }
  if (!args.svg.empty()) {
    const std::string title = net->name() + ", batch " + std::to_string(net->batch()) + ", " +
                              args.profile + " (simulated)";
    SPILL_RETURN_IF_ERROR(WriteTextFile(args.svg, FrontierSvg(Series(frontier), title), "--svg"));
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags f("planner_frontier",
          "Every planner's simulated overhead against its memory reduction relative to liveness.");
  Args a;
  f.InputFile("--config", &a.config, "a network file (models/*.yaml)")->required();
  f.Int("--batch", &a.batch, "batch size (default 32)", 1, kMaxBatch);
  f.Set(&a.sets);
  std::vector<std::string> profiles = DeviceProfileNames();
  profiles.erase(std::remove(profiles.begin(), profiles.end(), "cpu"), profiles.end());
  f.Choice("--profile", &a.profile, "the device profile (default gtx1080ti-pcie3)", profiles);
  f.Int("--limits", &a.limits, "limits for the planners that search (default 5)", 1, kMaxLimits);
  f.String("--planners", &a.planners,
           std::string("which planners, comma-separated (default ") + kAllPlanners +
               "; also dqn+greedy: the dqn planner learning from greedy's plan first)");
  f.Int("--episodes", &a.episodes, "dqn: training episodes (default 300)", 1, kMaxPlannerEpisodes);
  f.Int("--embedding", &a.embedding, "dqn: embedding width (default 32)", kMinEmbedding,
        kMaxEmbedding);
  f.Int("--seed", &a.seed, "dqn: seed (default 1)", 0, std::numeric_limits<int64_t>::max());
  f.String("--cache", &a.cache, "dqn: a directory for trained plans and weights");
  f.InputFile("--model", &a.model, "dqn: start from these weights");
  f.Bytes("--at", &a.at, "one more limit for the planners that search (a peak to compare with)", 0,
          std::numeric_limits<size_t>::max());
  f.Flag("--milp", &a.milp, "also solve the MILP at every limit (its bound and its plan)");
  f.Float("--milp-seconds", &a.milp_seconds, "CBC's time limit per solve (default 600)", 1,
          kMaxMilpSeconds);
  f.Bytes("--min-offload", &a.min_offload, "candidates' smallest size (default 1MiB)", 0,
          kUnlimitedBudget);
  std::string workspace = "fastest";
  f.String("--workspace", &workspace,
           "the workspace policy, as memory.workspace (default fastest: each step's fastest "
           "algorithm)");
  f.OutputFile("--json", &a.json, "write every point as JSON");
  f.OutputFile("--svg", &a.svg, "plot the frontiers");
  const int stop = f.Parse(argc, argv);
  if (stop >= 0) return stop;
  auto policy = ParseWorkspacePolicy(workspace);
  if (!policy.ok()) {
    return ReportStatus("planner_frontier",
                        InvalidArgument("--workspace: " + policy.status().message()));
  }
  a.workspace = *policy;
  return ReportStatus("planner_frontier", Run(a));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("planner_frontier", [&] { return spill::Main(argc, argv); });
}
