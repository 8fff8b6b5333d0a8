// The monotonic clock that traces share: the executor's compute spans, the
// CPU device's copy spans and the memory event log's timestamps all read it,
// so a trace can put them on one time axis.
#ifndef SPILL_FRAMEWORK_BASE_CLOCK_H_
#define SPILL_FRAMEWORK_BASE_CLOCK_H_

#include <time.h>

#include <chrono>

namespace spill {

// Seconds on the steady clock (an arbitrary but fixed origin).
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds this process has used, in all its threads. On a machine shared
// with other work, the CPU time a computation takes varies far less than its
// wall-clock time.
inline double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_CLOCK_H_
