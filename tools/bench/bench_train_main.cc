// bench_train: training throughput of a network on synthetic data (no data
// loading), with the solver update included, after a few warm-up steps.
//
//   bench_train --config models/resnet18.yaml --set stem=cifar --set size=32
//       --set classes=10 --batch 64 --steps 20
//   bench_train ... --export DIR    also write DIR/net.json and DIR/initial.npz
//                                   for tools/bench/bench_torch.py (with
//                                   --steps 0: only that)
//   bench_train ... --memory dymem --offload-set conv --link-gbps 1
//                                   copies throttled as a PCIe link would carry
//                                   them (CPU device; tools/bench/dymem_speed.py)
//   bench_train ... --repeat 2      two timed runs of --steps steps, one line each
//   bench_train ... --versus '--stream-buffers 1'
//                                   A (these flags) against B (these plus
//                                   the --versus flags), taking turns
//                                   iteration by iteration in one process
//   bench_train ... --no-calibration
//                                   keep estimated algorithm times (on a GPU under
//                                   compute-sanitizer, timing every cuDNN algorithm
//                                   takes minutes)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "framework/base/clock.h"
#include "framework/base/files.h"
#include "framework/base/random.h"
#include "framework/device/device_registry.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "framework/graph/net_checks.h"
#include "framework/io/checkpoint.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_timer.h"
#include "layers/embedding_layer.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "tools/bench/versus.h"
#include "tools/common/checks.h"
#include "tools/common/cli.h"
#include "tools/common/memory_flags.h"
#include "tools/common/net_json.h"
#include "tools/common/net_options.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

constexpr char kDefaultMode[] = "liveness";

struct Args {
  std::string config, device = "cpu", export_dir;
  std::string versus;                        // memory flags of a second run to compare with
  const CLI::Option* versus_flag = nullptr;  // given (empty: an error)
  std::string command;                       // the flags given, to label the runs
  double link_gbps = 0;                      // 0: copies at memcpy speed
  bool minimum = false, profile = false, no_calibration = false, plain_layouts = false;
  std::string precision = "fp32";
  std::string layout = "auto";  // or a LayoutName
  ParamOverrides sets;
  int64_t batch = 64, steps = 20, warmup = 3, repeat = 1;
  MemoryFlags memory;  // as given
};

MemoryFlagsUse BenchMemoryUse() {
  MemoryFlagsUse use = ToolMemoryFlagsUse(kDefaultMode, kDefaultDeviceBudget, kDefaultHostBudget);
  use.places_tensors = true;
  return use;
}

void Declare(Flags& f, Args* a) {
  f.InputFile("--config", &a->config, "the network file")->required();
  f.Set(&a->sets);
  f.Int("--batch", &a->batch, "batch size (default 64)", 1, kMaxBatch);
  f.Int("--steps", &a->steps, "timed steps (default 20; 0 with --export: export only)", 0, 1000000);
  f.Int("--warmup", &a->warmup, "untimed steps first (default 3)", 0, 1000000);
  f.Int("--repeat", &a->repeat, "timed runs of --steps steps, one line each (default 1)", 1, 1000);
  f.Flag("--no-calibration", &a->no_calibration,
         "keep the estimated algorithm times instead of timing every candidate (cuDNN's Find)");
  f.Device(&a->device, "cpu (default) or cuda (--config=cuda builds)");
  f.Flag("--minimum", &a->minimum, "run at the smallest budget the memory mode runs in");
  f.Float("--link-gbps", &a->link_gbps,
          "throttle host<->device copies to G gigabytes per second (CPU device)", 1e-6, 1e6);
  f.String("--export", &a->export_dir,
           "write net.json and initial.npz for tools/bench/bench_torch.py")
      ->type_name("DIR");
  f.Flag("--profile", &a->profile, "print compute seconds per layer type over the timed steps");
  a->versus_flag =
      f.String(
           "--versus", &a->versus,
           "compare with a second run B: these flags' options with the given memory flags on top "
           "(e.g. '--stream-buffers 1'); A and B take turns iteration by iteration, --steps "
           "pairs after --warmup each, and the tool prints both, B/A per pair, the copy "
           "queue's time and the streamed steps' time from each iteration's measured queues")
          ->type_name("FLAGS");
  f.Choice("--precision", &a->precision,
           "fp32; bf16: activations and their gradients in 16 bits; tf32: tensor-core math on "
           "a GPU (default fp32)",
           {"fp32", "bf16", "tf32"});
  f.Flag("--plain-layouts", &a->plain_layouts,
         "keep every activation in plain NCHW (default: blocked between convolutions where the "
         "CPU computes them faster so)");
  f.Choice("--layout", &a->layout,
           "the layout of activations between convolutions: auto (nChw16c where the CPU "
           "computes convolutions faster so, else nchw), nchw (the same as --plain-layouts), "
           "nChw16c, or nhwc (channels-last, what oneDNN's AMX bfloat16 kernels compute in)",
           {"auto", "nchw", "nChw16c", "nhwc"});
  a->memory.Declare(f, BenchMemoryUse());
}

