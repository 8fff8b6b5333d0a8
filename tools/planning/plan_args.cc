#include "tools/planning/plan_args.h"

#include "framework/base/units.h"
#include "framework/graph/net_checks.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

constexpr int64_t kMaxRanks = 1 << 16;  // --ranks

// The memory policy: the flags every planning tool shares.
MemoryFlagsUse PlanMemoryUse() {
  MemoryFlagsUse use;
  use.heading = "Memory policy (overrides a training config's memory: section)";
  use.mode_default = "every mode, one after another";
  use.device_memory_default = "unlimited";
  use.host_memory_default =
      "the config's, or " + FormatBytes(static_cast<double>(kDefaultHostBudget));
  return use;
}

// The timeline simulator: device profiles, traces and SVG timelines.
void DeclareSimulation(Flags& f, PlanArgs* a) {
  f.String("--device-profile", &a->device_profile,
           "predict each mode's iteration time on this device profile (a simulation of the "
           "compute and copy queues; GPU profiles are spec-sheet models, not measurements):\n" +
               DeviceProfileHelp())
      ->type_name("NAME");
  f.Float("--link-gbps", &a->link_gbps, "the cpu profile's link, as train --link-gbps throttles it",
          1e-6, 1e6);
  f.Float("--network-gbps", &a->network_gbps,
          "with --device-profile: the network between data-parallel ranks, GB/s each way (default: "
          "the profile's); a sharded parameter's gather (--zero 3) crosses it",
          0, 1e6);
  f.Float("--map-us", &a->map_us,
          "host microseconds to map or unmap one chunk under --allocator va (no spec sheet gives "
          "it; default 0 - the wait for the compute before an unmap is simulated either way)",
          0, 1e9);
  f.OutputFile("--timeline", &a->timeline,
               "write the (last) mode's simulated iteration as a Chrome/Perfetto trace "
               "(ui.perfetto.dev, chrome://tracing); needs --device-profile");
  f.OutputFile("--timeline-svg", &a->timeline_svg,
               "draw the (last) mode's simulated iteration as SVG; needs --device-profile");
}

// Dymem: fragmentation plots and GTBM pool sizing.
void DeclareDymem(Flags& f, PlanArgs* a) {
  f.OutputFile("--fragmentation-svg", &a->fragmentation_svg,
               "plot the footprint per step and U_f per allocation of the (last) mode under "
               "first_fit, best_fit, gtbm and --allocator, without compaction, in one pool "
               "(--device-memory, or the largest footprint)");
  f.Flag("--size-pool", &a->size_pool,
         "with the gtbm allocator: size the pool from an iteration planned at --device-memory as "
         "Dymem does (init - squeeze gap + beta), check that it runs, and find the exact minimum "
         "and the smallest beta that runs");
  f.Bytes("--beta", &a->beta, "Dymem's safety margin for --size-pool (default 300MiB)", 0,
          kUnlimitedBudget);
}

}  // namespace

void DeclarePlanFlags(Flags& f, PlanArgs* a) {
  f.InputFile("--config", &a->config, "a training config or a network file (models/*.yaml)")
      ->required();
  f.Int("--batch", &a->batch, "batch size (default: the config's, or 32 for a network file)", 1,
        kMaxBatch);
  f.Int("--ranks", &a->ranks,
        "plan one rank of a data-parallel run of N processes: its share of the global batch, "
        "and with --zero its share of the model state",
        1, kMaxRanks);
  f.Int("--rank", &a->rank,
        "with --ranks: the rank planned (default: the last, whose shards are the largest; "
        "ranks hold different pieces of the parameters, so their pools may differ)",
        0, kMaxRanks - 1);
  f.Int("--zero", &a->zero,
        "with --ranks: 0 replicates the solver state, 1 shards it, 2 also lets each gradient "
        "leave the device after its layer's backward, 3 also shards the parameters (each "
        "gathered for the steps of its layer)",
        0, 3);
  f.Choice("--precision", &a->precision,
           "fp32, or bf16: activations and their gradients in 16 bits (default: the config's "
           "run.precision, or fp32)",
           {"fp32", "bf16", "fp16", "tf32"});
  f.Set(&a->sets);
  f.Device(&a->device,
           "whose layers to plan; cuda: cuDNN's algorithms and workspaces, --config=cuda builds "
           "(default: the config's, or cpu)");
  f.Choice("--timing", &a->timing,
           "convolution times: cache (measured by `train` where cached, the model elsewhere), "
           "model, or measure (time the convolutions, and with --device-profile cpu every step "
           "of each mode on this CPU, caching both)",
           {"cache", "model", "measure"});
  f.Flag("--minimum", &a->minimum, "also find the smallest budget each mode runs in");
  f.Flag("--inference", &a->inference,
         "plan inference, the forward pass alone as eval and predict run it (no gradients, "
         "nothing kept for backward), instead of a training iteration");
  f.Flag("--steps", &a->steps, "print every step");
  f.Flag("--json", &a->json, "print JSON instead of text");
  f.OutputFile("--csv", &a->csv, "write the per-step records of the (last) mode as CSV");
  f.OutputFile("--svg", &a->svg, "plot memory per step, one curve per mode");
  f.OutputFile("--trace", &a->trace,
               "write the event log of one iteration as JSON lines: every allocation and free "
               "(block, bytes, offset, step, tensor), transfer, drop and compute (of the last "
               "mode planned)");
  f.OutputFile("--html", &a->html,
               "write the memory page: one self-contained HTML file with every mode planned "
               "(curve per step, address space, step details, the queues with --device-profile, "
               "a comparison of the modes)");
  a->memory.Declare(f, PlanMemoryUse());
  DeclareDymem(f, a);
  DeclareSimulation(f, a);
}

}  // namespace spill
