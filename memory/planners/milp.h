// milp: the exact reference for the planners, a mixed-integer program on
// COIN-OR CBC (in the manner of Checkmate and POET) over the planners'
// decision space: per candidate tensor keep; drop, rebuilt when backward
// first reads it; or offload, freed after a step g and prefetched before a
// step q (any g >= its last forward use, any q > g, from backward on).
//
// Variables, per candidate i: o_i, d_i (offload, drop; o_i + d_i <= 1) and
// the monotone binaries F_is = [g_i < s], P_is = [q_i <= s] over its window
// (P_is <= F_is: back only after it left); i is absent from step s when
// F_is - P_is = 1 or, dropped, for every step between its uses. F changes
// only at steps over the limit and P only after them: freeing later, up to
// the first such step the tensor is absent at, and prefetching earlier, to
// just after the last, never makes a plan slower or larger where it counts,
// so the optimum is the same with far fewer binaries.
// Rows:
//   memory   one per step over the limit with every tensor kept: the keep-all
//            peak (the evaluator's, exact but for what rebuilds add) less
//            the absent tensors <= limit; a dropped tensor's offloaded or
//            dropped sources are back when it is rebuilt.
//   time     a timeline: S_s, when step s's computation starts, and E, when
//            the last one ends; S_s >= S_{s-1} + step s-1's computation +
//            the rebuilds run in the gap before s (a dropped tensor is
//            rebuilt when backward first reads it, or with an earlier
//            rebuild that needs it; forward-only inputs with the first
//            rebuild that needs them: one binary per possible gap, set only
//            at the first trigger that fires, where the runtime rebuilds).
//            Per offloaded tensor, A and B, when its copies out and in
//            start: A after its writer computes, S_s >= A + copy for every
//            step s it is absent at, and s's rebuilds after that (the host
//            waits for the copy where it frees the block); B after step q-1
//            computes and the rebuilds before q (the runtime rebuilds as q
//            reads, then issues q's prefetches), unless one of those reads it,
//            and its reader starts after B + copy. Copies out are first in,
//            first out in the order their writers run, copies in in the
//            order of their reads, as the fixed rules issue them. A rebuild
//            whose offloaded source left the device waits for that source's
//            copy in: its gap's step starts after the copy could have
//            ended (from when it is issued; the queue ahead of it is left
//            out, since a source fetched for a rebuild may overtake it) plus
//            the rebuild and those in the gap that depend on it.
//   queue    every copy whose window (writer to free, or prefetch to
//            reader) lies between the starts of steps a and b fits in
//            S_b - S_a after step a computes, on its direction's queue: a
//            row each way over a duplex link (a copy engine each way), one
//            row for both over a link that carries one way at a time. The
//            order within a queue is free, which keeps the program a
//            relaxation; these rows are what make copies cost time in its
//            linear relaxation, so that CBC's bound moves.
//   again    an offloaded tensor read twice in backward with steps between
//            (EvalModel::again_after) may leave again after the first read,
//            with no copy out, and be back by copy for the second (rules.h,
//            "again"): an entry of its own, with o, F, P, its issue, queue
//            and reader rows as an offload's. In the ordered program it
//            leaves again only if offloaded and its copy in takes its place
//            in the queue by read; in the other neither is required (the
//            rules bring it back as early as the curve allows, which may be
//            ahead of a copy for an earlier read), so that every plan of the
//            rules stays a point.
//   late     under memory.params host a layer's parameters may come with its
//            step instead of one step ahead (rules.h, "late"); the evaluator
//            does not time parameter copies, so the memory rows count every
//            such prefetch as late, and the plan read from a solution brings
//            late those its replay needs.
// The objective is E. Every rule-completed plan (rules.h) is a point of this
// program and the objective never exceeds its simulated overhead, so CBC's
// proven bound is a lower bound on the overhead of every plan of the space:
// the exhaustive optimum and every planner's. Given a starting plan, its own
// time in the program caps every time (E and the starts S_s), which keeps
// the big Ms of the conditional rows small.
// The plan comes from a second program, the ordered one: the same rows, and
// only plans whose copies in the run issues in the program's order are its
// points - no prefetch overtakes one read sooner (where a later-read tensor
// is back, every earlier-read offloaded one is), a rebuild's offloaded source
// is back before the rebuild's step (fetched as the rebuild reads it, it
// would overtake the queue) - with a copy in issued when its step's
// computation could start and a rebuild waiting for its source's place in
// the queue. Its time of its plan is the run's (the frontier's ResNet-18 and
// U-Net limits: equal to the replay). Each plan CBC picks is replayed by the
// evaluator, and so are its choices with frees and prefetches placed by the
// fixed rules (rules.h) instead; the fastest that fits - the ordered
// program's, unless the other's or the starting plan replays faster - is the
// plan. Where what rebuilds add puts a plan over the limit, the row of each
// step over is tightened by that plan's gap between the program's memory
// there and the replay's (at least the excess), and it is solved again (the
// bound stays the first solve's); the ordered program is solved again until
// its own plan fits.
#ifndef SPILL_MEMORY_PLANNERS_MILP_H_
#define SPILL_MEMORY_PLANNERS_MILP_H_

#include "framework/schedule/network_view.h"
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
  bool retimed = false;  // the plan is CBC's choices with frees and prefetches by the rules
  // The plan is the ordered program's (its copies in issued by first read).
  bool ordered = false;
  // The plan is the starting plan: replayed, it is faster than CBC's (the
  // program's optimum is not the simulator's where the program relaxes it).
  bool kept_start = false;
  bool optimal = false;  // CBC proved its first solve optimal within the time limit
  double solve_seconds = 0;
  int rounds = 0, columns = 0, rows = 0;
};

// `start` (may be null): a plan CBC starts from (e.g. greedy's); the result
// is never slower than it.
StatusOr<MilpResult> SolveMilp(const EvalModel& model, size_t limit, double time_limit_seconds,
                               const Decisions* start);

// The program's own overhead of the plan `d` (every binary fixed to it, its
// frees and prefetches moved to the steps over the limit as the program
// has them): never more than its simulated overhead when `d` keeps the fixed
// rules' order of prefetches - what makes CBC's bound a bound. kOutOfMemory
// when `d` breaks the program's memory rows.
StatusOr<double> MilpOverheadOf(const EvalModel& model, size_t limit, const Decisions& d);

// The `milp` mode's solve of `view` under `options` (memory.planner.limit or
// the device budget, memory.planner.milp_seconds), started from greedy's
// plan; solved once per network, limit and settings in a program.
StatusOr<MilpResult> PlanMilp(const NetworkView& view, const MemoryOptions& options);

}  // namespace spill

#endif  // SPILL_MEMORY_PLANNERS_MILP_H_
