#include "tools/planning/experiments.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "framework/base/random.h"
#include "framework/config/layer_params.h"
#include "framework/device/device_registry.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "framework/graph/net_checks.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/runtime/runtime.h"
#include "memory/scheduler_registry.h"
#include "tools/common/checks.h"
#include "tools/common/cli.h"
#include "tools/common/net_options.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

// --window-budget search: 1x, 0.95x, ..., 0.30x.
constexpr double kShareStep = 0.05;  // a scheduler's share of the budget, searched
constexpr int kShareSteps = 15;

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
                     (memory.host_tier == "ram" ? "" : " on disk") + "), memory " + memory.mode +
                     ", " + memory.allocator;
  text += DescribeSettings(memory, "allocator", memory.allocator, /*every=*/true);
  if (!memory.compact) text += " without compaction";
  if (memory.batch_chunk != kBatchChunkOff)
    text += ", batch slices " + BatchChunkName(memory.batch_chunk);
  if (memory.params.kind != ParamPlacement::Kind::kDevice) {
    text += ", parameters " + memory.params.ToString() + " (updated on " +
            (memory.update_on_host ? "host" : "device") + ")";
  }
  text += PrecisionNote(precision);
  if (ranks > 1) {
    text += ", one of " + std::to_string(ranks) + " data-parallel ranks (zero " +
            std::to_string(zero) + ")";
  }
  return text;
}

namespace {

// The paper's K40 and a host pool that holds what a 12 GiB device offloads.
constexpr char kDefaultMode[] = "superneurons";
constexpr size_t kDeviceBudget = 12 * kGiB;
constexpr size_t kHostBudget = 64 * kGiB;

MemoryFlagsUse ExperimentMemoryUse() {
  MemoryFlagsUse use = ToolMemoryFlagsUse(kDefaultMode, kDeviceBudget, kHostBudget);
  use.searches = true;
  return use;
}

void DeclareExperiment(Flags& f, const std::string& default_model, ExperimentOptions* o) {
  o->model = default_model;
  f.InputFile("--config", &o->model, "the network file")->required(default_model.empty());
  f.Device(&o->device, "whose layers (and workspaces) are planned and run");
  f.Int("--batch", &o->batch, "batch size (default 16)", 1, kMaxBatch);
  f.Int("--size", &o->size, "image side (default 224)", 1, kMaxLayerExtent);
  f.Set(&o->sets);
  f.String("--device-profile", &o->device_profile,
           "the device profile the result's iteration time is simulated on (default k40-pcie3)")
      ->type_name("NAME");
  f.Int("--confirm", &o->confirm, "also train the result for N steps (default 0: plan only)", 0,
        1000);
  f.Int("--ranks", &o->ranks,
        "plan one rank of a data-parallel run of N processes (its batch as given), with --zero", 1,
        1 << 16);
  f.Int("--zero", &o->zero,
        "with --ranks: 1 shards the solver state over the ranks, 2 also lets each gradient "
        "leave the device after its layer's backward, 3 also shards the parameters "
        "(distributed.zero)",
        0, 3);
  f.Choice("--precision", &o->precision_name,
           "fp32, or bf16: activations and their gradients in 16 bits (run.precision)",
           {"fp32", "bf16", "fp16", "tf32"});
  o->memory_flags.Declare(f, ExperimentMemoryUse());
}

// The memory options: the experiments' defaults, then the flags.
Status ApplyExperimentMemory(ExperimentOptions* o) {
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(kDefaultMode, &o->memory));
  o->memory.device_budget = kDeviceBudget;
  o->memory.host_budget = kHostBudget;
  SPILL_RETURN_IF_ERROR(o->memory_flags.Apply(&o->memory));
  for (const SettingSpec& spec : SearchableSettings(o->memory.scheduler)) {
    if (o->memory_flags.Searched(spec.key)) o->searched_share = spec.key;
  }
  if (o->zero > 0 && o->ranks < 2) {
    return InvalidArgument("--zero " + std::to_string(o->zero) +
                           " shards over data-parallel ranks: give --ranks N (2 or more)");
  }
  if (o->ranks > 1 && o->confirm > 0) {
    return InvalidArgument("--confirm trains one process; a rank of --ranks " +
                           std::to_string(o->ranks) + " trains under mpirun (train --zero)");
  }
  o->memory.gradients_leave = o->zero >= 2;
  o->memory.params_gathered = o->zero >= 3;
  o->memory.ranks = static_cast<int>(o->ranks);
  SPILL_ASSIGN_OR_RETURN(o->precision, ParsePrecision(o->precision_name, "--precision"));
  SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(o->device));
  SPILL_RETURN_IF_ERROR(CheckPrecision(o->precision, type, "--precision"));
  ApplyPrecision(o->precision, &o->memory);
  SPILL_RETURN_IF_ERROR(o->memory.Validate());
  if (o->confirm > 0) SPILL_RETURN_IF_ERROR(CheckAllocatorPlaces(o->memory, "--confirm"));
  SPILL_RETURN_IF_ERROR(GiveMeasuredProfile(/*link_gbps=*/0, &o->memory));
  return LoadDeviceProfile(o->device_profile, 0).status();
}

}  // namespace

int StartExperiment(int argc, char** argv, const char* tool, const char* description,
                    const std::string& default_model, ExperimentOptions* o) {
  Flags f(tool, description);
  DeclareExperiment(f, default_model, o);
  const int stop = f.Parse(argc, argv);
  if (stop >= 0) return stop;
  // --size is the model's `size` parameter, like --set size=N.
  if (f.app().count("--size") > 0) {
    if (o->sets.count("size")) {
      return ReportStatus(
          tool, InvalidArgument("--size and --set size both give the image side; give one"), 2);
    }
    o->sets.emplace("size", YAML::Node(o->size));
  }
  Status status = ApplyExperimentMemory(o);
  if (!status.ok()) return ReportStatus(tool, status, 2);
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  return -1;
}

