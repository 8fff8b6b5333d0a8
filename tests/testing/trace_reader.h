// Reads a Chrome trace-event file (memory/report/trace_json.h) back for
// tests: its tracks, its slices counted per track and category, and its
// counters.
#ifndef SPILL_TESTS_TESTING_TRACE_READER_H_
#define SPILL_TESTS_TESTING_TRACE_READER_H_

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

namespace spill {
namespace testing {

struct TraceContents {
  bool valid = false;
  std::string error;
  std::map<int, std::string> tracks;                          // tid -> thread name
  std::map<std::pair<std::string, std::string>, int> slices;  // (track, category) -> count
  std::map<std::string, std::set<std::string>> counters;      // name -> series
  int counter_samples = 0;
  double last_end_us = 0;       // latest end of any slice
  bool durations_valid = true;  // every slice has ts >= 0 and dur >= 0
  nlohmann::json other;         // otherData

  int Slices(const std::string& track, const std::string& category) const {
    auto it = slices.find({track, category});
    return it == slices.end() ? 0 : it->second;
  }
};

inline TraceContents ReadTrace(const std::string& text) {
  TraceContents t;
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
  if (root.is_discarded()) {
    t.error = "not JSON";
    return t;
  }
  if (!root.is_object() || !root.contains("traceEvents") || !root["traceEvents"].is_array()) {
    t.error = "no traceEvents array";
    return t;
  }
  t.other = root.value("otherData", nlohmann::json::object());
  const nlohmann::json& events = root["traceEvents"];
  for (const nlohmann::json& e : events) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      t.tracks[e.value("tid", 0)] = e["args"].value("name", "");
    }
  }
  for (const nlohmann::json& e : events) {
    const std::string ph = e.value("ph", "");
    if (ph == "X") {
      t.slices[{t.tracks[e.value("tid", 0)], e.value("cat", "")}]++;
      const double ts = e.value("ts", -1.0), dur = e.value("dur", -1.0);
      if (ts < 0 || dur < 0) t.durations_valid = false;
      t.last_end_us = std::max(t.last_end_us, ts + dur);
    } else if (ph == "C") {
      t.counter_samples++;
      for (const auto& [series, value] : e["args"].items()) {
        t.counters[e.value("name", "")].insert(series);
      }
    }
  }
  t.valid = true;
  return t;
}

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_TRACE_READER_H_
