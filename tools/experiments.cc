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
#include "memory/runtime.h"

namespace spill {
namespace {

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
                     FormatBytes(static_cast<double>(memory.host_budget)) +
                     (memory.host_tier == "ram" ? "" : " on disk") + "), memory " + memory.mode;
  if (memory.params.kind != ParamPlacement::Kind::kDevice) {
    text += ", parameters " + memory.params.ToString() + " (updated on " +
            (memory.update_on_host ? "host" : "device") + ")";
  }
  return text;
}

StatusOr<ExperimentOptions> ParseExperimentOptions(int argc, char** argv,
                                                   const std::string& default_model) {
  ExperimentOptions o;
  o.model = default_model;
  std::string budget = "12GiB", host = "64GiB", mode = "superneurons", workspace = "dynamic",
              params = "device", update = "device", tier = "ram";
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
    else if (a == "--params")
      params = v;
    else if (a == "--update")
      update = v;
    else if (a == "--host-tier")
      tier = v;
    else if (a == "--batch")
      o.batch = std::atoll(v.c_str());
    else if (a == "--size")
      o.size = std::atoll(v.c_str());
    else if (a == "--confirm")
      o.confirm = std::atoll(v.c_str());
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
  SPILL_ASSIGN_OR_RETURN(o.memory.params, ParseParamPlacement(params));
  if (update != "device" && update != "host") {
    return InvalidArgument("--update must be device or host (got '" + update + "')");
  }
  o.memory.update_on_host = update == "host";
  o.memory.host_tier = tier;
  SPILL_RETURN_IF_ERROR(o.memory.Validate());
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
  SPILL_ASSIGN_OR_RETURN(probe.plan, Plan(net->view(), options.memory));
  probe.fits = probe.plan.fits;
  return probe;
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
  // What host memory holds - offloaded tensors, parameters kept there - is on
  // disk with a file tier.
  const size_t kept =
      memory.host_tier == "ram" ? std::max(plan.log.to_host, plan.log.host_peak) : 0;
  const size_t need = arena + kept + (size_t{1} << 30);
  const size_t have = AvailableHostBytes();
  if (need > have) {
    std::ostringstream why;
    why << "needs about " << FormatBytes(static_cast<double>(need))
        << " of host memory for what is kept there" << (arena ? " and the device arena" : "")
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
  SPILL_RETURN_IF_ERROR(InitializeParameters(*net, *runtime, 1));
  SPILL_RETURN_IF_ERROR(solver->ResetState(*net, *runtime));
  const Shape in = net->input_shape();
  std::vector<float> images(in.numel()), labels(in.n());
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * UniformAt(4, i) - 1;
  for (int64_t i = 0; i < in.n(); ++i)
    labels[i] = static_cast<float>(i % std::max<int64_t>(net->num_classes(), 1));
  HostBatch host{images.data(), labels.data()};
  auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    solver->BeginStep(*net, *runtime, device, 0.01);
    SPILL_ASSIGN_OR_RETURN(LossResult r, executor.Run(host, Phase::kTrain, step));
    SPILL_RETURN_IF_ERROR(solver->FinishStep(*runtime));
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
