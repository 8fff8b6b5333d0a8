// bench_dsa: the DSA best-fit heuristic's solve time and footprint / max load
// on synthetic training iterations of 10^3 to 10^5 blocks.
//
//   bazel run //tools/bench:bench_dsa                      # 1000 10000 100000 blocks
//   bazel run //tools/bench:bench_dsa -- 2000 500000       # other sizes
//
// Each trace is one training iteration as a profile records it (one clock
// tick per allocation or free): a plain CNN (activations kept from the
// forward pass to the backward pass, per-step convolution workspaces,
// short-lived activation gradients) and a residual network (the same, plus
// fan-out to the skip and gradients summed at each join), in four stages
// whose activations halve in size; and, for contrast, random lifetimes that
// do not nest. Sizes are whole KiB with a seeded jitter,
// so every run measures the same traces. The time is the best of kRepeats
// solves; every solution is checked before it is reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "memory/allocators/dsa_solver.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

constexpr size_t kKiB = 1024;
constexpr int kRepeats = 5;
constexpr int kStages = 4;
constexpr size_t kFirstStageKiB = 3136;  // 56x56x64 floats, batch 4
constexpr uint64_t kSeed = 1804;

// A DsaTrace in whole KiB, with the seeded jitter of the synthetic networks.
class Trace {
 public:
  explicit Trace(uint64_t seed) : rng_(seed) {}
  int Alloc(size_t kib) { return trace_.Alloc(std::max<size_t>(kib, 1) * kKiB); }
  void Free(int id) { trace_.Free(id); }
  // A convolution workspace of 0 to 2 activations, freed after its step.
  void Workspace(size_t act_kib) {
    const size_t quarters = rng_() % 9;  // 0, 1/4, ..., 2 activations
    if (quarters > 0) Free(Alloc(act_kib * quarters / 4));
  }
  // An activation size with +-12.5% jitter, as layer widths vary.
  size_t Jitter(size_t kib) { return kib - kib / 8 + rng_() % (kib / 4 + 1); }
  std::vector<DsaBlock> Finish() const { return trace_.Finish(); }

 private:
  std::mt19937_64 rng_;
  DsaTrace trace_;
};

size_t StageKiB(int layer, int layers) { return kFirstStageKiB >> (kStages * layer / layers); }

// About 3.8 blocks per layer: an activation and its gradient, and a workspace
// in 8 of 9 steps of either pass.
std::vector<DsaBlock> PlainNet(size_t target_blocks) {
  const int layers = std::max<int>(1, static_cast<int>(target_blocks * 9 / 34));
  Trace trace(kSeed);
  std::vector<int> act = {trace.Alloc(kFirstStageKiB)};
  std::vector<size_t> kib = {kFirstStageKiB};
  for (int k = 1; k <= layers; ++k) {
    kib.push_back(trace.Jitter(StageKiB(k, layers)));
    trace.Workspace(kib[k]);
    act.push_back(trace.Alloc(kib[k]));
  }
  int grad = trace.Alloc(kib[layers]);
  for (int k = layers; k >= 1; --k) {
    trace.Workspace(kib[k]);
    const int grad_in = k > 1 ? trace.Alloc(kib[k - 1]) : -1;
    trace.Free(grad);
    trace.Free(act[k]);
    grad = grad_in;
  }
  trace.Free(act[0]);
  return trace.Finish();
}

