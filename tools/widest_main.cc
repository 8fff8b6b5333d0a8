// widest: the largest batch a network trains at under a device budget
// (SuperNeurons Table 5).
//
//   widest --config models/resnet50.yaml --device-memory 12GiB [--memory superneurons]
//          [--set size=224] [--host-memory 64GiB] [--device cpu|cuda] [--confirm 2]
//          [--allocator va --va-chunk 2MiB] [--compact false] [--window-budget search]
//          [--chunk auto]   (steps that do not fit stream through host memory)
#include <cstdio>

#include "memory/scheduler_registry.h"
#include "tools/common/cli.h"
#include "tools/planning/experiments.h"

namespace spill {
namespace {

constexpr int64_t kBatchLimit = 1 << 20;
constexpr char kDescription[] =
    "The largest batch whose training iteration fits the device budget, found from\n"
    "plans; --confirm N also trains it for N steps (exit code 1 where it cannot: the reason\n"
    "is printed). It also\n"
    "prints the iteration time simulated on --device-profile (k40-pcie3, titanx-pcie3,\n"
    "v100-nvlink2, h100-pcie5, cpu).";

int Main(int argc, char** argv) {
  ExperimentOptions o;
  const int stop = StartExperiment(argc, argv, "widest", kDescription, "", &o);
  if (stop >= 0) return stop;
  auto spec = LoadNetFile(o.model, o.sets);
  if (!spec.ok()) {
    std::fprintf(stderr, "widest: %s\n", spec.status().message().c_str());
    return 1;
  }
  auto probe = [&](int64_t batch) { return PlanProbe(*spec, batch, o); };
  int probes = 0;
  auto batch = LargestFitting(1, kBatchLimit, probe, &probes);
  if (!batch.ok()) {
    std::fprintf(stderr, "widest: %s\n", batch.status().message().c_str());
    return 1;
  }
  if (*batch < 1) {
    std::printf("%s does not fit under %s even at batch 1\n", spec->name.c_str(),
                o.Describe().c_str());
    return 1;
  }
  auto best = probe(*batch);
  if (!best.ok()) return ReportStatus("widest", best.status());
  std::printf(
      "largest batch of %s under %s: %ld; peak %s, %s to host, %ld recomputations per iteration "
      "(%d plans)\n",
      spec->name.c_str(), o.Describe().c_str(), static_cast<long>(*batch),
      FormatBytes(static_cast<double>(best->plan.peak)).c_str(),
      FormatBytes(static_cast<double>(best->plan.log.to_host)).c_str(),
      static_cast<long>(best->plan.recomputations), probes);
  std::printf("footprint %s (max load %s)",
              FormatBytes(static_cast<double>(best->plan.footprint)).c_str(),
              FormatBytes(static_cast<double>(best->plan.peak)).c_str());
  const std::vector<SettingSpec> shares = SearchableSettings(o.memory.scheduler);
  if (!shares.empty()) {
    std::printf("; the %s scheduler's %s %s", o.memory.scheduler.c_str(),
                shares.front().key.c_str(), best->share.c_str());
  }
  std::printf("\n");
  if (!best->leaner.empty()) std::printf("%s\n", best->leaner.c_str());
  o.Use(*best);
  // Predict and train with the scheduler's share the search settled on.
  if (!o.searched_share.empty()) {
    if (Status set = o.memory.settings.Set(o.searched_share, best->share); !set.ok()) {
      return ReportStatus("widest", set);
    }
  }
  if (ReportPrediction(*spec, *batch, o) != 0) return 1;
  if (o.confirm == 0) return 0;
  const std::string found = spec->name + " at batch " + std::to_string(*batch);
  return ReportConfirmation(ConfirmByTraining(*spec, *batch, o, best->plan), o.confirm, found);
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("widest", [&] { return spill::Main(argc, argv); });
}
