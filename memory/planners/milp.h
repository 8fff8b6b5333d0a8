// milp: the exact reference for the planners, a mixed-integer program on
// COIN-OR CBC (in the manner of Checkmate and POET) over the planners'
// decision space: per candidate tensor keep; drop, rebuilt when backward
// first reads it; or offload, freed after a step g and prefetched before a
// step q (any g >= its last forward use, any q > g, from backward on).
//
// Variables, per candidate i: o_i, d_i (offload, drop; o_i + d_i <= 1) and
// the monotone binaries F_is = [g_i < s], P_is = [q_i <= s] over its window
// (P_is <= F_is: back only after it left); i is absent from step s when
// F_is - P_is = 1 or, dropped, for every step between its uses.
// Rows:
//   memory   one per step over the limit with every tensor kept: the keep-all
//            peak (the evaluator's, exact but for what rebuilds add) less
//            the absent tensors <= limit; a dropped tensor's offloaded or
//            dropped sources are back when it is rebuilt.
//   time     recomputation R = the layers rerun (each dropped tensor's, and
//            the forward-only inputs dropped with it); copy-queue stalls:
//            for a partition of the steps into windows W, the copies that
//            must begin and end inside W (offloads: after the step that
//            wrote them, before the step after g; prefetches: from step q,
//            before the reading step) take C_W on the one copy queue while
//            W's computation, recomputation included, takes B_W + R_W, so
//            the iteration grows by at least R + sum_W max(0, C_W - B_W - R_W).
//            sigma_W >= C_W - B_W - R_W per window, over dyadic partitions
//            (windows of 1, 2, 4, ... steps), and the objective is
//            R + max over partitions of sum sigma.
// Every rule-completed plan (rules.h) is a point of this program and the
// objective never exceeds its simulated overhead, so CBC's proven bound is a
// lower bound on the overhead of every plan of the space: the exhaustive
// optimum and every planner's. The plan CBC picks is replayed by the
// evaluator; where what rebuilds add puts it over the limit, the rows of the
// steps over are tightened by the excess and it is solved again (the bound
// stays the first solve's).
#ifndef SPILL_MEMORY_PLANNERS_MILP_H_
#define SPILL_MEMORY_PLANNERS_MILP_H_

#include "framework/network_view.h"
#include "memory/evaluate.h"
#include "memory/memory_options.h"

namespace spill {

struct MilpResult {
  bool feasible = false;  // a plan within the limit (replayed by the evaluator)
  Decisions decisions;
  double seconds = 0;  // its simulated iteration time
  size_t peak = 0;
  // Proven: no plan of the space adds less than this to the keep-all
  // iteration (seconds); valid even when `feasible` is false.
  double lower_bound = 0;
  double objective = 0;  // the program's own estimate of the plan's overhead
  bool optimal = false;  // CBC proved its first solve optimal within the time limit
  double solve_seconds = 0;
  int rounds = 0, columns = 0, rows = 0;
};

// `start` (may be null): a plan CBC starts from (e.g. greedy's).
StatusOr<MilpResult> SolveMilp(const EvalModel& model, size_t limit, double time_limit_seconds,
                               const Decisions* start);

// The `milp` mode's solve of `view` under `options` (memory.planner.limit or
// the device budget, memory.planner.milp_seconds), started from greedy's
// plan; solved once per network, limit and settings in a program.
StatusOr<MilpResult> PlanMilp(const NetworkView& view, const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_MILP_H_
