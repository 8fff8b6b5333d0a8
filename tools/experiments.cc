#include "tools/experiments.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "framework/device_registry.h"
#include "framework/executor.h"
#include "framework/initializer.h"
#include "framework/random.h"
#include "framework/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/allocators/allocator.h"
#include "memory/runtime.h"
#include "tools/timeline_tools.h"

namespace spill {
namespace {

// --window-budget search: 1x, 0.95x, ..., 0.30x.
constexpr double kWindowBudgetStep = 0.05;
constexpr int kWindowBudgetSteps = 15;

// Host memory this machine can give a run, from /proc/meminfo.
size_t AvailableHostBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  size_t value;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

}  // namespace

StatusOr<int64_t> LargestFitting(int64_t low, int64_t limit,
                                 const std::function<StatusOr<Probe>(int64_t)>& probe,
                                 int* probes) {
  SPILL_ASSIGN_OR_RETURN(Probe first, probe(low));
  ++*probes;
  if (!first.fits) return low - 1;
  int64_t good = low, bad = -1;
  for (int64_t x = low * 2; x <= limit; x *= 2) {  // find a failing upper bound
    SPILL_ASSIGN_OR_RETURN(Probe p, probe(x));
    ++*probes;
    if (!p.fits) {
      bad = x;
      break;
    }
    good = x;
  }
  if (bad < 0) {
    if (good == limit) return good;
    SPILL_ASSIGN_OR_RETURN(Probe p, probe(limit));
    ++*probes;
    if (p.fits) return limit;
    bad = limit;
  }
  while (bad - good > 1) {
    int64_t mid = good + (bad - good) / 2;
    SPILL_ASSIGN_OR_RETURN(Probe p, probe(mid));
    ++*probes;
    (p.fits ? good : bad) = mid;
  }
  return good;
}

std::string ExperimentOptions::Describe() const {
  std::string text = FormatBytes(static_cast<double>(memory.device_budget)) + " (host " +
                     FormatBytes(static_cast<double>(memory.host_budget)) + "), memory " +
                     memory.mode + ", " + memory.allocator;
  if (memory.allocator == "va") text += " " + FormatBytes(static_cast<double>(memory.chunk));
  if (!memory.compact) text += " without compaction";
  return text;
}

namespace {

// --allocator, --compact, --chunk.
Status ApplyPlacementFlags(const std::string& allocator, const std::string& compact,
                           const std::string& chunk, MemoryOptions* memory) {
  if (!allocator.empty()) {
    if (FindAllocator(allocator) == nullptr) {
      std::string known;
      for (const std::string& n : AllocatorNames()) known += (known.empty() ? "" : ", ") + n;
      return InvalidArgument("--allocator: unknown allocator '" + allocator + "'; known: " + known);
    }
    memory->allocator = allocator;
  }
  if (!compact.empty()) {
    if (compact != "true" && compact != "false") {
      return InvalidArgument("--compact needs true or false (got '" + compact + "')");
    }
    memory->compact = compact == "true";
  }
  if (!chunk.empty()) {
    auto bytes = ParseBytes(chunk);
    if (!bytes.ok()) return bytes.status().WithContext("--chunk");
    memory->chunk = *bytes;
  }
  return Status::Ok();
}

// --window, --window-budget (a size, a multiple, or "search").
Status ApplyWindowFlags(const std::string& window, const std::string& window_budget,
                        ExperimentOptions* o) {
  if (!window.empty()) {
    auto parsed = ParseSizeSetting(window);
    if (!parsed.ok()) return parsed.status().WithContext("--window");
    o->memory.window = *parsed;
  }
  if (window_budget == "search") {
    o->search_window_budget = true;
  } else if (!window_budget.empty()) {
    auto parsed = ParseSizeSetting(window_budget);
    if (!parsed.ok()) return parsed.status().WithContext("--window-budget");
    o->memory.window_budget = *parsed;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ExperimentOptions> ParseExperimentOptions(int argc, char** argv,
                                                   const std::string& default_model) {
  ExperimentOptions o;
  o.model = default_model;
  std::string budget = "12GiB", host = "64GiB", mode = "superneurons", workspace = "dynamic";
  std::string allocator, compact, chunk, window, window_budget;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      return o;
    }
    if (i + 1 >= argc) return InvalidArgument(a + " needs a value");
    const std::string v = argv[i + 1];
    if (a == "--config")
      o.model = v;
    else if (a == "--device")
      o.device = v;
    else if (a == "--device-memory")
      budget = v;
    else if (a == "--host-memory")
      host = v;
    else if (a == "--memory")
      mode = v;
    else if (a == "--workspace")
      workspace = v;
    else if (a == "--batch")
      o.batch = std::atoll(v.c_str());
    else if (a == "--size")
      o.size = std::atoll(v.c_str());
    else if (a == "--confirm")
      o.confirm = std::atoll(v.c_str());
    else if (a == "--allocator")
      allocator = v;
    else if (a == "--compact")
      compact = v;
    else if (a == "--chunk")
      chunk = v;
    else if (a == "--window")
      window = v;
    else if (a == "--window-budget")
      window_budget = v;
    else if (a == "--device-profile")
      o.device_profile = v;
    else if (a == "--set" && v.find('=') != std::string::npos) {
      o.sets[v.substr(0, v.find('='))] = YAML::Load(v.substr(v.find('=') + 1));
    } else {
      return InvalidArgument("unknown option '" + a + "'");
    }
  }
  if (o.model.empty()) return InvalidArgument("--config is required");
  if (o.batch < 1 || o.size < 1) return InvalidArgument("--batch and --size must be positive");
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, &o.memory));
  SPILL_ASSIGN_OR_RETURN(o.memory.device_budget, ParseBytes(budget));
  SPILL_ASSIGN_OR_RETURN(o.memory.host_budget, ParseBytes(host));
  SPILL_ASSIGN_OR_RETURN(o.memory.workspace, ParseWorkspacePolicy(workspace));
  SPILL_RETURN_IF_ERROR(ApplyPlacementFlags(allocator, compact, chunk, &o.memory));
  SPILL_RETURN_IF_ERROR(ApplyWindowFlags(window, window_budget, &o));
  SPILL_RETURN_IF_ERROR(LoadDeviceProfile(o.device_profile, 0).status());
  return o;
}

