// deepest: the deepest ResNet that trains under a device budget at a batch
// size (SuperNeurons Table 4). The network is models/resnet_deep.yaml with
// n1 = 6, n2 = 32, n4 = 6 and n3 grown, as in the paper: depth =
// 3 * (n1 + n2 + n3 + n4) + 2.
//
//   deepest --device-memory 12GiB --batch 16 [--memory superneurons] [--size 224]
//           [--confirm 2]     also train that deep a network for 2 steps, when
//                             this machine has the memory
#include <cstdio>
#include <cstdlib>

#include "framework/units.h"
#include "layers/cpu/conv_timer.h"
#include "tools/experiments.h"

namespace spill {
namespace {

constexpr int64_t kUnitsLimit = 1 << 16;

int Main(int argc, char** argv) {
  std::string model = "models/resnet_deep.yaml", budget = "12GiB", host = "64GiB";
  std::string mode = "superneurons", workspace = "dynamic";
  int64_t batch = 16, size = 224, confirm = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--config") model = v;
    else if (a == "--device-memory") budget = v;
    else if (a == "--host-memory") host = v;
    else if (a == "--memory") mode = v;
    else if (a == "--workspace") workspace = v;
    else if (a == "--batch") batch = std::atoll(v.c_str());
    else if (a == "--size") size = std::atoll(v.c_str());
    else if (a == "--confirm") confirm = std::atoll(v.c_str());
    else {
      std::fprintf(stderr, "deepest: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  MemoryOptions memory;
  Status status = ApplyMemoryMode(mode, &memory);
  auto device_budget = ParseBytes(budget), host_budget = ParseBytes(host);
  auto policy = ParseWorkspacePolicy(workspace);
  if (!status.ok() || !device_budget.ok() || !host_budget.ok() || !policy.ok()) {
    std::fprintf(stderr, "deepest: bad --memory, --device-memory, --host-memory or --workspace\n");
    return 2;
  }
  memory.device_budget = *device_budget;
  memory.host_budget = *host_budget;
  memory.workspace = *policy;
  auto spec_for = [&](int64_t n3) {
    return LoadNetFile(model, {{"n1", YAML::Node(6)}, {"n2", YAML::Node(32)}, {"n3", YAML::Node(n3)},
                               {"n4", YAML::Node(6)}, {"size", YAML::Node(size)}});
  };
  auto probe = [&](int64_t n3) -> StatusOr<Probe> {
    SPILL_ASSIGN_OR_RETURN(NetSpec spec, spec_for(n3));
    return PlanProbe(spec, batch, memory);
  };
  int probes = 0;
  auto n3 = LargestFitting(1, kUnitsLimit, probe, &probes);
  if (!n3.ok()) {
    std::fprintf(stderr, "deepest: %s\n", n3.status().message().c_str());
    return 1;
  }
  if (*n3 < 1) {
    std::printf("not even n3 = 1 fits a %s budget at batch %ld (%s)\n", budget.c_str(), batch, mode.c_str());
    return 1;
  }
  const int64_t depth = 3 * (6 + 32 + *n3 + 6) + 2;
  auto best = probe(*n3);
  std::printf("deepest ResNet under %s (host %s), batch %ld, %ldx%ld, memory %s: depth %ld (n3 = %ld, %ld "
              "residual units); peak %s, %s to host, %ld recomputations per iteration (%d plans)\n",
              budget.c_str(), host.c_str(), batch, size, size, mode.c_str(), depth, *n3, 6 + 32 + *n3 + 6,
              FormatBytes(static_cast<double>(best->plan.peak)).c_str(),
              FormatBytes(static_cast<double>(best->plan.log.to_host)).c_str(),
              static_cast<long>(best->plan.recomputations), probes);
  if (confirm > 0) {
    auto spec = spec_for(*n3);
    auto c = ConfirmByTraining(*spec, batch, memory, best->plan, static_cast<int>(confirm));
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
