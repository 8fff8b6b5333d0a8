// The timeline of one training iteration: what the compute queue, the two
// copy queues (to the device, to the host) and the host thread did when, and the device and host
// memory in use over time. Two sources produce the same data: SimulateIteration replays a plan's
// event log under a cost model and a device profile (a discrete-event simulation), and a traced
// real run records it (tools/common/timeline_tools.h). trace_json.h and timeline_svg.h draw either.
//
// The simulation models exactly the waits memory/residency.cc performs:
//   begin offload / prefetch  the copy queue of its direction waits for the
//                             compute enqueued so far, then copies (latency +
//                             bytes/bandwidth); on a duplex link the two
//                             directions run at once, otherwise in turn
//                             (CopyClocks)
//   finish offload            the host waits for the copy, then frees
//   finish prefetch, cancel   the compute queue waits for the copy
//   free of a tensor with a   the host waits for it (Release); a drop does not
//   copy in flight
//   compaction                the compute queue waits for the copies in
//                             flight on the blocks it moves, then moves the
//                             bytes (read + write)
//   loss layers               the host reads the scores back (waits for compute)
//   chunks unmapped (va)      the host waits for the compute queued before
//                             the free that gave the chunks back (copies on
//                             a freed block have ended by then, or that
//                             compute waited for them), then maps and
//                             unmaps at the profile's cost per chunk
//   begin gather              the network carries what this rank receives of
//                             a sharded parameter (latency + bytes/rate), one
//                             gather after another, once the host issues it
//   finish gather             the compute queue waits for it, then copies the
//                             whole parameter in from host memory
//   reduce-scatter            once the backward that made a gradient has run,
//                             the network carries what this rank sends of it,
//                             one after another; the update waits for all
//   all-gather (zero 0 to 2)  after the update the network brings back what
//                             this rank receives of the averages or updated
//                             parameters, and the host waits for it (spill's
//                             reducer overlaps zero 0's with backward, bucket
//                             by bucket: this charges it late)
// The network sends and receives at once (an adapter each way); copies
// between host and device memory on either side are not charged.
// On an inline-compute device (the CPU) compute runs on the host thread, so
// every compute wait is a host wait; on a GPU-like device the host enqueues
// and runs ahead until it waits for an event. Decisions never depend on
// time (plans equal runs), so replaying the log is exact up to the costs.
#ifndef SPILL_MEMORY_SIM_TIMELINE_H_
#define SPILL_MEMORY_SIM_TIMELINE_H_

#include <array>
#include <string>
#include <vector>

#include "framework/schedule/network_view.h"
#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/device_profile.h"

namespace spill {

enum class Lane { kCompute, kToDevice, kToHost, kHost, kNetwork };
const char* LaneName(Lane lane);
constexpr Lane kLanes[] = {Lane::kCompute, Lane::kToDevice, Lane::kToHost, Lane::kHost,
                           Lane::kNetwork};
inline bool IsCopyLane(Lane lane) { return lane == Lane::kToDevice || lane == Lane::kToHost; }

struct TimelineSlice {
  Lane lane = Lane::kCompute;
  std::string name;      // "conv1 forward", "offload conv1", "wait for conv1"
  std::string category;  // forward, backward, recompute, update, offload,
                         // prefetch, compact, wait
  double start = 0;      // seconds from the iteration's start
  double duration = 0;
  int step = -1;
  size_t bytes = 0;  // copies and compaction
};

using DeviceBytes = std::array<size_t, kNumCategories>;

struct MemorySample {
  double time = 0;
  DeviceBytes device{};  // in use per category
  size_t host = 0;       // offloaded copies in host memory
};

struct Timeline {
  std::string title;
  std::vector<TimelineSlice> slices;
  std::vector<MemorySample> memory;  // after each change, in time order
  double seconds = 0;                // the iteration, until every lane is idle
};

// Time accounting of a timeline.
struct TimelineSummary {
  double iteration_seconds = 0;
  double compute_seconds = 0;         // compute lane busy
  double copy_seconds = 0;            // either copy queue busy
  double to_device_seconds = 0;       // the host-to-device queue busy
  double to_host_seconds = 0;         // the device-to-host queue busy
  double duplex_seconds = 0;          // both copy queues busy at once
  double hidden_copy_seconds = 0;     // copy time while compute was busy
  double compute_wait_seconds = 0;    // compute waiting for copies
  double host_wait_seconds = 0;       // the host blocked on copies (or on compute before unmaps)
  double map_seconds = 0;             // the host mapping and unmapping chunks (va)
  double network_seconds = 0;         // the network between ranks busy (either way)
  double hidden_network_seconds = 0;  // of which while compute was busy
  // Copy time hidden under compute / all copy time (1 without copies).
  double overlap() const { return copy_seconds > 0 ? hidden_copy_seconds / copy_seconds : 1; }
};
TimelineSummary Summarize(const Timeline& timeline);

// Device bytes in use before the first event of `events` (persistent
// tensors, and every transient one in modes without liveness), from the
// first step's record.
DeviceBytes BaseDeviceBytes(const MemoryLog& log, const std::vector<MemoryEvent>& events);

// Memory samples for `events` at `times` (one per event), starting from
// `base`. Host bytes: a tensor's host copy exists from its first offload
// until it is released or dropped.
std::vector<MemorySample> MemorySamples(const std::vector<MemoryEvent>& events,
                                        const std::vector<double>& times, const DeviceBytes& base);

// Replays one iteration's `events` (MemoryOptions::record_events) under
// `costs` and `profile`. `base` as BaseDeviceBytes gives it.
Timeline SimulateIteration(const NetworkView& view, const std::vector<MemoryEvent>& events,
                           const IterationCosts& costs, const DeviceProfile& profile,
                           const DeviceBytes& base);

}  // namespace spill

#endif  // SPILL_MEMORY_SIM_TIMELINE_H_
