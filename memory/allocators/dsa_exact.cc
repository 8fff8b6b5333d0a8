// The DSA mixed-integer program on CBC's C interface (formulation and the
// choices behind it in dsa_exact.h). Columns: u, then x_i, then one z per
// lifetime-overlapping pair.
#include "memory/allocators/dsa_exact.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <queue>
#include <string>

namespace spill {
namespace {

// Values within this distance of an integer count as that integer when
// reading CBC's doubles (u and the bound are whole units).
constexpr double kIntegralTolerance = 1e-6;

struct Pair {
  int i, j;  // i < j, lifetimes intersect
};

struct Instance {
  std::vector<double> w;  // sizes in units of `unit` bytes
  size_t unit = 1;        // gcd of all sizes
  std::vector<Pair> pairs;
  int fixed_pair = -1;                    // z fixed to 0 (i below j) to break the mirror symmetry
  double big_m = 0;                       // W, in units
  double max_load = 0;                    // in units
  std::vector<std::vector<int>> cliques;  // maximal sets of blocks live at one time
};

// The live sets that are maximal: at an allocation time after which some live
// block is freed before the next allocation.
std::vector<std::vector<int>> MaximalCliques(const std::vector<DsaBlock>& blocks) {
  std::vector<int64_t> times;
  for (const DsaBlock& block : blocks) times.push_back(block.alloc_time);
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  std::vector<std::vector<int>> cliques;
  for (size_t k = 0; k < times.size(); ++k) {
    std::vector<int> live;
    bool shrinks = k + 1 == times.size();
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (blocks[i].alloc_time > times[k] || blocks[i].free_time < times[k]) continue;
      live.push_back(static_cast<int>(i));
      shrinks = shrinks || blocks[i].free_time < times[k + 1];
    }
    if (shrinks && live.size() > 1) cliques.push_back(std::move(live));
  }
  return cliques;
}

Instance MakeInstance(const std::vector<DsaBlock>& blocks, size_t big_m_bytes) {
  Instance instance;
  instance.unit = 0;
  for (const DsaBlock& block : blocks) instance.unit = std::gcd(instance.unit, block.bytes);
  const double unit = static_cast<double>(instance.unit);
  size_t best_pair_bytes = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    instance.w.push_back(static_cast<double>(blocks[i].bytes / instance.unit));
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      if (blocks[i].alloc_time > blocks[j].free_time ||
          blocks[j].alloc_time > blocks[i].free_time) {
        continue;
      }
      if (blocks[i].bytes + blocks[j].bytes > best_pair_bytes) {
        best_pair_bytes = blocks[i].bytes + blocks[j].bytes;
        instance.fixed_pair = static_cast<int>(instance.pairs.size());
      }
      instance.pairs.push_back({static_cast<int>(i), static_cast<int>(j)});
    }
  }
  instance.big_m = static_cast<double>(big_m_bytes) / unit;
  instance.max_load = static_cast<double>(DsaMaxLoad(blocks)) / unit;
  instance.cliques = MaximalCliques(blocks);
  return instance;
}

