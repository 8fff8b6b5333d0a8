// Per-step memory records (memory_log.h) for people and programs: CSV and
// JSON lines (`plan --csv`, `train --memory-log`), and the one JSON form of
// a step that every tool writes (`plan --json`'s steps use it too).
#ifndef SPILL_MEMORY_REPORT_STEP_RECORDS_H_
#define SPILL_MEMORY_REPORT_STEP_RECORDS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "framework/schedule/schedule.h"
#include "memory/memory_log.h"

namespace spill {

// One step: its number (1-based), pass, layer, bytes in use by category,
// total, peak, live tensors (and their names, where recorded), bytes moved,
// recomputations, compaction, workspace, algorithm and slice size.
nlohmann::ordered_json StepRecordJson(const StepRecord& record, const Schedule& schedule,
                                      const std::vector<std::string>& layer_names);

// Every step, as CSV (one row per step) or JSON lines.
std::string MemoryLogCsv(const MemoryLog& log, const Schedule& schedule,
                         const std::vector<std::string>& layer_names);
std::string MemoryLogJson(const MemoryLog& log, const Schedule& schedule,
                          const std::vector<std::string>& layer_names);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_STEP_RECORDS_H_
