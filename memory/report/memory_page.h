// The memory page: one self-contained HTML file (no server, no network, one
// embedded script) that shows an iteration's device memory, for `plan
// --html` (every mode planned), `train --html` (the measured iteration) and
// `eval --html`:
//   * the memory curve per step, stacked by category, one tab per mode and
//     an overlay of every mode, with the budget;
//   * the address-space map: every block a rectangle over (step span x
//     offset range), coloured by category, holes visible, compaction moves
//     drawn; hovering names the tensor, its bytes, producer and readers and
//     the events that placed and evicted it;
//   * a step's details on click: what is live, what moves (offload,
//     prefetch, drop, rebuild, stream, compaction) and the algorithms and
//     workspace chosen;
//   * a timeline's compute, copy and host lanes on the same step axis (a
//     simulated one from --device-profile, or a measured one);
//   * a comparison table of the modes.
//
// Presentation only: it takes plain data (the schedule, per-step records,
// the event log, a timeline) and decides nothing. The data travel as one
// JSON document (nlohmann-json) in compact columns - string tables, tensor
// and layer names front-coded, sizes in KiB, deltas where values creep - so
// the 2,500-unit ResNet's page stays a few MB; the script
// (memory/report/page/*.js, plain, joined at build time) decodes them, and
// aggregates blocks smaller than a pixel when zoomed out.
#ifndef SPILL_MEMORY_REPORT_MEMORY_PAGE_H_
#define SPILL_MEMORY_REPORT_MEMORY_PAGE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "memory/sim/timeline.h"

namespace spill {

// One mode's iteration.
struct PageMode {
  std::string mode;       // "superneurons"
  std::string allocator;  // "first_fit"
  size_t budget = 0;      // the device budget; 0: none to draw
  bool fits = true;
  std::string failure;  // why it did not fit
  // Per-step records and the event log of the same iteration (events from
  // MemoryOptions::record_events); both may be null when it did not fit.
  const MemoryLog* log = nullptr;
  const std::vector<MemoryEvent>* events = nullptr;
  size_t footprint = 0;  // the allocator's: what a budget must cover
  int64_t recomputations = 0;
  const Timeline* timeline = nullptr;  // simulated or measured; may be null
};

// A planned mode (`timeline` may be null). The plan's events must have been
// recorded (MemoryOptions::record_events).
PageMode PlannedPageMode(const std::string& mode, const MemoryOptions& options,
                         const MemoryPlan& plan, const Timeline* timeline);
// A run's last iteration: the runtime's log and events, its allocator's
// footprint.
PageMode RunPageMode(const MemoryOptions& options, const MemoryLog& log,
                     const std::vector<MemoryEvent>& events, size_t footprint,
                     const Timeline* timeline);

// What the iteration belongs to.
struct PageSubject {
  std::string title;   // "resnet50, batch 32"
  std::string origin;  // "planned from shapes", "measured in training"
  const Schedule* schedule = nullptr;
  std::vector<std::string> layer_names;
};

class MemoryPage {
 public:
  explicit MemoryPage(const PageSubject& subject);
  // Encodes `mode` at once: its log, events and timeline may go afterwards.
  void AddMode(const PageMode& mode);
  std::string Html() const;
  // The embedded data alone (for tests).
  const nlohmann::json& data() const { return data_; }

 private:
  const Schedule& schedule_;
  std::vector<std::string> layer_names_;
  nlohmann::json data_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_MEMORY_PAGE_H_
