// The planner frontier plot (the DQN planner paper's Fig. 5 axes): memory
// reduction relative to liveness on x, overhead in iteration time on y, one
// series of points per planner, joined in order of reduction.
#ifndef SPILL_TOOLS_BENCH_FRONTIER_SVG_H_
#define SPILL_TOOLS_BENCH_FRONTIER_SVG_H_

#include <string>
#include <vector>

namespace spill {

struct FrontierPoint {
  double reduction = 0;  // 1 - peak / liveness peak
  double overhead = 0;   // time / liveness time - 1
};

struct FrontierSeries {
  std::string name;
  std::vector<FrontierPoint> points;
};

std::string FrontierSvg(const std::vector<FrontierSeries>& series, const std::string& title);

}  // namespace spill

#endif  // SPILL_TOOLS_BENCH_FRONTIER_SVG_H_