// Blocks live at one time lie in a stack: whatever the solver puts below
// block i adds to x_i, whatever it puts above i must fit under u. One pair of
// rows per block of every maximal clique (the live sets just before a free):
//   sum_{j below i} w_j <= x_i,   x_i + w_i + sum_{j above i} w_j <= u.
// They hold in every placement and tie x to z, which the big-M rows alone
// barely do in the LP relaxation.
void AddCliqueRows(const Instance& instance, Cbc_Model* m) {
  const int n = static_cast<int>(instance.w.size());
  std::vector<std::vector<int>> pair_index(n, std::vector<int>(n, -1));
  for (size_t k = 0; k < instance.pairs.size(); ++k) {
    pair_index[instance.pairs[k].i][instance.pairs[k].j] = static_cast<int>(k);
  }
  for (const std::vector<int>& clique : instance.cliques) {
    for (int i : clique) {
      std::vector<int> cols = {1 + i};
      std::vector<double> below = {-1.0}, above = {1.0};
      double below_rhs = 0, above_rhs = -instance.w[i];
      for (int j : clique) {
        if (j == i) continue;
        // z = 1 puts the pair's second block below its first.
        const bool j_first = j < i;
        cols.push_back(1 + n + pair_index[std::min(i, j)][std::max(i, j)]);
        if (j_first) {  // j below i  <=>  z_ji = 0
          below.push_back(-instance.w[j]);
          below_rhs -= instance.w[j];
          above.push_back(instance.w[j]);
        } else {  // j below i  <=>  z_ij = 1
          below.push_back(instance.w[j]);
          above.push_back(-instance.w[j]);
          above_rhs -= instance.w[j];
        }
      }
      const int nz = static_cast<int>(cols.size());
      Cbc_addRow(m, "", nz, cols.data(), below.data(), 'L', below_rhs);
      cols.push_back(0);  // u
      above.push_back(-1.0);
      Cbc_addRow(m, "", nz + 1, cols.data(), above.data(), 'L', above_rhs);
    }
  }
}

using ModelPtr = std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)>;

ModelPtr BuildModel(const Instance& instance) {
  ModelPtr model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model* m = model.get();
  const int n = static_cast<int>(instance.w.size());
  const double big_m = instance.big_m;
  Cbc_setObjSense(m, 1);  // minimise
  Cbc_addCol(m, "u", instance.max_load, big_m, 1.0, 1, 0, nullptr, nullptr);
  for (int i = 0; i < n; ++i) {
    const std::string name = "x" + std::to_string(i);
    Cbc_addCol(m, name.c_str(), 0.0, big_m - instance.w[i], 0.0, 0, 0, nullptr, nullptr);
  }
  for (size_t k = 0; k < instance.pairs.size(); ++k) {
    const std::string name = "z" + std::to_string(k);
    const double upper = static_cast<int>(k) == instance.fixed_pair ? 0.0 : 1.0;
    Cbc_addCol(m, name.c_str(), 0.0, upper, 0.0, 1, 0, nullptr, nullptr);
  }
  for (int i = 0; i < n; ++i) {  // x_i - u <= -w_i
    const int cols[] = {1 + i, 0};
    const double coefs[] = {1.0, -1.0};
    Cbc_addRow(m, "", 2, cols, coefs, 'L', -instance.w[i]);
  }
  for (size_t k = 0; k < instance.pairs.size(); ++k) {
    const int i = instance.pairs[k].i, j = instance.pairs[k].j;
    const int z = 1 + n + static_cast<int>(k);
    const int cols[] = {1 + i, 1 + j, z};
    const double below[] = {1.0, -1.0, -big_m};  // x_i - x_j - W z <= -w_i
    Cbc_addRow(m, "", 3, cols, below, 'L', -instance.w[i]);
    const double above[] = {-1.0, 1.0, big_m};  // x_j - x_i + W z <= W - w_j
    Cbc_addRow(m, "", 3, cols, above, 'L', big_m - instance.w[j]);
  }
  AddCliqueRows(instance, m);
  return model;
}

// The heuristic's placement as column values, mirrored if it puts the fixed
// pair the other way round.
std::vector<double> StartValues(const Instance& instance, const DsaSolution& start) {
  const size_t n = instance.w.size();
  const double u = static_cast<double>(start.footprint / instance.unit);
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(start.offsets[i] / instance.unit);
  if (instance.fixed_pair >= 0) {
    const Pair& fixed = instance.pairs[instance.fixed_pair];
    if (x[fixed.i] > x[fixed.j]) {
      for (size_t i = 0; i < n; ++i) x[i] = u - x[i] - instance.w[i];
    }
  }
  std::vector<double> values = {u};
  values.insert(values.end(), x.begin(), x.end());
  for (const Pair& pair : instance.pairs) values.push_back(x[pair.i] < x[pair.j] ? 0.0 : 1.0);
  return values;
}

