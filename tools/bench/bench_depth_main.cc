// bench_depth: planning time against depth, every memory mode.
//
// The network is a chain of ReLUs on an 8x8 input with a fully connected
// layer and a loss at the end (batch 32; tools/bench/relu_chain.h):
// thousands of steps whose tensors are tiny, so what grows is the planner's
// own work per step. For each depth it builds the network once and plans one
// training iteration in each mode, printing the process (CPU) seconds of the
// plan alone - what other work on a loaded machine does not inflate - and
// its wall seconds, with the max load and the allocator's footprint.
//
//   bazel-bin/tools/bench/bench_depth                       10k, 30k, 100k, 300k layers
//   bazel-bin/tools/bench/bench_depth --depth 1000 --depth 5000 --memory dymem
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "framework/base/units.h"
#include "framework/graph/net.h"
#include "memory/planning/planner.h"
#include "tools/bench/relu_chain.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

constexpr int64_t kBatch = 32;

Status Run(const std::vector<int64_t>& depths, const std::vector<std::string>& modes) {
  std::printf("%9s %-18s %10s %10s %12s %12s\n", "layers", "mode", "cpu s", "wall s", "max load",
              "footprint");
  for (int64_t depth : depths) {
    SPILL_ASSIGN_OR_RETURN(NetSpec spec, ParseNetString(ReluChainYaml(depth), "relu_chain"));
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {kBatch, DeviceType::kCpu}));
    for (const std::string& mode : modes) {
      MemoryOptions options;
      SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, &options));
      options.device_budget = kUnlimitedBudget;
      const std::clock_t cpu = std::clock();
      const auto wall = std::chrono::steady_clock::now();
      SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(net->view(), options));
      const double cpu_seconds = static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC;
      const double wall_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
      if (!plan.fits) return Internal(mode + " does not fit without a budget: " + plan.failure);
      std::printf("%9ld %-18s %10.3f %10.3f %12s %12s\n", static_cast<long>(depth), mode.c_str(),
                  cpu_seconds, wall_seconds, FormatBytes(static_cast<double>(plan.peak)).c_str(),
                  FormatBytes(static_cast<double>(plan.footprint)).c_str());
      std::fflush(stdout);
    }
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags("bench_depth", "Planning time against depth, every memory mode (see the header).");
  std::vector<int64_t> depths;
  std::vector<std::string> modes;
  flags.app()
      .add_option("--depth", depths, "ReLU layers in the chain (repeatable)")
      ->check(CLI::Range(int64_t{1}, kMaxLayers - 2))
      ->type_name("INT");
  flags.app()
      .add_option("--memory", modes, "memory mode (repeatable; default: every mode)")
      ->type_name("MODE");
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  if (depths.empty()) depths = {10000, 30000, 100000, 300000};
  if (modes.empty()) modes = MemoryModeNames();
  return ReportStatus("bench_depth", Run(depths, modes));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_depth", [&] { return spill::Main(argc, argv); });
}