// The profile's time per layer type against the work it did (LayerWork: the
// arithmetic and memory traffic an efficient kernel needs), per second of
// wall-clock time and per CPU-second (two cores give at most 2 CPU-seconds per
// second): what tools/bench/roofline.sh compares with the machine's peaks.
void PrintWork(const Net& net, const Executor& executor, int64_t steps) {
  struct Work {
    double flops = 0, bytes = 0;
  };
  std::map<std::string, Work> work;
  double total = 0;
  const NetworkView view = net.view();
  for (int id = 0; id < net.num_layers(); ++id) {
    const LayerSummary& l = view.layer(id);
    const double flops = l.forward_work.flops + (l.is_input ? 0 : l.backward_work.flops);
    const double bytes = l.forward_work.bytes + (l.is_input ? 0 : l.backward_work.bytes);
    work[l.type].flops += flops * steps;
    work[l.type].bytes += bytes * steps;
    total += flops;
  }
  std::printf("training work: %.3f GFLOP per image\n", total / net.batch() * 1e-9);
  std::printf("%-18s %10s %10s %10s %10s %12s\n", "layer type", "GFLOP/step", "GB/step", "GFLOP/s",
              "GB/s", "GFLOP/cpu-s");
  for (const auto& [type, e] : executor.profile()) {
    const Work& w = work[type];
    const double wall = std::max(e.forward_seconds + e.backward_seconds, 1e-9);
    const double cpu = std::max(e.forward_cpu_seconds + e.backward_cpu_seconds, 1e-9);
    std::printf("%-18s %10.3f %10.3f %10.1f %10.1f %12.1f\n", type.c_str(), w.flops / steps * 1e-9,
                w.bytes / steps * 1e-9, w.flops / wall * 1e-9, w.bytes / wall * 1e-9,
                w.flops / cpu * 1e-9);
  }
}

// The memory options: the defaults, then the flags.
StatusOr<MemoryOptions> MemoryOptionsOf(const Args& args) {
  MemoryOptions memory;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(kDefaultMode, &memory));
  SPILL_RETURN_IF_ERROR(args.memory.Apply(&memory));
  SPILL_RETURN_IF_ERROR(memory.Validate());
  return memory;
}

// One line per timed run: throughput and what the memory runtime did.
// The time one timed run took: on the wall clock and in the whole process's
// CPU seconds (all threads).
struct RunTime {
  double seconds = 0, cpu_seconds = 0;
};

void PrintRun(const Args& args, const Net& net, const MemoryRuntime& runtime,
              const MemoryOptions& memory, const RunTime& time, double loss, int64_t run) {
  std::printf(
      "spill %s on %s, batch %ld, %s: %.2f images/s (%ld steps in %.2f s, %.2f cpu-s, run %ld of "
      "%ld, "
      "last loss %.4f, peak %s of a %s budget, %s, workspace %s, %s moved to host per iteration, "
      "%d recomputations, %d steps streamed)\n",
      net.name().c_str(), args.device.c_str(), args.batch, args.precision.c_str(),
      args.steps * args.batch / time.seconds, args.steps, time.seconds, time.cpu_seconds, run + 1,
      args.repeat, loss, FormatBytes(static_cast<double>(runtime.run_peak())).c_str(),
      FormatBytes(static_cast<double>(memory.device_budget)).c_str(), memory.mode.c_str(),
      memory.workspace.ToString().c_str(),
      FormatBytes(static_cast<double>(runtime.log().to_host)).c_str(), runtime.log().recomputed,
      runtime.log().streamed);
  std::fflush(stdout);
}

Status RunVersus(const Args& args, NetSpec spec, const MemoryOptions& memory, Device& device) {
  if (args.minimum || args.profile || !args.export_dir.empty() || args.repeat != 1 ||
      args.plain_layouts) {
    return InvalidArgument(
        "--versus measures --steps pairs after --warmup: --minimum, --profile, --export, "
        "--repeat and --plain-layouts do not combine with it");
  }
  SPILL_ASSIGN_OR_RETURN(MemoryOptions b, VersusOptions(memory, args.versus, BenchMemoryUse()));
  SPILL_RETURN_IF_ERROR(GiveMeasuredProfile(args.link_gbps, &b));
  VersusArgs v;
  v.spec = std::move(spec);
  v.batch = args.batch;
  v.warmup = args.warmup;
  v.pairs = args.steps;
  v.a = memory;
  v.a_label = args.command;
  cpu::SetConvTiming({cpu::ConvTimingMode::kMeasure, cpu::DefaultConvTimingCache()});
  return RunVersus(v, b, args.versus, device);
}

