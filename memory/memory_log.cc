#include "memory/memory_log.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace spill {
namespace {

const char* PassName(Pass pass) { return pass == Pass::kForward ? "forward" : "backward"; }

}  // namespace

void MemoryLog::Clear() {
  steps.clear();
  peak = 0;
  peak_step = -1;
  peak_live.clear();
  to_host = to_device = compacted = host_peak = 0;
  recomputed = streamed = 0;
}

void MemoryLog::Finish() {
  peak = 0;
  host_peak = 0;
  overshoot = 0;
  peak_step = -1;
  to_host = to_device = compacted = 0;
  recomputed = streamed = 0;
  for (const StepRecord& r : steps) {
    compacted += r.compacted;
    if (peak_step < 0 || r.peak > peak) {
      peak = r.peak;
      peak_step = r.step;
    }
    to_host += r.to_host;
    host_peak = std::max(host_peak, r.host);
    overshoot = std::max(overshoot, r.overshoot);
    to_device += r.to_device;
    recomputed += r.recomputed;
    streamed += r.slice_images > 0;
  }
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
         "slice_images";
  if (!log.steps.empty() && !log.steps[0].live.empty()) out << ",live";
  out << "\n";
  for (const StepRecord& r : log.steps) {
    out << r.step + 1 << "," << PassName(r.pass) << "," << layer_names[r.layer];
    for (size_t bytes : r.in_use) out << "," << bytes;
    out << "," << r.total << "," << r.peak << "," << r.live_tensors << "," << r.to_host << ","
        << r.to_device << "," << r.recomputed << "," << r.compacted << "," << r.workspace << ","
        << r.algorithm << "," << r.slice_images;
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
  using Json = nlohmann::ordered_json;
  std::string out;
  for (const StepRecord& r : log.steps) {
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
                 {"recomputed", r.recomputed},
                 {"compacted", r.compacted},
                 {"workspace", r.workspace},
                 {"algorithm", r.algorithm},
                 {"slice_images", r.slice_images}};
    if (!r.live.empty()) {
      Json live = Json::array();
      for (TensorId t : r.live) live.push_back(schedule.tensors[t].name);
      line["live"] = live;
    }
    out += line.dump() + "\n";
  }
  return out;
}

std::string MemoryPlotSvg(const std::vector<MemoryLog>& logs, const std::string& title) {
  const double width = 1000, height = 480, left = 80, right = 270, top = 40, bottom = 50;
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  size_t max_steps = 1;
  double max_bytes = 1;
  for (const auto& log : logs) {
    max_steps = std::max(max_steps, log.steps.size());
    for (const auto& r : log.steps) max_bytes = std::max(max_bytes, static_cast<double>(r.peak));
  }
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  auto x_of = [&](double step) {
    return left + plot_w * step / std::max<double>(1, max_steps - 1);
  };
  auto y_of = [&](double bytes) { return top + plot_h * (1 - bytes / (max_bytes * 1.05)); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
      << title << "</text>\n";
  // Axes, ticks and the forward/backward divider.
  svg << "<line x1=\"" << left << "\" y1=\"" << top + plot_h << "\" x2=\"" << left + plot_w
      << "\" y2=\"" << top + plot_h << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << top + plot_h << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    double bytes = max_bytes * 1.05 * i / 5;
    char label[32];
    std::snprintf(label, sizeof(label), "%.0f", bytes / 1048576.0);
    svg << "<text x=\"" << left - 6 << "\" y=\"" << y_of(bytes) + 4 << "\" text-anchor=\"end\">"
        << label << "</text>\n";
  }
  svg << "<text x=\"20\" y=\"" << top + plot_h / 2 << "\" transform=\"rotate(-90 20 "
      << top + plot_h / 2 << ")\" text-anchor=\"middle\">device memory (MiB)</text>\n"
      << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << height - 12
      << "\" text-anchor=\"middle\">step (forward 1..N, backward N+1..2N)</text>\n";
  if (max_steps > 1) {
    double mid = x_of((max_steps - 1) / 2.0);
    svg << "<line x1=\"" << mid << "\" y1=\"" << top << "\" x2=\"" << mid << "\" y2=\""
        << top + plot_h << "\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n";
  }
  for (size_t k = 0; k < logs.size(); ++k) {
    const char* color = colors[k % 6];
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\" points=\"";
    for (const auto& r : logs[k].steps) svg << x_of(r.step) << "," << y_of(r.peak) << " ";
    svg << "\"/>\n";
    double ly = top + 16 + 20 * k;
    char peak[48];
    std::snprintf(peak, sizeof(peak), "%.1f MiB", logs[k].peak / 1048576.0);
    svg << "<line x1=\"" << left + plot_w + 12 << "\" y1=\"" << ly - 4 << "\" x2=\""
        << left + plot_w + 32 << "\" y2=\"" << ly - 4 << "\" stroke=\"" << color
        << "\" stroke-width=\"2\"/>\n<text x=\"" << left + plot_w + 36 << "\" y=\"" << ly << "\">"
        << logs[k].mode << " " << peak << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace spill
