#include "memory/planners/planner_settings.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>

#include "memory/memory_options.h"
#include "memory/sim/device_profile.h"

namespace spill {

std::string PlannerSettings::Key() const {
  char text[256];
  std::snprintf(text, sizeof(text), "episodes=%d seed=%llu embedding=%d gamma=%.17g lr=%.17g",
                episodes, static_cast<unsigned long long>(seed), embedding, gamma, lr);
  return std::string(text) + " profile=" + profile + " demonstrations=" + demonstrations +
         " model=" + model;
}

namespace {

double Number(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

// A number's range check, naming the key as the YAML reader names it.
std::function<Status(const std::string&)> NumberIn(const std::string& key, double low,
                                                   bool low_open, double high,
                                                   const std::string& expected) {
  return [key, low, low_open, high, expected](const std::string& text) {
    const double value = Number(text);
    if ((low_open ? value > low : value >= low) && value <= high) return Status::Ok();
    return InvalidArgument("memory." + key + " must be " + expected + " (got " + text + ")");
  };
}

SettingSpec Spec(const char* key, SettingKind kind, std::string fallback, std::string help,
                 int64_t min = 0, int64_t max = 0) {
  SettingSpec spec;
  spec.key = key;
  spec.kind = kind;
  spec.fallback = std::move(fallback);
  spec.help = std::move(help);
  spec.min = min;
  spec.max = max;
  return spec;
}

PlannerKeys MakeKeys() {
  const PlannerSettings defaults;
  PlannerKeys k;
  k.limit = Spec("planner.limit", SettingKind::kBytes, "0",
                 "greedy, search, dqn, milp: the most device memory the plan may use (0: the "
                 "device budget)",
                 0, static_cast<int64_t>(kUnlimitedBudget));
  k.episodes = Spec("planner.episodes", SettingKind::kInt, std::to_string(defaults.episodes),
                    "dqn: training episodes", 1, kMaxPlannerEpisodes);
  k.seed =
      Spec("planner.seed", SettingKind::kInt, std::to_string(defaults.seed),
           "dqn: the seed of its exploration and weights", 0, std::numeric_limits<int64_t>::max());
  k.embedding = Spec("planner.embedding", SettingKind::kInt, std::to_string(defaults.embedding),
                     "dqn: node embedding width p", kMinEmbedding, kMaxEmbedding);
  k.gamma = Spec("planner.gamma", SettingKind::kReal, "1", "dqn: reward decay in [0, 1]");
  k.gamma.check = NumberIn("planner.gamma", 0, false, 1, "in [0, 1]");
  k.lr = Spec("planner.lr", SettingKind::kReal, "0.001", "dqn: Adam's learning rate");
  k.lr.check = NumberIn("planner.lr", 0, true, kMaxPlannerLearningRate, "in (0, 1]");
  k.profile = Spec("planner.profile", SettingKind::kText, defaults.profile,
                   "greedy, search, dqn, milp: the device profile plans are timed on");
  k.profile.type_name = "NAME";
  k.profile.check = [](const std::string& text) {
    // 'cpu' is calibrated by the program that runs (PlannerProfile).
    return text == kMeasuredProfile ? Status::Ok() : FindDeviceProfile(text).status();
  };
  k.demonstrations =
      Spec("planner.demonstrations", SettingKind::kChoice, defaults.demonstrations,
           "dqn: learn from the greedy planner's plan first (greedy), or from scratch (none)");
  k.demonstrations.choices = {"none", "greedy"};
  k.model =
      Spec("planner.model", SettingKind::kText, "", "dqn: start from the weights a training saved");
  k.model.type_name = "FILE";
  k.cache = Spec("planner.cache", SettingKind::kText, "",
                 "dqn: keep trained plans and weights in DIR, keyed by network, limit and "
                 "settings");
  k.cache.type_name = "DIR";
  k.segment =
      Spec("planner.segment", SettingKind::kInt, "0",
           "memonger: layers per segment (0: the square root of the layers)", 0, kMaxSegment);
  k.milp_seconds =
      Spec("planner.milp_seconds", SettingKind::kReal, "600",
           "milp: CBC's time limit in seconds, per solve (two: the bound's and the plan's)");
  k.milp_seconds.check =
      NumberIn("planner.milp_seconds", 0, true, kMaxMilpSeconds, "positive, at most a week");
  k.evaluations =
      Spec("planner.evaluations", SettingKind::kInt, std::to_string(defaults.evaluations),
           "search: plans the local search evaluates after its seeds", 0, kMaxSearchEvaluations);
  k.placements =
      Spec("planner.placements", SettingKind::kInt, std::to_string(defaults.placements),
           "search: limits planned at (the limit, then each 3% of it lower), each plan placed by "
           "the run's allocator; the fastest that fits is kept",
           1, kMaxSearchPlacements);
  return k;
}

}  // namespace

const PlannerKeys& PlannerSettingKeys() {
  static const auto* keys = new PlannerKeys(MakeKeys());
  return *keys;
}

PlannerSettings ReadPlannerSettings(const PolicySettings& s) {
  const PlannerKeys& k = PlannerSettingKeys();
  PlannerSettings p;
  p.limit = s.Bytes(k.limit);
  p.episodes = static_cast<int>(s.Int(k.episodes));
  p.seed = static_cast<uint64_t>(s.Int(k.seed));
  p.embedding = static_cast<int>(s.Int(k.embedding));
  p.gamma = s.Real(k.gamma);
  p.lr = s.Real(k.lr);
  p.profile = s.Text(k.profile);
  p.demonstrations = s.Choice(k.demonstrations);
  p.model = s.Text(k.model);
  p.cache = s.Text(k.cache);
  p.segment = static_cast<int>(s.Int(k.segment));
  p.milp_seconds = s.Real(k.milp_seconds);
  p.evaluations = static_cast<int>(s.Int(k.evaluations));
  p.placements = static_cast<int>(s.Int(k.placements));
  return p;
}

}  // namespace spill
