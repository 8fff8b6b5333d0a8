// The DSA solver: the best-fit skyline heuristic on a hand-checked example,
// against a literal O(n²) transcription of the paper's loop on random
// instances (same offsets, so the indexed search changes nothing), validity
// and determinism, the max-load bound, the solution check's diagnostics, and
// the heuristic against CBC's exact optimum on training-shaped traces.
#include "memory/allocators/dsa_solver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>

#include "memory/allocators/dsa_exact.h"

namespace spill {
namespace {

constexpr size_t kKiB = 1024;
// CBC's limit on the small instances below; they solve in well under a second.
constexpr double kExactSeconds = 20;

// The paper's loop, transcribed literally: linear scans for the lowest line
// and for the candidates, and a full merge pass after every change.
DsaSolution NaiveBestFit(const std::vector<DsaBlock>& blocks) {
  struct Line {
    int64_t a, b;
    size_t h;
  };
  DsaSolution solution;
  solution.offsets.assign(blocks.size(), 0);
  if (blocks.empty()) return solution;
  const DsaTimeSpan span = DsaBlockSpan(blocks);
  std::vector<Line> lines = {{span.first, span.last, 0}};
  std::vector<bool> placed(blocks.size(), false);
  for (size_t left = blocks.size(); left > 0;) {
    size_t l = 0;
    for (size_t k = 1; k < lines.size(); ++k) {
      if (lines[k].h < lines[l].h) l = k;  // strict: the leftmost of the lowest
    }
    int best = -1;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const DsaBlock& c = blocks[i];
      if (placed[i] || c.alloc_time < lines[l].a || c.free_time > lines[l].b) continue;
      if (best < 0) {
        best = static_cast<int>(i);
        continue;
      }
      const DsaBlock& o = blocks[best];
      const int64_t lc = c.free_time - c.alloc_time, lo = o.free_time - o.alloc_time;
      if (lc > lo || (lc == lo && c.bytes > o.bytes)) best = static_cast<int>(i);
    }
    std::vector<Line> next(lines.begin(), lines.begin() + l);
    if (best >= 0) {
      const DsaBlock& block = blocks[best];
      solution.offsets[best] = lines[l].h;
      solution.footprint = std::max(solution.footprint, lines[l].h + block.bytes);
      placed[best] = true;
      --left;
      if (lines[l].a < block.alloc_time)
        next.push_back({lines[l].a, block.alloc_time - 1, lines[l].h});
      next.push_back({block.alloc_time, block.free_time, lines[l].h + block.bytes});
      if (block.free_time < lines[l].b)
        next.push_back({block.free_time + 1, lines[l].b, lines[l].h});
    } else {
      size_t h = SIZE_MAX;
      if (l > 0) h = lines[l - 1].h;
      if (l + 1 < lines.size()) h = std::min(h, lines[l + 1].h);
      next.push_back({lines[l].a, lines[l].b, h});
    }
    next.insert(next.end(), lines.begin() + l + 1, lines.end());
    lines.clear();
    for (const Line& line : next) {
      if (!lines.empty() && lines.back().h == line.h) {
        lines.back().b = line.b;
      } else {
        lines.push_back(line);
      }
    }
  }
  return solution;
}

// The highest load at any event time, by looking at every time.
size_t BruteMaxLoad(const std::vector<DsaBlock>& blocks) {
  size_t peak = 0;
  for (const DsaBlock& at : blocks) {
    for (int64_t t : {at.alloc_time, at.free_time}) {
      size_t live = 0;
      for (const DsaBlock& block : blocks) {
        if (block.alloc_time <= t && t <= block.free_time) live += block.bytes;
      }
      peak = std::max(peak, live);
    }
  }
  return peak;
}

// Random profile: `n` allocations interleaved with frees of random live
// blocks; sizes are 1 to `max_kib` KiB.
std::vector<DsaBlock> RandomProfile(std::mt19937_64& rng, int n, size_t max_kib) {
  DsaTrace trace;  // as the paper profiles: one tick per allocation or free
  std::vector<int> live;
  std::uniform_int_distribution<size_t> kib(1, max_kib);
  for (int allocated = 0; allocated < n || !live.empty();) {
    if (allocated < n && (live.empty() || rng() % 2 == 0)) {
      live.push_back(trace.Alloc(kib(rng) * kKiB));
      ++allocated;
    } else {
      const size_t k = rng() % live.size();
      trace.Free(live[k]);
      live.erase(live.begin() + k);
    }
  }
  return trace.Finish();
}

// Random intervals on a small clock, so that times are shared and lifetimes
// tie: the solver must not rely on distinct event times.
std::vector<DsaBlock> RandomIntervals(std::mt19937_64& rng, int n, int64_t horizon) {
  std::vector<DsaBlock> blocks(n);
  for (DsaBlock& block : blocks) {
    block.alloc_time = static_cast<int64_t>(rng() % horizon);
    block.free_time = block.alloc_time + static_cast<int64_t>(rng() % (horizon / 3 + 1));
    block.bytes = 1 + rng() % 8;
  }
  return blocks;
}

void ExpectValid(const std::vector<DsaBlock>& blocks, const DsaSolution& solution) {
  EXPECT_EQ(CheckDsaSolution(blocks, solution), "");
  EXPECT_GE(solution.footprint, DsaMaxLoad(blocks));
}

TEST(DsaSolverTest, HandCheckedExample) {
  // Step by step (line = [a, b]@h):
  //  [1,12]@0: 0 and 1 both live 7 ticks; 0 has more bytes -> 0 @0.
  //  [9,12]@0 -> 2 @0; [9,12]@3 -> 4 @3; [9,9]@3 fits nothing: lifted to 4
  //  and merged with both neighbours; [12,12]@3 lifted too -> [1,12]@4.
  //  [1,12]@4 -> 1 @4; [1,4]@4 -> 3 @4; [1,1]@4 and then [1,4]@5 lifted.
  //  [1,12]@6: 5 and 6 are identical; the smaller index goes first -> 5 @6,
  //  two lifts, then 6 @7.
  const std::vector<DsaBlock> blocks = {
      {4, 1, 8}, {2, 5, 12}, {3, 9, 12}, {1, 2, 4}, {1, 10, 11}, {1, 6, 7}, {1, 6, 7},
  };
  const DsaSolution solution = SolveDsaBestFit(blocks);
  EXPECT_EQ(solution.offsets, (std::vector<size_t>{0, 4, 0, 4, 3, 6, 7}));
  EXPECT_EQ(solution.footprint, 8u);
  EXPECT_EQ(DsaMaxLoad(blocks), 8u);  // at times 6 and 7: 4 + 2 + 1 + 1
  ExpectValid(blocks, solution);
}

// Block 3 goes first (longest); [1,1] and [7,7] fit nothing and are lifted
// onto it; 0 @1; on [5,7]@1 blocks 1 and 2 both live 1 tick, 2 has more bytes
// -> 2 @1; [5,5]@1 lifted to 4; 4 @4 (more bytes than 1); [1,3]@4 and [6,7]@4
// lifted to 6; 1 @6. The space lifted over is wasted: 7 bytes, where 6 (the
// max load) is possible, as the exact test below confirms.
const std::vector<DsaBlock> kSuboptimal = {{3, 1, 4}, {1, 5, 6}, {3, 6, 7}, {1, 2, 6}, {2, 4, 5}};

TEST(DsaSolverTest, LiftedSpaceIsWasted) {
  const DsaSolution solution = SolveDsaBestFit(kSuboptimal);
  EXPECT_EQ(solution.offsets, (std::vector<size_t>{1, 6, 1, 0, 4}));
  EXPECT_EQ(solution.footprint, 7u);
  EXPECT_EQ(DsaMaxLoad(kSuboptimal), 6u);
  ExpectValid(kSuboptimal, solution);
}

TEST(DsaSolverTest, EmptyAndSingleBlock) {
  EXPECT_EQ(SolveDsaBestFit({}).footprint, 0u);
  EXPECT_EQ(DsaMaxLoad({}), 0u);
  EXPECT_EQ(CheckDsaSolution({}, DsaSolution{}), "");
  const DsaSolution one = SolveDsaBestFit({{5, 3, 3}});
  EXPECT_EQ(one.offsets, (std::vector<size_t>{0}));
  EXPECT_EQ(one.footprint, 5u);
}

TEST(DsaSolverTest, ExtremeTimesDoNotOverflow) {
  // 0 spans the whole clock; 2 fits nowhere until both lines beside 1 are
  // lifted to its top.
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<DsaBlock> blocks = {{1, kMin, kMax}, {2, -5, 5}, {5, 0, 0}};
  const DsaSolution solution = SolveDsaBestFit(blocks);
  EXPECT_EQ(solution.offsets, (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(solution.footprint, 8u);
  EXPECT_EQ(DsaMaxLoad(blocks), 8u);
  ExpectValid(blocks, solution);
}

TEST(DsaSolverTest, ClosedLifetimesTouchingAtOneTimeCollide) {
  const std::vector<DsaBlock> blocks = {{4, 1, 5}, {4, 5, 9}, {4, 10, 12}};
  EXPECT_EQ(DsaMaxLoad(blocks), 8u);
  const DsaSolution solution = SolveDsaBestFit(blocks);
  EXPECT_EQ(solution.footprint, 8u);
  ExpectValid(blocks, solution);
  EXPECT_NE(CheckDsaSolution(blocks, DsaSolution{{0, 0, 0}, 4}), "");
  EXPECT_EQ(CheckDsaSolution(blocks, DsaSolution{{0, 4, 0}, 8}), "");
}

TEST(DsaSolverTest, CheckNamesTheFirstViolation) {
  const std::vector<DsaBlock> blocks = {{4, 1, 5}, {4, 2, 6}};
  EXPECT_EQ(CheckDsaSolution(blocks, DsaSolution{{0, 2}, 6}),
            "block 1 (4 bytes, lifetime [2, 6], offset 2) overlaps block 0 (4 bytes, lifetime "
            "[1, 5], offset 0) in address");
  EXPECT_EQ(CheckDsaSolution(blocks, DsaSolution{{0, 4}, 9}),
            "footprint is 9 but the highest block ends at 8");
  EXPECT_EQ(CheckDsaSolution(blocks, DsaSolution{{0}, 4}),
            "the solution has 1 offsets for 2 blocks");
  EXPECT_EQ(CheckDsaSolution({{0, 1, 2}}, DsaSolution{{0}, 0}),
            "block 0 has 0 bytes; expected > 0");
  EXPECT_EQ(CheckDsaSolution({{1, 3, 2}}, DsaSolution{{0}, 1}),
            "block 0 is freed at 2, before its allocation at 3");
  EXPECT_EQ(CheckDsaSolution({{2, 1, 2}}, DsaSolution{{SIZE_MAX - 1}, 0}),
            "block 0 (2 bytes, lifetime [1, 2], offset 18446744073709551614) ends beyond the "
            "address range");
}

TEST(DsaSolverTest, RandomInstancesMatchThePapersLoop) {
  std::mt19937_64 rng(20180427);
  for (int instance = 0; instance < 300; ++instance) {
    const int n = 1 + static_cast<int>(rng() % 120);
    const std::vector<DsaBlock> blocks =
        instance % 2 == 0 ? RandomProfile(rng, n, 64) : RandomIntervals(rng, n, 2 * n);
    const DsaSolution solution = SolveDsaBestFit(blocks);
    SCOPED_TRACE("instance " + std::to_string(instance) + ", " + std::to_string(n) + " blocks");
    ExpectValid(blocks, solution);
    EXPECT_EQ(DsaMaxLoad(blocks), BruteMaxLoad(blocks));
    const DsaSolution naive = NaiveBestFit(blocks);
    EXPECT_EQ(solution.offsets, naive.offsets);
    EXPECT_EQ(solution.footprint, naive.footprint);
    EXPECT_EQ(SolveDsaBestFit(blocks).offsets, solution.offsets);  // deterministic
  }
}

TEST(DsaSolverTest, LargeInstancesMatchThePapersLoop) {
  // Enough blocks for several levels of the candidate index.
  std::mt19937_64 rng(7);
  for (int n : {700, 3000}) {
    for (const auto& blocks : {RandomProfile(rng, n, 512), RandomIntervals(rng, n, 4 * n)}) {
      const DsaSolution solution = SolveDsaBestFit(blocks);
      ExpectValid(blocks, solution);
      EXPECT_EQ(solution.offsets, NaiveBestFit(blocks).offsets);
    }
  }
}

// One training iteration of a plain CNN (conv, conv, pool, conv, conv, fc,
// fc): activations allocated in the forward pass and freed in reverse order
// in the backward pass, per-step convolution workspaces, short-lived
// activation gradients.
std::vector<DsaBlock> LinearNetIteration() {
  const size_t act_kib[] = {48, 96, 96, 24, 48, 48, 8, 1};  // [0] is the input batch
  const size_t workspace_kib[] = {0, 32, 64, 0, 40, 16, 0, 0};
  const int layers = 7;
  DsaTrace trace;
  std::vector<int> act = {trace.Alloc(act_kib[0] * kKiB)};
  for (int k = 1; k <= layers; ++k) {
    const int ws = workspace_kib[k] > 0 ? trace.Alloc(workspace_kib[k] * kKiB) : -1;
    act.push_back(trace.Alloc(act_kib[k] * kKiB));
    if (ws >= 0) trace.Free(ws);
  }
  int grad = trace.Alloc(act_kib[layers] * kKiB);  // of the loss
  for (int k = layers; k >= 1; --k) {
    const int ws = workspace_kib[k] > 0 ? trace.Alloc(workspace_kib[k] * kKiB) : -1;
    const int grad_in = k > 1 ? trace.Alloc(act_kib[k - 1] * kKiB) : -1;  // none for the input
    if (ws >= 0) trace.Free(ws);
    trace.Free(grad);
    trace.Free(act[k]);
    grad = grad_in;
  }
  trace.Free(act[0]);
  return trace.Finish();
}

// One training iteration of a small residual network: a stem convolution,
// two residual units (conv, conv, join with the unit's input), pooling and a
// classifier. The unit input fans out to the branch and the join; in the
// backward pass the join's gradient is the sum of the skip and the branch.
std::vector<DsaBlock> ResidualNetIteration() {
  DsaTrace trace;
  const int input = trace.Alloc(96 * kKiB);
  int ws = trace.Alloc(24 * kKiB);
  int x = trace.Alloc(64 * kKiB);  // stem output, the first unit's input
  trace.Free(ws);
  struct Unit {
    int in, h1, h2, out;
  };
  std::vector<Unit> units;
  const size_t unit_kib[] = {64, 32};
  for (size_t kib : unit_kib) {
    Unit unit{x, -1, -1, -1};
    ws = trace.Alloc(kib / 2 * kKiB);
    unit.h1 = trace.Alloc(kib * kKiB);
    trace.Free(ws);
    ws = trace.Alloc(kib * kKiB);
    unit.h2 = trace.Alloc(kib * kKiB);
    trace.Free(ws);
    unit.out = trace.Alloc(kib * kKiB);  // in + h2 (same shapes)
    units.push_back(unit);
    x = unit.out;
  }
  const int pooled = trace.Alloc(4 * kKiB);
  const int logits = trace.Alloc(kKiB);
  int grad_logits = trace.Alloc(kKiB);
  int grad = trace.Alloc(4 * kKiB);  // of pooled
  trace.Free(grad_logits);
  trace.Free(logits);
  int grad_x = trace.Alloc(unit_kib[1] * kKiB);  // of the last unit's output
  trace.Free(grad);
  trace.Free(pooled);
  for (int u = 1; u >= 0; --u) {
    const size_t kib = unit_kib[u];
    ws = trace.Alloc(kib * kKiB);
    const int grad_h1 = trace.Alloc(kib * kKiB);  // through conv 2
    trace.Free(ws);
    trace.Free(units[u].h2);
    ws = trace.Alloc(kib / 2 * kKiB);
    const int grad_branch = trace.Alloc(kib * kKiB);  // through conv 1
    trace.Free(ws);
    trace.Free(grad_h1);
    trace.Free(units[u].h1);
    const int grad_in = trace.Alloc(kib * kKiB);  // skip + branch
    trace.Free(grad_branch);
    trace.Free(grad_x);
    trace.Free(units[u].out);
    grad_x = grad_in;
  }
  ws = trace.Alloc(24 * kKiB);  // stem backward: weights only, no input gradient
  trace.Free(ws);
  trace.Free(grad_x);
  trace.Free(units[0].in);
  trace.Free(input);
  return trace.Finish();
}

DsaExactResult SolveExactly(const std::vector<DsaBlock>& blocks, bool warm_start) {
  DsaExactOptions options;
  options.time_limit_seconds = kExactSeconds;
  options.warm_start = warm_start;
  StatusOr<DsaExactResult> exact = SolveDsaExact(blocks, options);
  EXPECT_TRUE(exact.ok()) << exact.status().ToString();
  if (!exact.ok()) return {};
  EXPECT_EQ(CheckDsaSolution(blocks, exact->solution), "");
  EXPECT_GE(exact->lower_bound, DsaMaxLoad(blocks));
  return *exact;
}

TEST(DsaExactTest, CbcFindsWhatTheHeuristicMisses) {
  for (bool warm_start : {true, false}) {
    const DsaExactResult exact = SolveExactly(kSuboptimal, warm_start);
    EXPECT_TRUE(exact.optimal);
    EXPECT_EQ(exact.solution.footprint, 6u) << "warm start " << warm_start;
  }
}

TEST(DsaExactTest, HeuristicIsOptimalOnTrainingTraces) {
  for (const auto& [name, blocks] : {std::make_pair("linear", LinearNetIteration()),
                                     std::make_pair("residual", ResidualNetIteration())}) {
    const DsaSolution heuristic = SolveDsaBestFit(blocks);
    ExpectValid(blocks, heuristic);
    // Without the heuristic's hints, so the optimum is CBC's own.
    const DsaExactResult exact = SolveExactly(blocks, /*warm_start=*/false);
    ASSERT_TRUE(exact.optimal) << name << ": not proven in " << kExactSeconds << " s";
    EXPECT_EQ(heuristic.footprint, exact.solution.footprint) << name;
    std::printf("%s trace: %zu blocks, max load %zu, heuristic %zu, optimum %zu (CBC %.2f s)\n",
                name, blocks.size(), DsaMaxLoad(blocks), heuristic.footprint,
                exact.solution.footprint, exact.seconds);
  }
}

TEST(DsaExactTest, ReportsHowOftenTheHeuristicIsOptimal) {
  // Reported, not asserted: the heuristic may miss the optimum.
  std::mt19937_64 rng(1804);
  const int kInstances = 40;
  int optimal = 0, proven = 0;
  double worst_gap = 0, total_gap = 0;
  for (int instance = 0; instance < kInstances; ++instance) {
    const std::vector<DsaBlock> blocks = RandomProfile(rng, 8 + instance % 8, 16);
    const size_t heuristic = SolveDsaBestFit(blocks).footprint;
    const DsaExactResult exact = SolveExactly(blocks, /*warm_start=*/true);
    EXPECT_LE(exact.solution.footprint, heuristic);
    if (!exact.optimal) continue;
    ++proven;
    const double gap = static_cast<double>(heuristic) / exact.solution.footprint - 1;
    optimal += gap == 0;
    total_gap += gap;
    worst_gap = std::max(worst_gap, gap);
  }
  std::printf(
      "random profiles of 8-15 blocks: heuristic optimal on %d of %d proven (%d instances); "
      "mean gap %.2f%%, worst %.2f%%\n",
      optimal, proven, kInstances, 100 * total_gap / std::max(proven, 1), 100 * worst_gap);
}

}  // namespace
}  // namespace spill
