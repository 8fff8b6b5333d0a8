#include "memory/sim/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

namespace spill {
namespace {

const char kUpdateKey[] = "<update>";
const char kHostStepKey[] = "<host step>";

const char* PassName(Pass pass) { return pass == Pass::kForward ? "forward" : "backward"; }

// The candidate chosen for each operation of (layer, pass), from the
// space-separated names a step record lists (operations without an
// algorithm are not listed); -1 where none matches.
std::vector<int> ParseChoice(const NetworkView& view, int layer, Pass pass,
                             const std::string& choice) {
  std::istringstream in(choice);
  std::vector<std::string> names;
  for (std::string name; in >> name;) names.push_back(name);
  const int ops = view.algorithms ? view.algorithms->NumOps(layer, pass) : 0;
  std::vector<int> chosen(ops, -1);
  size_t next = 0;
  for (int op = 0; op < ops && next < names.size(); ++op) {
    const auto candidates = view.algorithms->Candidates(layer, pass, op, view.batch);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].name == names[next]) {
        chosen[op] = static_cast<int>(i);
        ++next;
        break;
      }
    }
  }
  return chosen;
}

// Seconds of the chosen candidates (and of the fastest ones) as the
// catalog times them.
void AlgorithmSeconds(const NetworkView& view, int layer, Pass pass, const std::string& choice,
                      double* chosen_seconds, double* fastest_seconds) {
  *chosen_seconds = *fastest_seconds = 0;
  const std::vector<int> chosen = ParseChoice(view, layer, pass, choice);
  for (int op = 0; op < static_cast<int>(chosen.size()); ++op) {
    const auto candidates = view.algorithms->Candidates(layer, pass, op, view.batch);
    if (candidates.empty()) continue;
    double fastest = std::numeric_limits<double>::max();
    for (const auto& c : candidates) fastest = std::min(fastest, c.seconds);
    *fastest_seconds += fastest;
    *chosen_seconds += chosen[op] >= 0 ? candidates[chosen[op]].seconds : fastest;
  }
}

// Bytes the solver reads and writes per update: parameters and solver state
// read and written, gradients read.
double UpdateBytes(const Schedule& schedule, int* tensors) {
  double bytes = 0;
  *tensors = 0;
  for (const TensorInfo& t : schedule.tensors) {
    if (t.kind == TensorKind::kParamGrad) {
      bytes += t.bytes;
      ++*tensors;
    } else if (t.kind == TensorKind::kParam || t.kind == TensorKind::kOptimizerState) {
      bytes += 2.0 * t.bytes;
    }
  }
  return bytes;
}

}  // namespace

void StepTimes::Add(const std::string& layer, Pass pass, const std::string& algorithms,
                    double seconds) {
  Sum& s = samples_[Key(layer, static_cast<int>(pass), algorithms)];
  s.seconds += seconds;
  s.count++;
}

void StepTimes::AddUpdate(double seconds) { Add(kUpdateKey, Pass::kForward, "", seconds); }

void StepTimes::AddHostStep(double seconds) { Add(kHostStepKey, Pass::kForward, "", seconds); }

double StepTimes::Find(const std::string& layer, Pass pass, const std::string& algorithms) const {
  auto it = samples_.find(Key(layer, static_cast<int>(pass), algorithms));
  return it == samples_.end() ? -1 : it->second.seconds / it->second.count;
}

bool StepTimes::FindAny(const std::string& layer, Pass pass, std::string* algorithms,
                        double* seconds) const {
  auto it = samples_.lower_bound(Key(layer, static_cast<int>(pass), ""));
  if (it == samples_.end() || std::get<0>(it->first) != layer ||
      std::get<1>(it->first) != static_cast<int>(pass)) {
    return false;
  }
  *algorithms = std::get<2>(it->first);
  *seconds = it->second.seconds / it->second.count;
  return true;
}

void StepTimes::Replace(const StepTimes& newer) {
  for (const auto& [key, sum] : newer.samples_) samples_[key] = sum;
}

double StepTimes::update_seconds() const { return Find(kUpdateKey, Pass::kForward, ""); }

double StepTimes::host_step_seconds() const { return Find(kHostStepKey, Pass::kForward, ""); }

StatusOr<StepTimes> StepTimes::Load(const std::string& path, const std::string& signature) {
  StepTimes times;
  std::ifstream in(path);
  if (!in) return times;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::vector<std::string> fields;
    std::istringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
    if (fields.size() != 6) {
      return InvalidArgument(path + ":" + std::to_string(number) +
                             ": expected 6 tab-separated fields (signature, layer, pass, "
                             "algorithms, seconds, samples), got " +
                             std::to_string(fields.size()));
    }
    if (fields[0] != signature) continue;
    char* end = nullptr;
    const double seconds = std::strtod(fields[4].c_str(), &end);
    const long count = std::strtol(fields[5].c_str(), nullptr, 10);
    if (*end != '\0' || seconds < 0 || count < 1 ||
        (fields[2] != "forward" && fields[2] != "backward")) {
      return InvalidArgument(path + ":" + std::to_string(number) +
                             ": expected a pass (forward or backward), seconds >= 0 and a "
                             "positive sample count");
    }
    Sum& s = times.samples_[Key(fields[1], fields[2] == "forward" ? 0 : 1, fields[3])];
    s.seconds = seconds * count;
    s.count = static_cast<int>(count);
  }
  return times;
}