// About 9.6 blocks per unit of two convolutions and a join.
std::vector<DsaBlock> ResidualNet(size_t target_blocks) {
  const int units = std::max<int>(1, static_cast<int>(target_blocks * 9 / 86));
  Trace trace(kSeed + 1);
  const int input = trace.Alloc(kFirstStageKiB);
  struct Unit {
    size_t kib;
    int h1, h2, out;
  };
  std::vector<Unit> net;
  size_t in_kib = kFirstStageKiB;
  for (int u = 0; u < units; ++u) {
    // A new stage starts with a projection; within a stage shapes are equal.
    const bool same_stage = u > 0 && StageKiB(u, units) == StageKiB(u - 1, units);
    const size_t kib = same_stage ? in_kib : trace.Jitter(StageKiB(u, units));
    Unit unit{kib, -1, -1, -1};
    trace.Workspace(kib);
    unit.h1 = trace.Alloc(kib);
    trace.Workspace(kib);
    unit.h2 = trace.Alloc(kib);
    unit.out = trace.Alloc(kib);  // skip + branch
    net.push_back(unit);
    in_kib = kib;
  }
  int grad = trace.Alloc(in_kib);
  for (int u = units - 1; u >= 0; --u) {
    const size_t below_kib = u > 0 ? net[u - 1].kib : kFirstStageKiB;
    trace.Workspace(net[u].kib);
    const int grad_h1 = trace.Alloc(net[u].kib);
    trace.Free(net[u].h2);
    trace.Workspace(net[u].kib);
    const int grad_branch = trace.Alloc(below_kib);
    trace.Free(grad_h1);
    trace.Free(net[u].h1);
    const int grad_in = trace.Alloc(below_kib);  // skip + branch
    trace.Free(grad_branch);
    trace.Free(grad);
    trace.Free(net[u].out);
    grad = grad_in;
  }
  trace.Free(grad);
  trace.Free(input);
  return trace.Finish();
}

// Not a training trace, for contrast: allocations of 1 KiB to 1 MiB, each
// followed by frees of random live blocks, so lifetimes do not nest.
std::vector<DsaBlock> Unstructured(size_t target_blocks) {
  Trace trace(kSeed + 2);
  std::mt19937_64 rng(kSeed + 3);
  std::vector<int> live;
  for (size_t allocated = 0; allocated < target_blocks || !live.empty();) {
    if (allocated < target_blocks && (live.empty() || rng() % 2 == 0)) {
      live.push_back(trace.Alloc(1 + rng() % kKiB));
      ++allocated;
    } else {
      const size_t k = rng() % live.size();
      trace.Free(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
  }
  return trace.Finish();
}

bool Measure(const char* name, const std::vector<DsaBlock>& blocks) {
  double best_ms = 1e300;
  DsaSolution solution;
  for (int r = 0; r < kRepeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    solution = SolveDsaBestFit(blocks);
    const auto end = std::chrono::steady_clock::now();
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(end - start).count());
  }
  const auto check_start = std::chrono::steady_clock::now();
  const std::string violation = CheckDsaSolution(blocks, solution);
  const double check_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - check_start)
          .count();
  if (!violation.empty()) {
    std::fprintf(stderr, "bench_dsa: %s trace of %zu blocks: invalid solution: %s\n", name,
                 blocks.size(), violation.c_str());
    return false;
  }
  const size_t max_load = DsaMaxLoad(blocks);
  std::printf("%-9s %8zu %12.1f %12.1f %8.4f %10.2f %9.2f\n", name, blocks.size(),
              max_load / double(kKiB * kKiB), solution.footprint / double(kKiB * kKiB),
              solution.footprint / double(max_load), best_ms, check_ms);
  return true;
}

int Main(int argc, char** argv) {
  Flags flags("bench_dsa",
              "Solves synthetic training traces (plain, residual, random) of about BLOCKS blocks "
              "each by dynamic storage allocation and prints time and footprint / max load.");
  std::vector<int64_t> sizes = {1000, 10000, 100000};
  flags.app()
      .add_option("blocks", sizes, "block counts per trace")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->type_name("BLOCKS");
  if (const int code = flags.Parse(argc, argv); code >= 0) return code;
  std::printf("%-9s %8s %12s %12s %8s %10s %9s\n", "trace", "blocks", "maxload_MiB",
              "footprint_MiB", "ratio", "solve_ms", "check_ms");
  bool ok = true;
  for (int64_t blocks : sizes) {
    ok = Measure("plain", PlainNet(blocks)) && ok;
    ok = Measure("residual", ResidualNet(blocks)) && ok;
    ok = Measure("random", Unstructured(blocks)) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_dsa", [&] { return spill::Main(argc, argv); });
}
