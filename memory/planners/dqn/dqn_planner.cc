#include "memory/planners/dqn/dqn_planner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "framework/base/logging.h"
#include "framework/base/units.h"
#include "memory/memory_options.h"
#include "memory/mobility.h"
#include "memory/planners/baselines.h"
#include "memory/planners/dqn/learner.h"
#include "memory/planners/rules.h"
#include "memory/scheduler_registry.h"
#include "memory/sim/cost_model.h"
#include "memory/transfer_plan.h"

namespace spill {
namespace {

constexpr char kPlanHeader[] = "spill-dqn-plan 2";

uint64_t Fnv1a(const std::string& text, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Everything the plan depends on, as one line.
StatusOr<std::string> CacheKey(const NetworkView& view, const MemoryOptions& options,
                               const EvalModel& model, size_t limit) {
  const PlannerSettings planner = ReadPlannerSettings(options.settings);
  std::string key = "network=" + NetworkSignature(view) + " batch=" + std::to_string(view.batch) +
                    " persistent=" + std::to_string(model.persistent) +
                    " limit=" + std::to_string(limit) + " " + planner.Key() +
                    " min_offload=" + std::to_string(options.settings.Bytes(MinOffloadSetting())) +
                    " params=" + options.params.ToString() +
                    " update=" + (options.update_on_host ? "host" : "device") +
                    " workspace=" + options.workspace.ToString();
  if (!planner.model.empty()) {
    std::ifstream in(planner.model, std::ios::binary);
    if (!in) return NotFound("memory.planner.model: cannot read '" + planner.model + "'");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    key += " model_bytes=" + Hex(Fnv1a(bytes.str()));
  }
  return key;
}

std::string PlanText(const std::string& key, const DqnPlan& p) {
  std::ostringstream out;
  out.precision(17);
  out << kPlanHeader << "\nkey " << key << "\n";
  out << "result " << p.feasible << " " << p.seconds << " " << p.peak << " " << p.episodes << " "
      << p.best_episode << " " << p.updates << " " << p.train_seconds << "\n";
  out << "curve " << p.curve.size();
  for (double c : p.curve) out << " " << c;
  auto decided = [](const TensorDecision& d) {
    return d.choice != TensorChoice::kKeep || d.late != 0;
  };
  const auto moved = std::count_if(p.decisions.begin(), p.decisions.end(), decided);
  out << "\ndecisions " << p.decisions.size() << " " << moved << "\n";
  for (TensorId t = 0; t < static_cast<TensorId>(p.decisions.size()); ++t) {
    const TensorDecision& d = p.decisions[t];
    if (!decided(d)) continue;
    out << t << " " << static_cast<int>(d.choice) << " " << d.out << " " << d.in << " "
        << d.again_out << " " << d.again_in << " " << static_cast<int>(d.late) << "\n";
  }
  return out.str();
}

// A cached plan, or false when the file is absent, stale or unreadable.
bool ReadPlan(const std::string& path, const std::string& key, const EvalModel& model, DqnPlan* p) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line, word;
  if (!std::getline(in, line) || line != kPlanHeader) return false;
  if (!std::getline(in, line) || line != "key " + key) return false;
  size_t curve = 0, tensors = 0, moved = 0;
  if (!(in >> word >> p->feasible >> p->seconds >> p->peak >> p->episodes >> p->best_episode >>
        p->updates >> p->train_seconds) ||
      word != "result" || !(in >> word >> curve) || word != "curve") {
    return false;
  }
  p->curve.resize(curve);
  for (double& c : p->curve) {
    if (!(in >> c)) return false;
  }
  if (!(in >> word >> tensors >> moved) || word != "decisions" ||
      tensors != model.schedule->tensors.size()) {
    return false;
  }
  p->decisions = KeepAll(model);
  for (size_t i = 0; i < moved; ++i) {
    int t = -1, choice = 0, late = 0;
    TensorDecision d;
    if (!(in >> t >> choice >> d.out >> d.in >> d.again_out >> d.again_in >> late) || t < 0 ||
        t >= static_cast<int>(tensors) || choice < 0 || choice > 2 || late < 0 || late > 3) {
      return false;
    }
    d.choice = static_cast<TensorChoice>(choice);
    d.late = static_cast<uint8_t>(late);
    p->decisions[t] = d;
  }
  return CheckDecisions(model, p->decisions).empty();
}

// The settings the dqn planner reads.
std::vector<SettingSpec> DqnSettingKeys() {
  const PlannerKeys& k = PlannerSettingKeys();
  return {k.limit,          k.episodes, k.seed,  k.embedding,        k.gamma, k.lr, k.profile,
          k.demonstrations, k.model,    k.cache, MinOffloadSetting()};
}

std::mutex cache_mutex;
std::map<std::string, DqnPlan>& Cache() {
  static auto* cache = new std::map<std::string, DqnPlan>();
  return *cache;
}

StatusOr<DqnPlan> Train(const EvalModel& model, size_t limit, const MemoryOptions& options,
                        const std::string& file_base) {
  std::unique_ptr<QNetwork> net;
  std::unique_ptr<OpGraph> graph;
  const PlannerSettings planner = ReadPlannerSettings(options.settings);
  std::optional<Decisions> demonstration;
  if (planner.demonstrations == "greedy") {
    // Greedy's plan, or, where it finds none, no demonstration.
    PlanRules rules(model, limit);
    StatusOr<Decisions> greedy = PlanGreedy(rules);
    if (greedy.ok()) demonstration = std::move(*greedy);
  }
  SPILL_ASSIGN_OR_RETURN(DqnTraining t, TrainDqn(model, limit, planner, planner.model, &net, &graph,
                                                 demonstration ? &*demonstration : nullptr));
  DqnPlan p;
  p.decisions = std::move(t.decisions);
  p.feasible = t.feasible;
  p.seconds = t.seconds;
  p.peak = t.peak;
  p.episodes = t.episodes;
  p.best_episode = t.best_episode;
  p.updates = t.updates;
  p.train_seconds = t.train_seconds;
  p.curve = std::move(t.curve);
  p.nodes = graph->num_nodes;
  if (!file_base.empty()) {
    p.weights_file = file_base + ".weights";
    Status saved = net->Save(p.weights_file);
    if (!saved.ok()) {
      SPILL_LOG_WARNING(kMemory) << "memory.planner.cache: " << saved.message();
      p.weights_file.clear();
    }
  }
  return p;
}

}  // namespace

StatusOr<DqnPlan> PlanDqn(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
  const size_t limit = PlannerLimit(options);
  const std::string cache_dir = ReadPlannerSettings(options.settings).cache;
  SPILL_ASSIGN_OR_RETURN(std::string key, CacheKey(view, options, model, limit));
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto found = Cache().find(key);
  // A plan trained in this process without a cache folder has no files to
  // give where one is asked for now: it is trained again (to the same plan).
  if (found != Cache().end() && (cache_dir.empty() || !found->second.weights_file.empty())) {
    DqnPlan p = found->second;
    p.from_cache = true;
    return p;
  }
  std::string base;
  DqnPlan p;
  if (!cache_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(cache_dir, error);
    if (error) {
      return InvalidArgument("memory.planner.cache: cannot create '" + cache_dir +
                             "': " + error.message());
    }
    base = cache_dir + "/dqn-" + Hex(Fnv1a(key));
    if (ReadPlan(base + ".plan", key, model, &p)) {
      p.from_cache = true;
      if (std::filesystem::exists(base + ".weights")) p.weights_file = base + ".weights";
    }
  }
  if (!p.from_cache) {
    SPILL_ASSIGN_OR_RETURN(p, Train(model, limit, options, base));
    if (!base.empty()) {
      std::ofstream out(base + ".plan", std::ios::trunc);
      out << PlanText(key, p);
      if (!out) {
        SPILL_LOG_WARNING(kMemory) << "memory.planner.cache: cannot write " << base << ".plan";
      }
    }
  }
  p.limit = limit;
  p.candidates = static_cast<int>(model.candidates.size());
  Cache()[key] = p;
  return p;
}

namespace {

// What `plan` prints of the search before the plan: the limit, the moves,
// the predicted peak and time, and how the network was trained.
StatusOr<SearchReport> ReportDqn(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(DqnPlan p, PlanDqn(view, options));
  int offloaded = 0, dropped = 0;
  for (const TensorDecision& d : p.decisions) {
    offloaded += d.choice == TensorChoice::kOffload;
    dropped += d.choice == TensorChoice::kDrop;
  }
  const std::string profile = ReadPlannerSettings(options.settings).profile;
  auto bytes = [](size_t b) { return FormatBytes(static_cast<double>(b)); };
  SearchReport report;
  report.json = nlohmann::ordered_json{{"limit_bytes", p.limit},
                                       {"feasible", p.feasible},
                                       {"predicted_peak_bytes", p.peak},
                                       {"predicted_seconds", p.seconds},
                                       {"profile", profile},
                                       {"candidates", p.candidates},
                                       {"offloaded", offloaded},
                                       {"dropped", dropped},
                                       {"episodes", p.episodes},
                                       {"best_episode", p.best_episode},
                                       {"updates", p.updates},
                                       {"train_seconds", p.train_seconds},
                                       {"from_cache", p.from_cache},
                                       {"weights", p.weights_file}};
  char line[512];
  std::snprintf(line, sizeof(line),
                "dqn planner: limit %s; %s %d of %d candidates offloaded, %d dropped; predicted "
                "peak %s, %.3f ms per iteration on %s; %d episodes (best at %d), %d updates, "
                "trained in %.1f s%s\n",
                bytes(p.limit).c_str(), p.feasible ? "fits:" : "NO PLAN FITS:", offloaded,
                p.candidates, dropped, bytes(p.peak).c_str(), p.seconds * 1e3, profile.c_str(),
                p.episodes, p.best_episode, p.updates, p.train_seconds,
                p.from_cache ? " (read from the cache)" : "");
  report.text = line;
  if (!p.weights_file.empty()) report.text += "  weights: " + p.weights_file + "\n";
  return report;
}

StatusOr<PhasePlans> DqnPlans(const NetworkView& view, const MemoryOptions& options) {
  SPILL_ASSIGN_OR_RETURN(DqnPlan plan, PlanDqn(view, options));
  SPILL_ASSIGN_OR_RETURN(EvalModel model, PlannerModel(view, options));
  if (!plan.feasible) {
    return NoPlanWithin("dqn", model, plan.limit, plan.peak,
                        Joined("after " + std::to_string(plan.episodes) + " episodes",
                               BelowMinimumAtPeak(model, plan.decisions)));
  }
  return ToPhasePlans(model, plan.decisions);
}

const bool kDqn = RegisterScheduler(
    {"dqn",
     "a deep Q-network over the iteration's graph decides, tensor by tensor, what to offload or "
     "drop under memory.planner.limit; trained on the simulator, cached",
     [](const NetworkView& view, const MemoryOptions& options) -> StatusOr<PhasePlans> {
       return PlanWidening(view, options,
                           [&view](const MemoryOptions& o) { return DqnPlans(view, o); });
     },
     DqnSettingKeys(), ReportDqn});

}  // namespace
}  // namespace spill
