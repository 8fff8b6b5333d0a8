#include "memory/report/step_records.h"

#include <algorithm>
#include <sstream>

namespace spill {
namespace {

using Json = nlohmann::ordered_json;

const char* PassName(Pass pass) { return pass == Pass::kForward ? "forward" : "backward"; }

}  // namespace

Json StepRecordJson(const StepRecord& r, const Schedule& schedule,
                    const std::vector<std::string>& layer_names) {
  Json in_use = Json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    in_use[MemoryCategoryName(static_cast<MemoryCategory>(c))] = r.in_use[c];
  }
  Json line = {{"step", r.step + 1},
               {"pass", PassName(r.pass)},
               {"layer", layer_names[r.layer]},
               {"in_use", in_use},
               {"total", r.total},
               {"peak", r.peak},
               {"live_tensors", r.live_tensors},
               {"to_host", r.to_host},
               {"to_device", r.to_device},
               {"on_demand", r.on_demand},
               {"recomputed", r.recomputed},
               {"compacted", r.compacted},
               {"workspace", r.workspace},
               {"algorithm", r.algorithm},
               {"slice_images", r.slice_images},
               {"stream_buffers", r.stream_buffers}};
  if (!r.live.empty()) {
    Json live = Json::array();
    for (TensorId t : r.live) live.push_back(schedule.tensors[t].name);
    line["live"] = live;
  }
  return line;
}

std::string MemoryLogCsv(const MemoryLog& log, const Schedule& schedule,
                         const std::vector<std::string>& layer_names) {
  std::ostringstream out;
  out << "step,pass,layer";
  for (int c = 0; c < kNumCategories; ++c) {
    std::string name = MemoryCategoryName(static_cast<MemoryCategory>(c));
    std::replace(name.begin(), name.end(), ' ', '_');
    out << "," << name;
  }
  out << ",total,peak,live_tensors,to_host,to_device,recomputed,compacted,workspace,algorithm,"
         "slice_images,stream_buffers";
  if (!log.steps.empty() && !log.steps[0].live.empty()) out << ",live";
  out << "\n";
  for (const StepRecord& r : log.steps) {
    out << r.step + 1 << "," << PassName(r.pass) << "," << layer_names[r.layer];
    for (size_t bytes : r.in_use) out << "," << bytes;
    out << "," << r.total << "," << r.peak << "," << r.live_tensors << "," << r.to_host << ","
        << r.to_device << "," << r.recomputed << "," << r.compacted << "," << r.workspace << ","
        << r.algorithm << "," << r.slice_images << "," << r.stream_buffers;
    if (!r.live.empty()) {
      out << ",";
      for (size_t i = 0; i < r.live.size(); ++i)
        out << (i ? " " : "") << schedule.tensors[r.live[i]].name;
    }
    out << "\n";
  }
  return out.str();
}

std::string MemoryLogJson(const MemoryLog& log, const Schedule& schedule,
                          const std::vector<std::string>& layer_names) {
  std::string out;
  for (const StepRecord& r : log.steps) {
    out += StepRecordJson(r, schedule, layer_names)
               .dump(-1, ' ', false, Json::error_handler_t::replace) +
           "\n";
  }
  return out;
}

}  // namespace spill
