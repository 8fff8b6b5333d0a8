#include "memory/report/trace_json.h"

#include <nlohmann/json.hpp>

namespace spill {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kProcess = 1;
constexpr double kMicrosecondsPerSecond = 1e6;

int Track(Lane lane) { return static_cast<int>(lane) + 1; }

Json Metadata(const char* name, int tid, Json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", kProcess}, {"tid", tid}, {"args", std::move(args)}};
}

Json Slice(const TimelineSlice& s) {
  Json args = Json::object();
  if (s.step >= 0) args["step"] = s.step + 1;
  if (s.bytes > 0) args["bytes"] = s.bytes;
  Json e = {{"name", s.name}, {"ph", "X"}, {"pid", kProcess}, {"tid", Track(s.lane)}};
  if (!s.category.empty()) e["cat"] = s.category;
  e["ts"] = s.start * kMicrosecondsPerSecond;
  e["dur"] = s.duration * kMicrosecondsPerSecond;
  e["args"] = std::move(args);
  return e;
}

Json Counter(const char* name, double time, Json args) {
  return {{"name", name},
          {"ph", "C"},
          {"pid", kProcess},
          {"cat", "memory"},
          {"ts", time * kMicrosecondsPerSecond},
          {"args", std::move(args)}};
}

Json Events(const Timeline& timeline) {
  Json events = Json::array();
  events.push_back(Metadata("process_name", 0, {{"name", timeline.title}}));
  for (Lane lane : kLanes) {
    events.push_back(Metadata("thread_name", Track(lane), {{"name", LaneName(lane)}}));
    events.push_back(Metadata("thread_sort_index", Track(lane), {{"sort_index", Track(lane)}}));
  }
  for (const TimelineSlice& s : timeline.slices) events.push_back(Slice(s));
  for (const MemorySample& m : timeline.memory) {
    Json device = Json::object();
    for (int c = 0; c < kNumCategories; ++c) {
      device[MemoryCategoryName(static_cast<MemoryCategory>(c))] = m.device[c];
    }
    events.push_back(Counter(kDeviceMemoryCounter, m.time, std::move(device)));
    events.push_back(Counter(kHostMemoryCounter, m.time, {{"offloaded", m.host}}));
  }
  return events;
}

}  // namespace

std::string TimelineTraceJson(const Timeline& timeline) {
  const TimelineSummary s = Summarize(timeline);
  const Json summary = {{"title", timeline.title},
                        {"iteration_seconds", s.iteration_seconds},
                        {"compute_seconds", s.compute_seconds},
                        {"copy_seconds", s.copy_seconds},
                        {"to_device_seconds", s.to_device_seconds},
                        {"to_host_seconds", s.to_host_seconds},
                        {"duplex_seconds", s.duplex_seconds},
                        {"hidden_copy_seconds", s.hidden_copy_seconds},
                        {"compute_wait_seconds", s.compute_wait_seconds},
                        {"host_wait_seconds", s.host_wait_seconds}};
  const Json trace = {
      {"traceEvents", Events(timeline)}, {"displayTimeUnit", "ms"}, {"otherData", summary}};
  return trace.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace spill