// Offsets from CBC's above/below choices: every block as low as the blocks
// chosen to lie below it allow (longest paths in the "below" order).
StatusOr<DsaSolution> Rebuild(const std::vector<DsaBlock>& blocks, const Instance& instance,
                              const double* columns) {
  const size_t n = blocks.size();
  std::vector<std::vector<int>> above(n);  // i -> blocks chosen to lie above i
  std::vector<int> below_count(n, 0);
  for (size_t k = 0; k < instance.pairs.size(); ++k) {
    int lower = instance.pairs[k].i, upper = instance.pairs[k].j;
    if (columns[1 + n + k] > 0.5) std::swap(lower, upper);
    above[lower].push_back(upper);
    ++below_count[upper];
  }
  DsaSolution solution;
  solution.offsets.assign(n, 0);
  std::queue<int> ready;
  for (size_t i = 0; i < n; ++i) {
    if (below_count[i] == 0) ready.push(static_cast<int>(i));
  }
  size_t done = 0;
  for (; !ready.empty(); ready.pop(), ++done) {
    const int i = ready.front();
    const size_t top = solution.offsets[i] + blocks[i].bytes;
    solution.footprint = std::max(solution.footprint, top);
    for (int j : above[i]) {
      solution.offsets[j] = std::max(solution.offsets[j], top);
      if (--below_count[j] == 0) ready.push(j);
    }
  }
  if (done != n) return Internal("CBC's above/below choices form a cycle");
  return solution;
}

}  // namespace

StatusOr<DsaExactResult> SolveDsaExact(const std::vector<DsaBlock>& blocks,
                                       const DsaExactOptions& options) {
  const auto start_time = std::chrono::steady_clock::now();
  DsaExactResult result;
  if (blocks.empty()) {
    result.optimal = true;
    return result;
  }
  const DsaSolution heuristic = SolveDsaBestFit(blocks);
  size_t total = 0;
  for (const DsaBlock& block : blocks) total += block.bytes;
  const Instance instance = MakeInstance(blocks, options.warm_start ? heuristic.footprint : total);
  ModelPtr model = BuildModel(instance);
  Cbc_Model* m = model.get();
  Cbc_setLogLevel(m, 0);
  Cbc_setParameter(m, "threads", "1");
  // Wall-clock seconds, set as CBC's own parameters: its driver overrides
  // Cbc_setMaximumSeconds with them.
  Cbc_setParameter(m, "timeMode", "elapsed");
  Cbc_setParameter(m, "seconds", std::to_string(options.time_limit_seconds).c_str());
  // u is whole units: a bound within one unit of the incumbent proves it.
  Cbc_setAllowableGap(m, 1.0 - 2 * kIntegralTolerance);
  if (options.warm_start) {
    std::vector<double> values = StartValues(instance, heuristic);
    std::vector<int> columns(values.size());
    std::iota(columns.begin(), columns.end(), 0);
    Cbc_setMIPStartI(m, static_cast<int>(values.size()), columns.data(), values.data());
  }
  Cbc_solve(m);
  const double* best = Cbc_bestSolution(m);
  if (best == nullptr) {
    return Cancelled("CBC found no placement within " + std::to_string(options.time_limit_seconds) +
                     " s");
  }
  StatusOr<DsaSolution> solution = Rebuild(blocks, instance, best);
  if (!solution.ok()) return solution.status();
  const std::string violation = CheckDsaSolution(blocks, *solution);
  if (!violation.empty()) return Internal("CBC's placement is invalid: " + violation);
  result.solution = std::move(*solution);
  const double bound = std::max(instance.max_load, Cbc_getBestPossibleObjValue(m));
  result.lower_bound = static_cast<size_t>(std::ceil(bound - kIntegralTolerance)) * instance.unit;
  if (result.solution.footprint < result.lower_bound) {
    return Internal("CBC's placement (" + std::to_string(result.solution.footprint) +
                    " bytes) is below its own proven bound (" + std::to_string(result.lower_bound) +
                    " bytes)");
  }
  result.optimal = result.solution.footprint == result.lower_bound;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  return result;
}

}  // namespace spill
