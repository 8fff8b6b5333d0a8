#include "memory/planners/planner_settings.h"

#include <cmath>
#include <cstdio>

namespace spill {

std::string PlannerSettings::Key() const {
  char text[256];
  std::snprintf(text, sizeof(text), "episodes=%d seed=%llu embedding=%d gamma=%.17g lr=%.17g",
                episodes, static_cast<unsigned long long>(seed), embedding, gamma, lr);
  return std::string(text) + " profile=" + profile + " model=" + model;
}

Status PlannerSettings::Validate() const {
  auto range = [](const char* key, const std::string& got, const std::string& expected) {
    return InvalidArgument("memory.planner." + std::string(key) + " must be " + expected +
                           " (got " + got + ")");
  };
  if (episodes < 1 || episodes > kMaxPlannerEpisodes) {
    return range("episodes", std::to_string(episodes),
                 "in [1, " + std::to_string(kMaxPlannerEpisodes) + "]");
  }
  if (embedding < kMinEmbedding || embedding > kMaxEmbedding) {
    return range(
        "embedding", std::to_string(embedding),
        "in [" + std::to_string(kMinEmbedding) + ", " + std::to_string(kMaxEmbedding) + "]");
  }
  if (!(gamma >= 0 && gamma <= 1)) return range("gamma", std::to_string(gamma), "in [0, 1]");
  if (!(lr > 0 && lr <= kMaxPlannerLearningRate)) {
    return range("lr", std::to_string(lr), "in (0, 1]");
  }
  if (segment < 0 || segment > kMaxSegment) {
    return range(
        "segment", std::to_string(segment),
        "0 (the square root of the layers) or a count in [1, " + std::to_string(kMaxSegment) + "]");
  }
  if (!(milp_seconds > 0 && milp_seconds <= kMaxMilpSeconds)) {
    return range("milp_seconds", std::to_string(milp_seconds), "positive, at most a week");
  }
  if (profile.empty()) return range("profile", "''", "a device profile name");
  return Status::Ok();
}

}  // namespace spill
