// The validity check for DSA solutions: a sweep over the event clock that
// keeps the live blocks ordered by offset, O(n log n), so it runs on
// 10^5-block traces too. It never aborts: every defect, in the blocks or in
// the solution, comes back as text.
//
// Lifetimes are closed: a block freed at time t and one allocated at t are
// live together, so at one time every allocation is handled before any free.
#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "memory/allocators/dsa_solver.h"

namespace spill {
namespace {

std::string Describe(const std::vector<DsaBlock>& blocks, const std::vector<size_t>& offsets,
                     size_t i) {
  std::ostringstream out;
  out << "block " << i << " (" << blocks[i].bytes << " bytes, lifetime [" << blocks[i].alloc_time
      << ", " << blocks[i].free_time << "], offset " << offsets[i] << ")";
  return out.str();
}

// Well-formed blocks and offsets whose ends fit in size_t; "" or the defect.
std::string CheckShape(const std::vector<DsaBlock>& blocks, const DsaSolution& solution) {
  std::ostringstream out;
  if (solution.offsets.size() != blocks.size()) {
    out << "the solution has " << solution.offsets.size() << " offsets for " << blocks.size()
        << " blocks";
    return out.str();
  }
  size_t top = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].bytes == 0) {
      out << "block " << i << " has 0 bytes; expected > 0";
    } else if (blocks[i].free_time < blocks[i].alloc_time) {
      out << "block " << i << " is freed at " << blocks[i].free_time
          << ", before its allocation at " << blocks[i].alloc_time;
    } else if (solution.offsets[i] > std::numeric_limits<size_t>::max() - blocks[i].bytes) {
      out << Describe(blocks, solution.offsets, i) << " ends beyond the address range";
    }
    if (!out.str().empty()) return out.str();
    top = std::max(top, solution.offsets[i] + blocks[i].bytes);
  }
  if (solution.footprint != top) {
    out << "footprint is " << solution.footprint << " but the highest block ends at " << top;
  }
  return out.str();
}

// Block indices by (alloc_time, index), and by (free_time, index).
std::vector<size_t> SortedBy(const std::vector<DsaBlock>& blocks, int64_t DsaBlock::*time) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    return std::tie(blocks[i].*time, i) < std::tie(blocks[j].*time, j);
  });
  return order;
}

}  // namespace

std::string CheckDsaSolution(const std::vector<DsaBlock>& blocks, const DsaSolution& solution) {
  std::string shape = CheckShape(blocks, solution);
  if (!shape.empty()) return shape;
  const std::vector<size_t>& offsets = solution.offsets;
  const std::vector<size_t> allocs = SortedBy(blocks, &DsaBlock::alloc_time);
  const std::vector<size_t> frees = SortedBy(blocks, &DsaBlock::free_time);
  // Live blocks by (offset, index). They never overlap each other (checked
  // when each was added), so a new block overlaps one of them exactly when it
  // overlaps its neighbour below or above in this order.
  std::set<std::pair<size_t, size_t>> live;
  size_t f = 0;
  for (size_t i : allocs) {
    for (; f < frees.size() && blocks[frees[f]].free_time < blocks[i].alloc_time; ++f) {
      live.erase({offsets[frees[f]], frees[f]});
    }
    auto above = live.lower_bound({offsets[i], i});
    if (above != live.end() && above->first < offsets[i] + blocks[i].bytes) {
      return Describe(blocks, offsets, i) + " overlaps " +
             Describe(blocks, offsets, above->second) + " in address";
    }
    if (above != live.begin()) {
      const size_t below = std::prev(above)->second;
      if (offsets[below] + blocks[below].bytes > offsets[i]) {
        return Describe(blocks, offsets, i) + " overlaps " + Describe(blocks, offsets, below) +
               " in address";
      }
    }
    live.emplace(offsets[i], i);
  }
  return "";
}

}  // namespace spill
