// widest: the largest batch a network trains at under a device budget
// (SuperNeurons Table 5).
//
//   widest --config models/resnet50.yaml --device-memory 12GiB [--memory superneurons]
//          [--set size=224] [--confirm 2]
#include <cstdio>
#include <cstdlib>

#include "framework/units.h"
#include "layers/cpu/conv_timer.h"
#include "tools/experiments.h"

namespace spill {
namespace {

constexpr int64_t kBatchLimit = 1 << 20;

int Main(int argc, char** argv) {
  std::string model, budget = "12GiB", host = "64GiB", mode = "superneurons", workspace = "dynamic";
  ParamOverrides sets;
  int64_t confirm = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--config") model = v;
    else if (a == "--device-memory") budget = v;
    else if (a == "--host-memory") host = v;
    else if (a == "--memory") mode = v;
    else if (a == "--workspace") workspace = v;
    else if (a == "--confirm") confirm = std::atoll(v.c_str());
    else if (a == "--set" && v.find('=') != std::string::npos) {
      sets[v.substr(0, v.find('='))] = YAML::Load(v.substr(v.find('=') + 1));
    } else {
      std::fprintf(stderr, "widest: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "usage: widest --config MODEL.yaml [--device-memory 12GiB] [--memory MODE]\n");
    return 2;
  }
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  MemoryOptions memory;
  Status status = ApplyMemoryMode(mode, &memory);
  auto device_budget = ParseBytes(budget), host_budget = ParseBytes(host);
  auto policy = ParseWorkspacePolicy(workspace);
  if (!status.ok() || !device_budget.ok() || !host_budget.ok() || !policy.ok()) {
    std::fprintf(stderr, "widest: bad --memory, --device-memory, --host-memory or --workspace\n");
    return 2;
  }
  memory.device_budget = *device_budget;
  memory.host_budget = *host_budget;
  memory.workspace = *policy;
  auto spec = LoadNetFile(model, sets);
  if (!spec.ok()) {
    std::fprintf(stderr, "widest: %s\n", spec.status().message().c_str());
    return 1;
  }
  auto probe = [&](int64_t batch) { return PlanProbe(*spec, batch, memory); };
  int probes = 0;
  auto batch = LargestFitting(1, kBatchLimit, probe, &probes);
  if (!batch.ok()) {
    std::fprintf(stderr, "widest: %s\n", batch.status().message().c_str());
    return 1;
  }
  if (*batch < 1) {
    std::printf("%s does not fit a %s budget even at batch 1 (%s)\n", spec->name.c_str(), budget.c_str(), mode.c_str());
    return 1;
  }
  auto best = probe(*batch);
  std::printf("largest batch of %s under %s (host %s), memory %s: %ld; peak %s, %s to host, %ld "
              "recomputations per iteration (%d plans)\n",
              spec->name.c_str(), budget.c_str(), host.c_str(), mode.c_str(), *batch,
              FormatBytes(static_cast<double>(best->plan.peak)).c_str(),
              FormatBytes(static_cast<double>(best->plan.log.to_host)).c_str(),
              static_cast<long>(best->plan.recomputations), probes);
  if (confirm > 0) {
    auto c = ConfirmByTraining(*spec, *batch, memory, best->plan, static_cast<int>(confirm));
    if (!c.ok()) {
      std::printf("confirmation failed: %s\n", c.status().message().c_str());
      return 1;
    }
    if (!c->ran) std::printf("not confirmed by training: %s\n", c->reason.c_str());
    else std::printf("confirmed: trained %ld steps, %.1f s per step, peak %s, last loss %.4f\n", confirm,
                     c->seconds_per_step, FormatBytes(static_cast<double>(c->peak)).c_str(), c->loss);
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) { return spill::Main(argc, argv); }
