// deepest: the deepest ResNet that trains under a device budget at a batch
// size (SuperNeurons Table 4). The network is models/resnet_deep.yaml with
// n1 = 6, n2 = 32, n4 = 6 (or what --set n1/n2/n4 gives) and n3 grown, as in
// the paper: depth = 3 * (n1 + n2 + n3 + n4) + 2.
//
//   deepest --device-memory 12GiB --batch 16 [--memory superneurons] [--size 224]
//           [--host-memory 64GiB] [--device cpu|cuda] [--confirm 2]
// --confirm N also trains that deep a network for N steps; where this
// machine lacks the memory for it, the result is printed and the exit code
// is 1.
#include <array>
#include <cstdio>

#include "framework/base/units.h"
#include "tools/common/cli.h"
#include "tools/planning/experiments.h"

namespace spill {
namespace {

// About 10 layers per unit: the largest search stays under kMaxLayers.
constexpr int64_t kUnitsLimit = 1 << 14;
constexpr char kDescription[] =
    "The deepest ResNet (n1 = 6, n2 = 32, n4 = 6, n3 grown; depth = 3 * units + 2) whose\n"
    "training iteration fits the device budget, found from plans; --confirm N also trains\n"
    "it for N steps (exit code 1 where it cannot: the reason is printed). It also\n"
    "prints the iteration time simulated on --device-profile (k40-pcie3, titanx-pcie3,\n"
    "v100-nvlink2, h100-pcie5, cpu).";

// The paper's fixed stages (n1 = 6, n2 = 32, n4 = 6), or what --set gives
// them; n3 is the one searched, so --set n3 is an error.
StatusOr<std::array<int64_t, 3>> FixedStages(const ParamOverrides& sets) {
  if (sets.count("n3")) {
    return InvalidArgument("--set n3: deepest searches n3; set n1, n2 or n4 instead");
  }
  std::array<int64_t, 3> units = {6, 32, 6};
  const char* names[] = {"n1", "n2", "n4"};
  for (int i = 0; i < 3; ++i) {
    auto it = sets.find(names[i]);
    if (it == sets.end()) continue;
    auto value = it->second.IsScalar() ? ParseInt64(it->second.Scalar())
                                       : StatusOr<int64_t>(InvalidArgument("not a number"));
    if (!value.ok() || *value < 0 || *value > kUnitsLimit) {
      return InvalidArgument(std::string("--set ") + names[i] +
                             ": expected a number of units in [0, " + std::to_string(kUnitsLimit) +
                             "]");
    }
    units[i] = *value;
  }
  return units;
}

int Main(int argc, char** argv) {
  ExperimentOptions o;
  const int stop =
      StartExperiment(argc, argv, "deepest", kDescription, "models/resnet_deep.yaml", &o);
  if (stop >= 0) return stop;
  auto stages = FixedStages(o.sets);
  if (!stages.ok()) return ReportStatus("deepest", stages.status(), 2);
  const auto [n1, n2, n4] = *stages;
  int64_t side = o.size;  // or --set size's
  if (o.sets.count("size") && o.sets.at("size").IsScalar()) {
    auto parsed = ParseInt64(o.sets.at("size").Scalar());
    if (parsed.ok()) side = *parsed;
  }
  auto spec_for = [&](int64_t n3) {
    ParamOverrides params = o.sets;
    params.erase("n1");
    params.erase("n2");
    params.erase("n4");
    params.emplace("n1", YAML::Node(n1));
    params.emplace("n2", YAML::Node(n2));
    params.emplace("n3", YAML::Node(n3));
    params.emplace("n4", YAML::Node(n4));
    if (!params.count("size")) params.emplace("size", YAML::Node(o.size));
    return LoadNetFile(o.model, params);
  };
  auto probe = [&](int64_t n3) -> StatusOr<Probe> {
    SPILL_ASSIGN_OR_RETURN(NetSpec spec, spec_for(n3));
    return PlanProbe(spec, o.batch, o);
  };
  int probes = 0;
  auto n3 = LargestFitting(1, kUnitsLimit, probe, &probes);
  if (!n3.ok()) {
    std::fprintf(stderr, "deepest: %s\n", n3.status().message().c_str());
    return 1;
  }
  if (*n3 < 1) {
    std::printf("not even n3 = 1 fits under %s at batch %ld\n", o.Describe().c_str(),
                static_cast<long>(o.batch));
    return 1;
  }
  auto best = probe(*n3);
  if (!best.ok()) return ReportStatus("deepest", best.status());
  std::printf(
      "deepest ResNet under %s, batch %ld, %ldx%ld: depth %ld (n3 = %ld, %ld residual units); "
      "peak %s, %s to host, %ld recomputations per iteration, %s in host memory%s (%d plans)\n",
      o.Describe().c_str(), static_cast<long>(o.batch), static_cast<long>(side),
      static_cast<long>(side), static_cast<long>(3 * (n1 + n2 + *n3 + n4) + 2),
      static_cast<long>(*n3), static_cast<long>(n1 + n2 + *n3 + n4),
      FormatBytes(static_cast<double>(best->plan.peak)).c_str(),
      FormatBytes(static_cast<double>(best->plan.log.to_host)).c_str(),
      static_cast<long>(best->plan.recomputations),
      FormatBytes(static_cast<double>(best->plan.log.host_peak)).c_str(),
      o.memory.host_tier == "ram" ? "" : " (on disk)", probes);
  if (!best->leaner.empty()) std::printf("%s\n", best->leaner.c_str());
  o.Use(*best);
  auto spec = spec_for(*n3);
  // Predict and train with the scheduler's share the search settled on.
  if (!o.searched_share.empty()) {
    if (Status set = o.memory.settings.Set(o.searched_share, best->share); !set.ok()) {
      return ReportStatus("deepest", set);
    }
  }
  if (!spec.ok() || ReportPrediction(*spec, o.batch, o) != 0) return 1;
  if (o.confirm == 0) return 0;
  const std::string found = "depth " + std::to_string(3 * (n1 + n2 + *n3 + n4) + 2) + " at batch " +
                            std::to_string(o.batch);
  return ReportConfirmation(ConfirmByTraining(*spec, o.batch, o, best->plan), o.confirm, found);
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("deepest", [&] { return spill::Main(argc, argv); });
}