int ReportConfirmation(const StatusOr<Confirmation>& c, int64_t steps, const std::string& found) {
  if (!c.ok()) {
    std::printf("confirmation failed: %s was found by planning, but training it failed: %s\n",
                found.c_str(), c.status().message().c_str());
    return 1;
  }
  if (!c->ran) {
    std::printf(
        "not confirmed: %s was found by planning, but --confirm %ld could not train it "
        "here: it %s\n",
        found.c_str(), static_cast<long>(steps), c->reason.c_str());
    return 1;
  }
  std::printf("confirmed: trained %ld steps, %.1f s per step, peak %s, last loss %.4f\n",
              static_cast<long>(steps), c->seconds_per_step,
              FormatBytes(static_cast<double>(c->peak)).c_str(), c->loss);
  return 0;
}

namespace {

NetOptions NetOptionsOf(int64_t batch, DeviceType type, const ExperimentOptions& options) {
  NetOptions net = NetOptionsFor(batch, type, options.memory.workspace, options.precision);
  if (options.plain_layouts) net.blocked_layouts = false;
  net.slice_copies_from = options.slice_copies_from;
  if (options.tiled_attention) net.tiled_attention = true;
  return net;
}

// The network built with `net_options`, with SGD's state; null when a
// tensor is too large for any budget (kOutOfMemory: "does not fit", which
// is what the search wants to know).
StateShard ShardOf(const ExperimentOptions& options) {
  // The last rank's shard is the largest (by one element).
  const int ranks = static_cast<int>(options.ranks);
  return options.zero > 0 ? StateShard{ranks - 1, ranks, options.zero >= 3} : StateShard{};
}

StatusOr<std::unique_ptr<Net>> BuildProbed(const NetSpec& spec, const NetOptions& net_options,
                                           const WorkspacePolicy& workspace,
                                           const ExperimentOptions& options) {
  auto built = Net::Build(spec, net_options);
  if (built.status().code() == StatusCode::kOutOfMemory) return std::unique_ptr<Net>();
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, std::move(built));
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*net, workspace));
  SolverConfig sgd;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
  solver->AddState(*net, ShardOf(options));
  return net;
}

// One network's plan under `memory`, with the scheduler's share searched.
StatusOr<Probe> PlanBuilt(const Net& net, MemoryOptions memory, const ExperimentOptions& options) {
  Probe probe;
  // The scheduler's share of the budget, searched from the whole budget down.
  const std::string& searched = options.searched_share;
  const int tries = searched.empty() ? 1 : kShareSteps;
  const std::vector<SettingSpec> shares = SearchableSettings(memory.scheduler);
  for (int i = 0; i < tries; ++i) {
    if (!searched.empty()) {
      char multiple[32];
      std::snprintf(multiple, sizeof(multiple), "%gx", 1.0 - i * kShareStep);
      SPILL_RETURN_IF_ERROR(memory.settings.Set(searched, multiple));
    }
    SPILL_ASSIGN_OR_RETURN(probe.plan, Plan(net.view(), memory));
    probe.fits = probe.plan.fits;
    if (!shares.empty()) probe.share = memory.settings.Text(shares.front());
    if (probe.fits) break;
  }
  probe.workspace = memory.workspace;
  return probe;
}

}  // namespace

StatusOr<Probe> PlanProbe(const NetSpec& spec, int64_t batch, const ExperimentOptions& options) {
  SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(options.device));
  const NetOptions net_options = NetOptionsOf(batch, type, options);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                         BuildProbed(spec, net_options, options.memory.workspace, options));
  if (net == nullptr) return Probe();
  SPILL_ASSIGN_OR_RETURN(Probe probe, PlanBuilt(*net, options.memory, options));
  probe.plain_layouts = !HasBlockedLayouts(*net);
  if (probe.fits) return probe;
  for (const LeanerBuild& lean : LeanerBuilds(*net, net_options, options.memory.workspace)) {
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> built,
                           BuildProbed(spec, lean.net, lean.workspace, options));
    if (built == nullptr) continue;
    MemoryOptions memory = options.memory;
    memory.workspace = lean.workspace;
    SPILL_ASSIGN_OR_RETURN(Probe tried, PlanBuilt(*built, memory, options));
    if (!tried.fits) continue;
    tried.leaner = lean.note;
    tried.plain_layouts = !lean.net.blocked_layouts;
    tried.slice_copies_from = lean.net.slice_copies_from;
    tried.tiled_attention = lean.net.tiled_attention;
    return tried;
  }
  return probe;
}

void ExperimentOptions::Use(const Probe& probe) {
  if (probe.leaner.empty()) return;
  memory.workspace = probe.workspace;
  plain_layouts = probe.plain_layouts;
  slice_copies_from = probe.slice_copies_from;
  tiled_attention = probe.tiled_attention;
}

int ReportPrediction(const NetSpec& spec, int64_t batch, const ExperimentOptions& options) {
  auto predicted = [&]() -> StatusOr<std::string> {
    SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(options.device));
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                           Net::Build(spec, NetOptionsOf(batch, type, options)));
    SolverConfig sgd;
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
    solver->AddState(*net, ShardOf(options));
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
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                         Net::Build(spec, NetOptionsOf(batch, device.type(), options)));
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
  std::vector<float> images(in.numel()), labels(net->label_shape().numel());
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * UniformAt(4, i) - 1;
  for (size_t i = 0; i < labels.size(); ++i)
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
