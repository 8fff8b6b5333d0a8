#include "tools/plan_args.h"

#include "framework/net_checks.h"
#include "framework/units.h"
#include "tools/timeline_tools.h"

namespace spill {
namespace {

// Allocator, eviction rule, parameter placement and the event log.
void DeclarePolicies(Flags& f, PlanArgs* a) {
  f.String("--allocator", &a->allocator,
           "how device requests are placed: first_fit (default), best_fit, caching (CNMeM/PyTorch "
           "segments), static (offsets precomputed by dynamic storage allocation), va (virtual "
           "addressing in --va-chunk pieces), gtbm, gtbm_soft, ideal (plan only: the max load, as "
           "if memory never fragmented)")
      ->type_name("NAME");
  f.Choice("--eviction", &a->eviction, "the tensor cache's victim rule: lru (default) or belady",
           {"lru", "belady"});
  f.Flag("--no-compact", &a->no_compact,
         "never slide live tensors down to close holes, so that allocators are compared by "
         "their footprint alone");
  f.Params(&a->params);
  f.Update(&a->update);
  f.HostTier(&a->host_tier);
  f.OutputFile("--trace", &a->trace,
               "write the event log of one iteration as JSON lines: every allocation and free "
               "(block, bytes, offset, step, tensor), transfer, drop and compute (of the last "
               "mode planned)");
}

// The window scheduler and the virtual-addressing allocator.
void DeclareWindow(Flags& f, PlanArgs* a) {
  auto size_setting = CLI::Validator(
      [](std::string& text) {
        auto parsed = ParseSizeSetting(text);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "");
  f.String("--window", &a->window,
           "the window scheduler's look-ahead: a multiple of its budget (1.5x, the default) or "
           "bytes")
      ->check(size_setting)
      ->type_name("SIZE");
  f.String("--window-budget", &a->window_budget,
           "the device bytes the window scheduler may fill: a multiple of the budget less "
           "persistent tensors and workspace (1x) or bytes")
      ->check(size_setting)
      ->type_name("SIZE");
  f.String("--va-chunk", &a->va_chunk, "the va allocator's physical chunk (default 2MiB)")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto parsed = ParseBytes(text);
            return parsed.ok() ? std::string() : parsed.status().message();
          },
          ""))
      ->type_name("SIZE");
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
  f.Float("--map-us", &a->map_us,
          "host microseconds to map or unmap one chunk under --allocator va (no spec sheet gives "
          "it; default 0 - the drain of the queues before an unmap is simulated either way)",
          0, 1e9);
  f.OutputFile("--timeline", &a->timeline,
               "write the (last) mode's simulated iteration as a Chrome/Perfetto trace "
               "(ui.perfetto.dev, chrome://tracing); needs --device-profile");
  f.OutputFile("--timeline-svg", &a->timeline_svg,
               "draw the (last) mode's simulated iteration as SVG; needs --device-profile");
}

// Dymem: fragmentation plots, GTBM pool sizing and the scheduler's switches.
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
  f.Choice("--release", &a->release, "when offloaded tensors leave: lazy or eager",
           {"lazy", "eager"});
  f.Choice("--prefetch", &a->prefetch, "the dymem scheduler's prefetch: dymem or ahead",
           {"dymem", "ahead"});
  f.Choice("--offload-set", &a->offload_set, "what the dymem scheduler offloads: dymem or conv",
           {"dymem", "conv"});
  f.Flag("--barrier", &a->barrier, "wait for transfers at every layer boundary");
  f.Bytes("--min-offload", &a->min_offload, "offload no tensor smaller than this", 1,
          kUnlimitedBudget);
}

}  // namespace

void DeclarePlanFlags(Flags& f, PlanArgs* a) {
  f.InputFile("--config", &a->config, "a training config or a network file (models/*.yaml)")
      ->required();
  f.Int("--batch", &a->batch, "batch size (default: the config's, or 32 for a network file)", 1,
        kMaxBatch);
  f.Set(&a->sets);
  f.Device(&a->device,
           "whose layers to plan; cuda: cuDNN's algorithms and workspaces, --config=cuda builds "
           "(default: the config's, or cpu)");
  f.MemoryMode(&a->memory, "plan one mode (default: every mode)");
  f.DeviceMemory(&a->device_memory, "budget to plan under (default: unlimited)");
  f.HostMemory(&a->host_memory,
               "host memory for what leaves the device (default: the config's, or 64GiB)");
  f.Int("--prefetch-ahead", &a->prefetch_ahead,
        "prefetch offloaded tensors N checkpoint layers ahead (default 1)", 0, 1024);
  f.RecomputeStrategy(&a->strategy, "cost_aware (default), speed or memory");
  f.Workspace(&a->workspace, "dynamic (default), fastest, memory_optimal, cap:SIZE, pin:NAME");
  f.BatchChunk(&a->chunk, "compute each step over slices of N images of the batch (default off)");
  f.Choice("--timing", &a->timing,
           "convolution times: cache (measured by `train` where cached, the model elsewhere), "
           "model, or measure (time the convolutions, and with --device-profile cpu every step "
           "of each mode on this CPU, caching both)",
           {"cache", "model", "measure"});
  f.Flag("--minimum", &a->minimum, "also find the smallest budget each mode runs in");
  f.Flag("--steps", &a->steps, "print every step");
  f.Flag("--json", &a->json, "print JSON instead of text");
  f.OutputFile("--csv", &a->csv, "write the per-step records of the (last) mode as CSV");
  f.OutputFile("--svg", &a->svg, "plot memory per step, one curve per mode");
  DeclarePolicies(f, a);
  DeclareWindow(f, a);
  DeclareDymem(f, a);
  DeclareSimulation(f, a);
}

// The allocator, eviction, parameter and dymem flags, where given.
Status ApplyPolicies(const PlanArgs& args, MemoryOptions* options) {
  if (!args.allocator.empty()) options->allocator = args.allocator;
  if (!args.eviction.empty()) options->eviction = args.eviction;
  if (args.no_compact) options->compact = false;
  if (!args.params.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->params, ParseParamPlacement(args.params));
  }
  if (!args.update.empty()) options->update_on_host = args.update == "host";
  if (!args.host_tier.empty()) options->host_tier = args.host_tier;
  options->record_events = !args.trace.empty() || !args.device_profile.empty();
  if (!args.window.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->window, ParseSizeSetting(args.window));
  }
  if (!args.window_budget.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->window_budget, ParseSizeSetting(args.window_budget));
  }
  if (!args.chunk.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->batch_chunk, ParseBatchChunk(args.chunk));
  }
  if (!args.va_chunk.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->va_chunk, ParseBytes(args.va_chunk));
  }
  if (!args.release.empty()) options->release = args.release;
  if (!args.prefetch.empty()) options->prefetch = args.prefetch;
  if (!args.offload_set.empty()) options->offload_set = args.offload_set;
  if (args.barrier) options->barrier = true;
  if (args.min_offload) options->min_offload_bytes = args.min_offload;
  return Status::Ok();
}

}  // namespace spill
