// plan's options: one struct, declared as flags in groups (the network and
// outputs, the memory policy shared with the other tools in memory_flags.h,
// GTBM pool sizing, the simulator).
#ifndef SPILL_TOOLS_PLANNING_PLAN_ARGS_H_
#define SPILL_TOOLS_PLANNING_PLAN_ARGS_H_

#include <cstdint>
#include <string>

#include "framework/config/net_spec.h"
#include "memory/planning/pool_sizing.h"
#include "tools/common/cli.h"
#include "tools/common/memory_flags.h"

namespace spill {

// Every option of plan, as given (empty or 0: the config's or the mode's).
struct PlanArgs {
  std::string config, device, csv, svg, timing = "cache";
  std::string trace, fragmentation_svg, html;
  std::string device_profile, timeline, timeline_svg;  // the simulator
  double link_gbps = 0, map_us = 0;
  double network_gbps = 0;  // the network between ranks (0: the profile's)
  bool size_pool = false;
  size_t beta = kDefaultBeta;
  int64_t batch = 0;      // 0: the config's, or 32 for a network file
  int64_t ranks = 1;      // data-parallel processes: plan one's share of the batch
  int64_t rank = -1;      // which of them (-1: the last, whose shard is the largest)
  int64_t zero = -1;      // -1: the config's distributed.zero
  std::string precision;  // empty: the config's run.precision
  bool minimum = false, steps = false, json = false;
  bool inference = false;  // plan the forward pass alone
  ParamOverrides sets;
  MemoryFlags memory;  // --memory (empty: every mode), budgets, policies
};

// Declares every flag of `plan` into `a`.
void DeclarePlanFlags(Flags& f, PlanArgs* a);

}  // namespace spill

#endif  // SPILL_TOOLS_PLANNING_PLAN_ARGS_H_
