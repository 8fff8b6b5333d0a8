#include "memory/sim/trace_json.h"

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

namespace spill {
namespace {

constexpr int kProcess = 1;
constexpr double kMicrosecondsPerSecond = 1e6;

// One trace event. `args` values are JSON already.
struct TraceEvent {
  std::string name;
  std::string category;
  char phase = 'X';  // X: complete slice, C: counter, M: metadata
  double ts = 0;     // microseconds
  double dur = 0;
  int tid = 0;
  std::vector<std::pair<std::string, std::string>> args;
};

using JsonFields = std::vector<std::pair<std::string, std::string>>;

// JSON formatting, all of it (a JSON library can replace these three).
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", c);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Number(double value, const char* format = "%.3f") {
  if (!std::isfinite(value)) return "null";
  char text[40];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string Object(const JsonFields& fields) {
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    out += (i ? "," : "") + Quoted(fields[i].first) + ":" + fields[i].second;
  }
  return out + "}";
}

std::string EventJson(const TraceEvent& e) {
  JsonFields fields = {{"name", Quoted(e.name)},
                       {"ph", Quoted(std::string(1, e.phase))},
                       {"pid", std::to_string(kProcess)}};
  if (e.phase != 'C') fields.push_back({"tid", std::to_string(e.tid)});
  if (!e.category.empty()) fields.push_back({"cat", Quoted(e.category)});
  if (e.phase != 'M') fields.push_back({"ts", Number(e.ts)});
  if (e.phase == 'X') fields.push_back({"dur", Number(e.dur)});
  fields.push_back({"args", Object(e.args)});
  return Object(fields);
}

int Track(Lane lane) { return static_cast<int>(lane) + 1; }

std::vector<TraceEvent> Events(const Timeline& timeline) {
  std::vector<TraceEvent> events;
  events.push_back({"process_name", "", 'M', 0, 0, 0, {{"name", Quoted(timeline.title)}}});
  for (Lane lane : {Lane::kCompute, Lane::kCopy, Lane::kHost}) {
    events.push_back(
        {"thread_name", "", 'M', 0, 0, Track(lane), {{"name", Quoted(LaneName(lane))}}});
    events.push_back({"thread_sort_index",
                      "",
                      'M',
                      0,
                      0,
                      Track(lane),
                      {{"sort_index", std::to_string(Track(lane))}}});
  }
  for (const TimelineSlice& s : timeline.slices) {
    TraceEvent e{s.name,
                 s.category,
                 'X',
                 s.start * kMicrosecondsPerSecond,
                 s.duration * kMicrosecondsPerSecond,
                 Track(s.lane),
                 {}};
    if (s.step >= 0) e.args.push_back({"step", std::to_string(s.step + 1)});
    if (s.bytes > 0) e.args.push_back({"bytes", std::to_string(s.bytes)});
    events.push_back(std::move(e));
  }
  for (const MemorySample& m : timeline.memory) {
    TraceEvent device{
        kDeviceMemoryCounter, "memory", 'C', m.time * kMicrosecondsPerSecond, 0, 0, {}};
    for (int c = 0; c < kNumCategories; ++c) {
      device.args.push_back(
          {MemoryCategoryName(static_cast<MemoryCategory>(c)), std::to_string(m.device[c])});
    }
    events.push_back(std::move(device));
    events.push_back({kHostMemoryCounter,
                      "memory",
                      'C',
                      m.time * kMicrosecondsPerSecond,
                      0,
                      0,
                      {{"offloaded", std::to_string(m.host)}}});
  }
  return events;
}

}  // namespace

std::string TimelineTraceJson(const Timeline& timeline) {
  const TimelineSummary s = Summarize(timeline);
  std::string out = "{\"traceEvents\":[\n";
  const std::vector<TraceEvent> events = Events(timeline);
  for (size_t i = 0; i < events.size(); ++i) {
    out += EventJson(events[i]) + (i + 1 < events.size() ? ",\n" : "\n");
  }
  const char* seconds = "%.9g";
  const JsonFields summary = {{"title", Quoted(timeline.title)},
                              {"iteration_seconds", Number(s.iteration_seconds, seconds)},
                              {"compute_seconds", Number(s.compute_seconds, seconds)},
                              {"copy_seconds", Number(s.copy_seconds, seconds)},
                              {"hidden_copy_seconds", Number(s.hidden_copy_seconds, seconds)},
                              {"compute_wait_seconds", Number(s.compute_wait_seconds, seconds)},
                              {"host_wait_seconds", Number(s.host_wait_seconds, seconds)}};
  return out + "],\"displayTimeUnit\":\"ms\",\"otherData\":" + Object(summary) + "}\n";
}

}  // namespace spill