int StartExperiment(int argc, char** argv, const char* tool, const char* usage,
                    const std::string& default_model, ExperimentOptions* options) {
  auto parsed = ParseExperimentOptions(argc, argv, default_model);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n%s", tool, parsed.status().message().c_str(), usage);
    return 2;
  }
  if (parsed->help) {
    std::printf("%s", usage);
    return 0;
  }
  *options = std::move(*parsed);
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  return -1;
}

int ReportConfirmation(const StatusOr<Confirmation>& c, int64_t steps) {
  if (!c.ok()) {
    std::printf("confirmation failed: %s\n", c.status().message().c_str());
    return 1;
  }
  if (!c->ran) {
    std::printf("not confirmed by training: %s\n", c->reason.c_str());
  } else {
    std::printf("confirmed: trained %ld steps, %.1f s per step, peak %s, last loss %.4f\n",
                static_cast<long>(steps), c->seconds_per_step,
                FormatBytes(static_cast<double>(c->peak)).c_str(), c->loss);
  }
  return 0;
}

StatusOr<Probe> PlanProbe(const NetSpec& spec, int64_t batch, const ExperimentOptions& options) {
  SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(options.device));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, type}));
  SolverConfig sgd;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
  solver->AddState(*net);
  Probe probe;
  MemoryOptions memory = options.memory;
  // The window scheduler's budget, searched from the whole budget down.
  const int tries = options.search_window_budget ? kWindowBudgetSteps : 1;
  for (int i = 0; i < tries; ++i) {
    if (options.search_window_budget) memory.window_budget = {1.0 - i * kWindowBudgetStep, 0};
    SPILL_ASSIGN_OR_RETURN(probe.plan, Plan(net->view(), memory));
    probe.fits = probe.plan.fits;
    probe.window_budget = memory.window_budget;
    if (probe.fits) break;
  }
  return probe;
}

int ReportPrediction(const NetSpec& spec, int64_t batch, const ExperimentOptions& options) {
  auto predicted = [&]() -> StatusOr<std::string> {
    SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(options.device));
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, type}));
    SolverConfig sgd;
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
    solver->AddState(*net);
    SPILL_ASSIGN_OR_RETURN(
        std::unique_ptr<PlanPredictor> predictor,
        PlanPredictor::Create(options.device_profile, 0, *net, nullptr, options.memory));
    MemoryOptions memory = options.memory;
    memory.record_events = true;
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(net->view(), memory));
    SPILL_ASSIGN_OR_RETURN(Prediction p, predictor->Predict(plan, memory, ""));
    return DescribePrediction(p, batch, &predictor->roomy());
  }();
  if (!predicted.ok()) {
    std::printf("no prediction: %s\n", predicted.status().message().c_str());
    return 1;
  }
  std::printf("predicted on %s (simulated, not measured): %s\n", options.device_profile.c_str(),
              predicted->c_str());
  return 0;
}

StatusOr<Confirmation> ConfirmByTraining(const NetSpec& spec, int64_t batch,
                                         const ExperimentOptions& options, const MemoryPlan& plan) {
  const MemoryOptions& memory = options.memory;
  const int steps = static_cast<int>(options.confirm);
  Confirmation c;
  // The host pool holds what is offloaded; the rest is the batch and the
  // program; on the CPU device the device arena lives in host memory too.
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Device> device_owned, CreateDevice(options.device, {}));
  Device& device = *device_owned;
  const size_t arena = device.type() == DeviceType::kCpu ? plan.peak : 0;
  const size_t need = arena + plan.log.to_host + (size_t{1} << 30);
  const size_t have = AvailableHostBytes();
  if (need > have) {
    std::ostringstream why;
    why << "needs about " << FormatBytes(static_cast<double>(need))
        << " of host memory for the offloaded tensors" << (arena ? " and the device arena" : "")
        << "; this machine has " << FormatBytes(static_cast<double>(have)) << " available";
    c.reason = why.str();
    return c;
  }
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, device.type()}));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net, device));
  SolverConfig sgd;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
  solver->AddState(*net);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<MemoryRuntime> runtime,
                         MemoryRuntime::Create(net->view(), memory, &device));
  Executor executor(*net, &device, *runtime);
  InitializeParameters(*net, *runtime, device, 1);
  solver->ResetState(*net, *runtime, device);
  const Shape in = net->input_shape();
  std::vector<float> images(in.numel()), labels(in.n());
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * UniformAt(4, i) - 1;
  for (int64_t i = 0; i < in.n(); ++i)
    labels[i] = static_cast<float>(i % std::max<int64_t>(net->num_classes(), 1));
  HostBatch host{images.data(), labels.data()};
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    SPILL_ASSIGN_OR_RETURN(LossResult r, executor.Run(host, Phase::kTrain, step));
    solver->Update(*net, *runtime, device, 0.01);
    c.loss = r.loss;
  }
  device.compute_queue().Synchronize();
  c.seconds_per_step =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  c.peak = runtime->run_peak();
  c.ran = true;
  return c;
}

}  // namespace spill