Status Run(const Args& args) {
  SPILL_ASSIGN_OR_RETURN(MemoryOptions memory, MemoryOptionsOf(args));
  SPILL_RETURN_IF_ERROR(GiveMeasuredProfile(args.link_gbps, &memory));
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(args.config, args.sets));
  DeviceConfig device_config;
  device_config.link_bytes_per_second = args.link_gbps * 1e9;
  device_config.tensor_math = args.precision == "tf32";
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Device> owned, CreateDevice(args.device, device_config));
  SPILL_RETURN_IF_ERROR(
      CheckPrecision(*ParsePrecision(args.precision, "--precision"), owned->type(), "--precision"));
  Device& device = *owned;
  if (args.versus_flag->count() > 0) return RunVersus(args, std::move(spec), memory, device);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, [&] {
                           NetOptions o =
                               NetOptionsFor(args.batch, device.type(), memory.workspace,
                                             *ParsePrecision(args.precision, "--precision"));
                           o.blocked_layouts &= !args.plain_layouts && args.layout != "nchw";
                           if (args.layout == "nChw16c") o.layout = Layout::kBlocked16;
                           if (args.layout == "nhwc") o.layout = Layout::kChannelsLast;
                           return o;
                         }()));
  if (!args.no_calibration) SPILL_RETURN_IF_ERROR(CalibrateNet(*net, device));
  SolverConfig sc;
  sc.momentum = 0.9;
  sc.weight_decay = 5e-4;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sc));
  solver->AddState(*net);
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*net, memory.workspace));
  if (args.steps == 0 && args.export_dir.empty()) {
    return InvalidArgument("--steps 0 runs nothing: give --export DIR, or steps to time");
  }
  // Times measured once per convolution shape, shared with train and plan
  // (not for an export alone, which computes nothing).
  if (args.steps > 0) {
    cpu::SetConvTiming({cpu::ConvTimingMode::kMeasure, cpu::DefaultConvTimingCache()});
  }
  if (args.minimum) {
    // Timing happens while planning here, before anything is reserved.
    SPILL_ASSIGN_OR_RETURN(memory.device_budget, MinimumBudget(net->view(), memory));
  }
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<MemoryRuntime> runtime,
                         MemoryRuntime::Create(net->view(), memory, &device));
  Executor executor(*net, &device, *runtime);
  SPILL_RETURN_IF_ERROR(InitializeParameters(*net, *runtime, 1));
  SPILL_RETURN_IF_ERROR(solver->ResetState(*net, *runtime));
  if (!args.export_dir.empty()) {
    SPILL_RETURN_IF_ERROR(CreateOutputFolder(args.export_dir, "--export"));
    SPILL_RETURN_IF_ERROR(
        WriteTextFile((std::filesystem::path(args.export_dir) / "net.json").string(),
                      NetToJson(*net), "--export"));
    SPILL_RETURN_IF_ERROR(
        SaveCheckpoint((std::filesystem::path(args.export_dir) / "initial.npz").string(), *net,
                       *runtime, device, solver.get(), {}, ""));
    if (args.steps == 0) return Status::Ok();
  }
  const Shape in = net->input_shape();
  std::vector<float> images(in.numel()), labels(net->label_shape().numel());
  const int64_t vocabulary = InputVocabulary(*net);  // ids for an embedding, else values
  for (size_t i = 0; i < images.size(); ++i) {
    const float u = UniformAt(3, i);
    images[i] = vocabulary > 0 ? std::floor(u * static_cast<float>(vocabulary)) : 2 * u - 1;
  }
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<float>(i % std::max<int64_t>(net->num_classes(), 1));
  HostBatch batch{images.data(), labels.data()};
  double loss = 0;
  auto step = [&](int64_t index) -> Status {
    solver->BeginStep(*net, *runtime, device, 0.01);
    SPILL_ASSIGN_OR_RETURN(LossResult r, executor.Run(batch, Phase::kTrain, index));
    SPILL_RETURN_IF_ERROR(solver->FinishStep(*runtime));
    loss = r.loss;
    return Status::Ok();
  };
  int64_t index = 0;
  for (; index < args.warmup; ++index) SPILL_RETURN_IF_ERROR(step(index));
  device.compute_queue().Synchronize();
  executor.set_profiling(args.profile);
  for (int64_t run = 0; run < args.repeat; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ProcessCpuSeconds();
    for (int64_t s = 0; s < args.steps; ++s) SPILL_RETURN_IF_ERROR(step(index++));
    device.compute_queue().Synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    PrintRun(args, *net, *runtime, memory, {seconds, ProcessCpuSeconds() - cpu_start}, loss, run);
  }
  if (args.profile) {
    std::fputs(executor.ProfileTable().c_str(), stdout);
    PrintWork(*net, executor, args.steps * args.repeat);
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  spill::Flags flags("bench_train",
                     "Training throughput of a network on synthetic data (no data loading), "
                     "solver update included, after a few warm-up steps.");
  spill::Args args;
  spill::Declare(flags, &args);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--versus") ++i;  // and its value
    if (arg == "--versus" || arg.rfind("--versus=", 0) == 0) continue;
    args.command += (args.command.empty() ? "" : " ") + arg;
  }
  return spill::ReportStatus("bench_train", spill::Run(args));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_train", [&] { return spill::Main(argc, argv); });
}
