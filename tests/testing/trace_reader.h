// Reads a Chrome trace-event file (memory/sim/trace_json.h) back for tests:
// its tracks, its slices counted per track and category, and its counters.
#ifndef SPILL_TESTS_TESTING_TRACE_READER_H_
#define SPILL_TESTS_TESTING_TRACE_READER_H_

#include <map>
#include <set>
#include <string>
#include <utility>

#include "tests/testing/json_reader.h"

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
  JsonValue other;              // otherData

  int Slices(const std::string& track, const std::string& category) const {
    auto it = slices.find({track, category});
    return it == slices.end() ? 0 : it->second;
  }
};

inline TraceContents ReadTrace(const std::string& text) {
  TraceContents t;
  JsonValue root;
  if (!JsonReader::Parse(text, &root, &t.error)) return t;
  if (root.kind != JsonValue::Kind::kObject || !root.Has("traceEvents") ||
      root["traceEvents"].kind != JsonValue::Kind::kArray) {
    t.error = "no traceEvents array";
    return t;
  }
  if (root.Has("otherData")) t.other = root["otherData"];
  for (const JsonValue& e : root["traceEvents"].array) {
    const std::string ph = e["ph"].string;
    if (ph == "M" && e["name"].string == "thread_name") {
      t.tracks[static_cast<int>(e["tid"].number)] = e["args"]["name"].string;
    }
  }
  for (const JsonValue& e : root["traceEvents"].array) {
    const std::string ph = e["ph"].string;
    if (ph == "X") {
      const int tid = static_cast<int>(e["tid"].number);
      t.slices[{t.tracks[tid], e["cat"].string}]++;
      const double ts = e["ts"].number, dur = e["dur"].number;
      if (ts < 0 || dur < 0) t.durations_valid = false;
      t.last_end_us = std::max(t.last_end_us, ts + dur);
    } else if (ph == "C") {
      t.counter_samples++;
      for (const auto& [series, value] : e["args"].object)
        t.counters[e["name"].string].insert(series);
    }
  }
  t.valid = true;
  return t;
}

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_TRACE_READER_H_
