// The exact DSA reference: the paper's mixed-integer program (§3.1), solved
// with COIN-OR CBC. For tests and benchmarks only (a testonly target): it
// takes seconds on ~40 blocks and grows exponentially, so nothing on the
// training path may use it.
//
// Formulation, in units of g = gcd of all sizes (smaller numbers keep the
// big-M constraints numerically safe):
//   min u
//   s.t. x_i + w_i <= u                          every block i
//        x_i + w_i <= x_j + z_ij W                every lifetime-overlapping
//        x_j + w_j <= x_i + (1 - z_ij) W          pair i < j
//        max load <= u <= W,  0 <= x_i <= W - w_i,  z_ij in {0, 1}
// with u integer and x continuous: once the z are fixed the constraints are
// differences, whose vertices are integral, so this loses nothing.
//
// Choices that make small instances solve fast, each valid for every optimum:
//   * W is the best-fit heuristic's footprint (warm start) or the sum of all
//     sizes. Some optimum has u <= W, and then x_i + w_i <= W makes the big-M
//     rows redundant whenever z says so.
//   * Symmetry: mirroring a placement (x_i -> u - x_i - w_i) keeps u and
//     flips every z. So z is fixed to 0 for one pair (the pair with the most
//     bytes): block i below block j.
//   * u >= max load, the bound the LP relaxation misses.
//   * Stack rows: the blocks live at one time are stacked, so for each block
//     i of each maximal clique, x_i >= the bytes of the clique below i and
//     x_i + w_i + the bytes above i <= u. They tie x to z where the big-M rows
//     are slack in the LP; with them a 29-block residual-network trace solves
//     in about a second without any hint (not within a minute without them).
//   * Warm start: the heuristic's placement (mirrored when it breaks the
//     fixed pair) is given to CBC as the first incumbent.
// The offsets returned are rebuilt from CBC's above/below choices (each block
// as low as the blocks below it allow), then checked; optimality is claimed
// only when that footprint meets CBC's proven lower bound.
#ifndef SPILL_MEMORY_ALLOCATORS_DSA_EXACT_H_
#define SPILL_MEMORY_ALLOCATORS_DSA_EXACT_H_

#include <vector>

#include "framework/base/status.h"
#include "memory/allocators/dsa_solver.h"

namespace spill {

struct DsaExactOptions {
  double time_limit_seconds = 10;  // CBC's limit; the best placement so far is returned
  // Big-M and first incumbent from SolveDsaBestFit. Off: W = sum of sizes and
  // no incumbent, so CBC finds its optimum on its own.
  bool warm_start = true;
};

struct DsaExactResult {
  DsaSolution solution;    // the best placement CBC found
  size_t lower_bound = 0;  // proven: no placement has a smaller footprint
  bool optimal = false;    // solution.footprint == lower_bound
  double seconds = 0;      // wall time of the solve
};

// kCancelled when CBC found no placement within the time limit (only possible
// without warm start); kInternal when CBC's answer fails the solution check.
StatusOr<DsaExactResult> SolveDsaExact(const std::vector<DsaBlock>& blocks,
                                       const DsaExactOptions& options = {});

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_DSA_EXACT_H_
