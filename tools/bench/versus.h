// bench_train --versus: two memory configurations of one network measured
// against each other in one process. A is the tool's memory flags, B the
// same with the --versus flags applied on top. Each has its own network and
// runtime on the one device; they take turns iteration by iteration (A B,
// then B A), so that a loaded machine slows both alike, and every pair gives
// a ratio. From each iteration's measured queues it also reports the copy
// queue's busy time and the streamed steps' wall time, and it checks that A
// and B compute the same losses.
#ifndef SPILL_TOOLS_BENCH_VERSUS_H_
#define SPILL_TOOLS_BENCH_VERSUS_H_

#include <string>

#include "framework/base/status.h"
#include "framework/config/net_spec.h"
#include "framework/device/device.h"
#include "memory/memory_options.h"
#include "tools/common/memory_flags.h"

namespace spill {

struct VersusArgs {
  NetSpec spec;
  int64_t batch = 0;
  int64_t warmup = 0;  // untimed iterations of each
  int64_t pairs = 0;   // timed iterations of each
  MemoryOptions a;
  std::string a_label;  // the flags that made A
};

// B's options: `a` with the memory flags in `flags` ("--stream-buffers 1")
// applied on top. An error names --versus and what was wrong.
StatusOr<MemoryOptions> VersusOptions(const MemoryOptions& a, const std::string& flags,
                                      const MemoryFlagsUse& use);

// Runs A and B in turns and prints the comparison.
Status RunVersus(const VersusArgs& args, const MemoryOptions& b, const std::string& b_label,
                 Device& device);

}  // namespace spill

#endif  // SPILL_TOOLS_BENCH_VERSUS_H_
