// The settings of the planners that search over plans (memory/planners/):
// `memory.planner: {limit, episodes, seed, embedding, gamma, lr, profile,
// demonstrations, model, cache, segment, milp_seconds, evaluations, placements}` in YAML,
// --planner-* flags in the tools. Their keys are declared once here (PlannerSettingKeys) and each
// planner lists those it reads at its registration, so the YAML reader, the flags, the checks and
// --help come from the settings schema (memory/settings.h); PlannerSettings is the typed view a
// planner reads.
//
//   limit       the most device bytes the plan may use (parameters and
//               workspaces included, the `ideal` allocator's accounting);
//               0: the device budget               (greedy, search, dqn, milp)
//   episodes    dqn: training episodes (ε-greedy, P(random) = 1 - e/l)
//   seed        dqn: the seed of exploration, replay sampling and weights
//   embedding   dqn: p, the width of the structure2vec node embeddings
//   gamma       dqn: the decay of future rewards (1: the return is -overhead)
//   lr          dqn: Adam's learning rate
//   profile     the device profile times are simulated on (greedy, search,
//               dqn, milp)
//   demonstrations  dqn: `greedy` learns from the greedy planner's plan first
//               (its transitions stay in the replay buffer, and exploration
//               follows the best plan so far half of the time: deep
//               Q-learning from demonstrations); `none` learns from
//               scratch, as the paper does
//   model       dqn: weights to start from (a file a training wrote); with
//               episodes 1, the model is applied as it is (one greedy
//               episode, no update)
//   cache       dqn: a directory for trained plans and weights, keyed by the
//               network, the limit and these settings ("": in memory only)
//   segment     memonger: layers per segment on the route (0: ceil(sqrt(N)))
//   milp_seconds  milp: CBC's time limit per solve (the bound's, the plan's)
//   evaluations search: plans the local search evaluates after its seeds
//   placements  search: the limits it plans at - the limit, then each 3% of
//               it lower - each plan placed as the run places it (its
//               allocator, compaction included) and timed so; the fastest
//               that fits the device budget is the plan, and the step above
//               it is halved three times for a faster one (1: the limit
//               alone, not placed)
#ifndef SPILL_MEMORY_PLANNERS_PLANNER_SETTINGS_H_
#define SPILL_MEMORY_PLANNERS_PLANNER_SETTINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "memory/settings.h"

namespace spill {

constexpr int kMaxPlannerEpisodes = 1000000;
constexpr int kMinEmbedding = 2, kMaxEmbedding = 512;
constexpr int kMaxSegment = 1 << 20;
constexpr double kMaxPlannerLearningRate = 1.0;
constexpr double kMaxMilpSeconds = 7 * 24 * 3600.0;  // a week
constexpr int kMaxSearchEvaluations = 100000000;
constexpr int kMaxSearchPlacements = 20;

struct PlannerSettings {
  size_t limit = 0;
  int episodes = 300;
  uint64_t seed = 1;
  int embedding = 32;
  double gamma = 1.0;
  double lr = 1e-3;
  std::string profile = "gtx1080ti-pcie3";
  std::string demonstrations = "none";
  std::string model;
  std::string cache;
  int segment = 0;
  double milp_seconds = 600;
  int evaluations = 20000;
  int placements = 6;

  // The limit a plan is made for under `device_budget`.
  size_t LimitUnder(size_t device_budget) const { return limit > 0 ? limit : device_budget; }
  // Every setting that changes what the dqn planner learns, as text (the
  // cache key's).
  std::string Key() const;
};

// The keys of memory.planner (the flag of planner.milp_seconds is
// --planner-milp-seconds), with their defaults and ranges.
struct PlannerKeys {
  SettingSpec limit, episodes, seed, embedding, gamma, lr, profile, demonstrations, model, cache,
      segment, milp_seconds, evaluations, placements;
};
const PlannerKeys& PlannerSettingKeys();

// The planners' settings as given in `settings`, or their defaults.
PlannerSettings ReadPlannerSettings(const PolicySettings& settings);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_PLANNER_SETTINGS_H_