Status StepTimes::Save(const std::string& path, const std::string& signature) const {
  std::vector<std::string> kept;
  {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.compare(0, signature.size() + 1, signature + "\t") != 0) kept.push_back(line);
    }
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return IoError("cannot write the step time cache '" + path + "'");
  for (const std::string& line : kept) out << line << "\n";
  out << std::setprecision(std::numeric_limits<double>::max_digits10);
  for (const auto& [key, sum] : samples_) {
    out << signature << "\t" << std::get<0>(key) << "\t"
        << PassName(static_cast<Pass>(std::get<1>(key))) << "\t" << std::get<2>(key) << "\t"
        << sum.seconds / sum.count << "\t" << sum.count << "\n";
  }
  return out ? Status::Ok() : IoError("cannot write the step time cache '" + path + "'");
}

std::string NetworkSignature(const NetworkView& view) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  auto mix = [&hash](const std::string& text) {
    for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
    hash = (hash ^ 0xff) * 1099511628211ull;
  };
  for (const LayerSummary& l : view.layers) mix(l.name + "/" + l.type);
  for (const TensorInfo& t : view.schedule->tensors) {
    if (t.kind == TensorKind::kOptimizerState) continue;
    mix(t.name + "=" + t.shape.ToString() + " " + DTypeName(t.dtype) + " " + LayoutName(t.layout));
  }
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string IterationCosts::Source() const {
  if (modelled == 0) return "measured";
  if (measured == 0) return "model";
  return "measured (" + std::to_string(measured) + " steps) and model (" +
         std::to_string(modelled) + " steps)";
}

double RooflineSeconds(const LayerWork& work, const DeviceProfile& profile) {
  double seconds = 0;
  const double flops = profile.achieved_flops(work.arithmetic);
  if (flops > 0) seconds = work.flops / flops;
  if (profile.achieved_memory_bandwidth() > 0) {
    seconds = std::max(seconds, work.bytes / profile.achieved_memory_bandwidth());
  }
  if (work.host_bytes > 0 && profile.link.h2d_bytes_per_second > 0) {
    seconds += profile.link.latency_seconds + work.host_bytes / profile.link.h2d_bytes_per_second;
  }
  return seconds + profile.kernel_seconds;
}

namespace {

// Seconds of (layer, pass) under the algorithms `choice`, measured where
// possible; `*measured` says which.
double StepSeconds(const NetworkView& view, int layer, Pass pass, const std::string& choice,
                   const DeviceProfile& profile, const StepTimes* times, bool* measured) {
  const std::string& name = view.layer(layer).name;
  double chosen = 0, fastest = 0;
  if (times != nullptr) {
    const double seconds = times->Find(name, pass, choice);
    *measured = true;
    if (seconds >= 0) return seconds;
    std::string other;
    double other_seconds;
    if (times->FindAny(name, pass, &other, &other_seconds)) {
      // The same step under other algorithms: adjust by their timed difference.
      double other_chosen;
      AlgorithmSeconds(view, layer, pass, choice, &chosen, &fastest);
      AlgorithmSeconds(view, layer, pass, other, &other_chosen, &fastest);
      return std::max(0.0, other_seconds - other_chosen + chosen);
    }
  }
  *measured = false;
  const LayerSummary& l = view.layer(layer);
  const double roofline =
      RooflineSeconds(pass == Pass::kForward ? l.forward_work : l.backward_work, profile);
  AlgorithmSeconds(view, layer, pass, choice, &chosen, &fastest);
  return fastest > 0 ? roofline * chosen / fastest : roofline;
}

}  // namespace

IterationCosts ModelCosts(const NetworkView& view, const MemoryLog& log,
                          const DeviceProfile& profile, const StepTimes* measured) {
  const Schedule& schedule = *view.schedule;
  const int steps = static_cast<int>(schedule.steps.size());
  IterationCosts costs;
  costs.step_seconds.assign(steps, 0);
  costs.recompute_seconds.assign(schedule.num_layers(), 0);
  costs.sync_after.assign(steps, false);
  std::vector<std::string> choice(steps);
  for (const StepRecord& r : log.steps) choice[r.step] = r.algorithm;
  for (const Step& step : schedule.steps) {
    if (!step.active) continue;
    bool was_measured = false;
    costs.step_seconds[step.index] = StepSeconds(view, step.layer, step.pass, choice[step.index],
                                                 profile, measured, &was_measured);
    (was_measured ? costs.measured : costs.modelled)++;
    if (step.pass == Pass::kForward) {
      costs.recompute_seconds[step.layer] = costs.step_seconds[step.index];
      costs.sync_after[step.index] = view.layer(step.layer).is_loss;
    }
  }
  const double host_step = measured ? measured->host_step_seconds() : -1;
  costs.host_step_seconds = std::max(0.0, host_step);
  const double update = measured ? measured->update_seconds() : -1;
  if (update >= 0) {
    costs.update_seconds = update;
  } else {
    int kernels = 0;
    const double bytes = UpdateBytes(schedule, &kernels);
    const double bandwidth = profile.achieved_memory_bandwidth();
    costs.update_seconds =
        (bandwidth > 0 ? bytes / bandwidth : 0) + kernels * profile.kernel_seconds;
  }
  return costs;
}

}  // namespace spill
