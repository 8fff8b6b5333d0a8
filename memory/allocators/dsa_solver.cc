// The best-fit skyline heuristic for DSA (policy in dsa_solver.h).
//
// Mechanism: the skyline is a map from a line's first time cell to the line,
// plus a set ordered by (height, first cell) that yields the lowest, leftmost
// line in O(log n). Lines stay maximal: after every change a line merges with
// neighbours of its height, so neighbouring lines always differ in height.
// Each step places one block or removes at least one line; a placement adds at
// most two lines, so there are at most 3n + 1 steps.
#include "memory/allocators/dsa_solver.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "framework/base/check.h"
#include "memory/allocators/dsa_candidate_index.h"

namespace spill {
namespace {

// Preconditions of the solver: see the header. Blocks come from a planner, so
// a violation is an internal error.
void CheckBlocks(const std::vector<DsaBlock>& blocks) {
  size_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const DsaBlock& block = blocks[i];
    SPILL_CHECK_GT(block.bytes, 0u) << "DSA block " << i << " has no bytes";
    SPILL_CHECK_GE(block.free_time, block.alloc_time) << "DSA block " << i << " is freed too early";
    SPILL_CHECK_LE(block.bytes, std::numeric_limits<size_t>::max() - total)
        << "DSA block sizes overflow size_t at block " << i;
    total += block.bytes;
  }
}

class Skyline {
 public:
  struct Line {
    int64_t end;  // last time cell, inclusive
    size_t height;
  };
  using Iterator = std::map<int64_t, Line>::iterator;

  Skyline(int64_t first, int64_t last) { Insert(first, last, 0); }

  // The lowest line; ties: the leftmost.
  Iterator Lowest() { return lines_.find(by_height_.begin()->second); }

  // Puts a block of `bytes` over [start, end] on `line`; [start, end] lies
  // inside the line.
  void Place(Iterator line, int64_t start, int64_t end, size_t bytes) {
    const int64_t first = line->first, last = line->second.end;
    const size_t height = line->second.height;
    Erase(line);
    if (first < start) Insert(first, start - 1, height);
    Iterator placed = Insert(start, end, height + bytes);
    if (end < last) Insert(end + 1, last, height);
    MergeWithNeighbours(placed);
  }

  // Raises a line that no block fits to its lower neighbour and merges it.
  void Lift(Iterator line) {
    size_t height = std::numeric_limits<size_t>::max();
    if (line != lines_.begin()) height = std::prev(line)->second.height;
    if (std::next(line) != lines_.end()) {
      height = std::min(height, std::next(line)->second.height);
    }
    // Only the whole range has no neighbours, and every block fits in it.
    SPILL_CHECK(lines_.size() > 1) << "DSA skyline: the whole-range line has no candidate";
    const int64_t first = line->first, last = line->second.end;
    Erase(line);
    MergeWithNeighbours(Insert(first, last, height));
  }

 private:
  Iterator Insert(int64_t first, int64_t last, size_t height) {
    by_height_.emplace(height, first);
    return lines_.emplace(first, Line{last, height}).first;
  }

  void Erase(Iterator line) {
    by_height_.erase({line->second.height, line->first});
    lines_.erase(line);
  }

  void MergeWithNeighbours(Iterator line) {
    const size_t height = line->second.height;
    int64_t first = line->first, last = line->second.end;
    if (line != lines_.begin() && std::prev(line)->second.height == height) {
      first = std::prev(line)->first;
      Erase(std::prev(line));
    }
    auto next = std::next(line);
    if (next != lines_.end() && next->second.height == height) {
      last = next->second.end;
      Erase(next);
    }
    if (first != line->first || last != line->second.end) {
      Erase(line);
      Insert(first, last, height);
    }
  }

  std::map<int64_t, Line> lines_;                   // first cell -> line
  std::set<std::pair<size_t, int64_t>> by_height_;  // (height, first cell)
};

}  // namespace

DsaTimeSpan DsaBlockSpan(const std::vector<DsaBlock>& blocks) {
  DsaTimeSpan span{blocks[0].alloc_time, blocks[0].free_time};
  for (const DsaBlock& block : blocks) {
    span.first = std::min(span.first, block.alloc_time);
    span.last = std::max(span.last, block.free_time);
  }
  return span;
}

DsaSolution SolveDsaBestFit(const std::vector<DsaBlock>& blocks) {
  CheckBlocks(blocks);
  DsaSolution solution;
  solution.offsets.assign(blocks.size(), 0);
  if (blocks.empty()) return solution;

  const DsaTimeSpan span = DsaBlockSpan(blocks);
  Skyline skyline(span.first, span.last);
  DsaCandidateIndex candidates(blocks);
  for (size_t unplaced = blocks.size(); unplaced > 0;) {
    Skyline::Iterator line = skyline.Lowest();
    const int i = candidates.Best(line->first, line->second.end);
    if (i < 0) {
      skyline.Lift(line);
      continue;
    }
    const DsaBlock& block = blocks[i];
    solution.offsets[i] = line->second.height;
    solution.footprint = std::max(solution.footprint, line->second.height + block.bytes);
    skyline.Place(line, block.alloc_time, block.free_time, block.bytes);
    candidates.Remove(i);
    --unplaced;
  }
  return solution;
}

size_t DsaMaxLoad(const std::vector<DsaBlock>& blocks) {
  CheckBlocks(blocks);
  // (time, 0 = allocation / 1 = free, block): at one time, allocations come
  // first, because closed lifetimes make a block freed at t live at t.
  std::vector<std::tuple<int64_t, int, size_t>> events;
  events.reserve(2 * blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    events.emplace_back(blocks[i].alloc_time, 0, i);
    events.emplace_back(blocks[i].free_time, 1, i);
  }
  std::sort(events.begin(), events.end());
  size_t live = 0, peak = 0;
  for (const auto& [time, kind, i] : events) {
    if (kind == 0) {
      live += blocks[i].bytes;
      peak = std::max(peak, live);
    } else {
      live -= blocks[i].bytes;
    }
  }
  return peak;
}

}  // namespace spill
