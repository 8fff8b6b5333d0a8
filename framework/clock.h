// The monotonic clock that traces share: the executor's compute spans, the
// CPU device's copy spans and the memory event log's timestamps all read it,
// so a trace can put them on one time axis.
#ifndef SPILL_FRAMEWORK_CLOCK_H_
#define SPILL_FRAMEWORK_CLOCK_H_

#include <chrono>

namespace spill {

// Seconds on the steady clock (an arbitrary but fixed origin).
inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CLOCK_H_
