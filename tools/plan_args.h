// plan's options: one struct, declared as flags in groups (the network and
// budgets, allocator and parameter policies, the window scheduler and va,
// Dymem's switches, the simulator), and applied to a mode's memory options.
#ifndef SPILL_TOOLS_PLAN_ARGS_H_
#define SPILL_TOOLS_PLAN_ARGS_H_

#include <cstdint>
#include <string>

#include "framework/net_spec.h"
#include "framework/status.h"
#include "memory/memory_options.h"
#include "memory/pool_sizing.h"
#include "tools/cli.h"

namespace spill {

// Every option of plan, as given (empty or 0: the config's or the mode's).
struct PlanArgs {
  std::string config, device, memory, csv, svg, strategy, workspace, timing = "cache";
  std::string allocator, eviction, trace, fragmentation_svg;
  std::string params, update, host_tier;
  std::string window, window_budget, va_chunk;         // the window scheduler and va
  std::string chunk;                                   // images per slice of the batch
  std::string device_profile, timeline, timeline_svg;  // the simulator
  double link_gbps = 0, map_us = 0;
  std::string release, prefetch, offload_set;  // the dymem scheduler's switches
  size_t min_offload = 0;                      // 0: the mode's
  bool barrier = false, no_compact = false, size_pool = false;
  size_t beta = kDefaultBeta;
  size_t device_memory = 0;  // 0: unlimited
  size_t host_memory = 0;    // 0: the config's, or the default
  int64_t prefetch_ahead = -1;
  int64_t batch = 0;  // 0: the config's, or 32 for a network file
  bool minimum = false, steps = false, json = false;
  ParamOverrides sets;
};

// Declares every flag of `plan` into `a`.
void DeclarePlanFlags(Flags& f, PlanArgs* a);

// The allocator, eviction, parameter, window and dymem flags, where given.
Status ApplyPolicies(const PlanArgs& args, MemoryOptions* options);

}  // namespace spill

#endif  // SPILL_TOOLS_PLAN_ARGS_H_
