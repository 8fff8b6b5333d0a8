#include "memory/report/dymem_reports.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "framework/base/units.h"
#include "memory/planning/planner.h"

namespace spill {
namespace {

std::string Bytes(size_t b) { return FormatBytes(static_cast<double>(b)); }

constexpr int kMaxGrowths = 32;  // of the common pool, by 1/16 each

// Plans `options` under each allocator in `out->pool`; false when one did not fit.
StatusOr<bool> RunAll(const NetworkView& view, MemoryOptions options,
                      const std::vector<std::string>& allocators, FragmentationComparison* out) {
  options.device_budget = out->pool;
  out->profiles.clear();
  out->failures.clear();
  const int steps = 2 * view.schedule->num_layers();
  for (const std::string& allocator : allocators) {
    options.allocator = allocator;
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
    if (!plan.fits) {
      out->failures.push_back(allocator + ": " + plan.failure);
      continue;
    }
    out->profiles.push_back(MeasureFragmentation(plan.events, steps, allocator));
  }
  return out->failures.empty();
}

}  // namespace

StatusOr<FragmentationComparison> CompareFragmentation(const NetworkView& view,
                                                       MemoryOptions options,
                                                       const std::vector<std::string>& allocators,
                                                       size_t pool) {
  options.compact = false;
  options.record_events = true;
  FragmentationComparison out;
  out.pool = pool;
  if (pool == 0) {
    options.device_budget = kUnlimitedBudget;
    for (const std::string& allocator : allocators) {
      options.allocator = allocator;
      SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
      if (plan.fits) out.pool = std::max(out.pool, RoundToBlocks(plan.footprint));
    }
  }
  // An allocator whose choices depend on the pool's size may not fit in
  // exactly its unlimited footprint: grow the common pool until all fit.
  const bool grow = pool == 0;
  for (int attempt = 0;; ++attempt) {
    SPILL_ASSIGN_OR_RETURN(bool all_fit, RunAll(view, options, allocators, &out));
    if (all_fit || !grow || attempt == kMaxGrowths) break;
    out.pool = RoundToBlocks(out.pool + std::max<size_t>(kPoolBlockBytes, out.pool / 16));
  }
  return out;
}

std::string FragmentationText(const FragmentationComparison& c) {
  std::ostringstream out;
  out << "  fragmentation, no compaction, every allocator in one pool of " << Bytes(c.pool)
      << ":\n";
  char line[256];
  for (const FragmentationProfile& p : c.profiles) {
    std::snprintf(line, sizeof(line),
                  "    %-10s footprint %12s at step %d; U_f mean %.4f, at that step %.4f\n",
                  p.label.c_str(), Bytes(p.peak).c_str(), p.peak_step + 1, p.mean_unusable,
                  p.peak_unusable);
    out << line;
  }
  for (const std::string& f : c.failures) out << "    does not fit: " << f << "\n";
  return out.str();
}

std::string PoolSizingText(const PoolSizing& s) {
  std::ostringstream out;
  out << "  GTBM pool sizing: profiled in " << Bytes(s.init) << " (main space "
      << Bytes(s.init_main) << "); squeeze gap " << Bytes(s.squeeze_gap) << "; incremental peak "
      << Bytes(s.incremental) << "\n"
      << "    sized pool: main " << Bytes(s.main()) << " (init - gap + beta " << Bytes(s.beta)
      << ") + incremental " << Bytes(s.incremental) << " = " << Bytes(s.pool()) << " (" << s.pool()
      << " bytes): " << (s.runs ? "runs" : "does NOT run") << "\n"
      << "    without beta " << Bytes(s.squeezed()) << "; the planner's exact minimum for gtbm "
      << Bytes(s.minimum) << " (slack " << Bytes(s.squeezed() - std::min(s.squeezed(), s.minimum))
      << "); smallest beta that runs " << Bytes(s.smallest_beta) << " (" << s.smallest_beta
      << " bytes)\n";
  return out.str();
}

nlohmann::ordered_json PoolSizingJson(const PoolSizing& s) {
  return {{"init_bytes", s.init},
          {"init_main_bytes", s.init_main},
          {"squeeze_gap_bytes", s.squeeze_gap},
          {"incremental_bytes", s.incremental},
          {"beta_bytes", s.beta},
          {"main_bytes", s.main()},
          {"pool_bytes", s.pool()},
          {"runs", s.runs},
          {"squeezed_bytes", s.squeezed()},
          {"minimum_budget_bytes", s.minimum},
          {"smallest_beta_bytes", s.smallest_beta}};
}

}  // namespace spill
