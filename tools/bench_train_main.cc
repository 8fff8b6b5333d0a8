// bench_train: training throughput of a network on synthetic data (no data
// loading), with the solver update included, after a few warm-up steps.
//
//   bench_train --config models/resnet18.yaml --set stem=cifar --set size=32
//       --set classes=10 --batch 64 --steps 20
//   bench_train ... --export DIR    also write DIR/net.json and DIR/initial.npz
//                                   for tools/bench_torch.py
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "framework/checkpoint.h"
#include "framework/device_registry.h"
#include "framework/executor.h"
#include "framework/initializer.h"
#include "framework/random.h"
#include "framework/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planner.h"
#include "memory/runtime.h"
#include "tools/net_json.h"

namespace spill {
namespace {

const char kUsage[] = R"(usage: bench_train --config MODEL.yaml [options]
  --set KEY=VALUE      model parameter (repeatable)
  --batch B            batch size (default 64)
  --steps N            timed steps (default 20)
  --warmup N           untimed steps first (default 3)
  --memory MODE        memory mode (default liveness)
  --device NAME        cpu (default) or cuda (--config=cuda builds)
  --device-memory SIZE device budget (default 8GiB)
  --workspace POLICY   dynamic (default), fastest, memory_optimal, cap:SIZE, pin:NAME
  --params PLACE       where parameters, gradients and solver state live: device (default),
                       host, above:SIZE or cache
  --update WHERE       where parameters kept in host memory are updated: device (default)
                       or host
  --minimum            run at the smallest budget the memory mode runs in
  --export DIR         write net.json and initial.npz for tools/bench_torch.py
  --profile            print compute seconds per layer type over the timed steps
)";

struct Args {
  std::string config, memory = "liveness", device = "cpu", device_memory, export_dir,
                      workspace = "dynamic", params = "device", update = "device";
  bool minimum = false, profile = false, help = false;
  ParamOverrides sets;
  int64_t batch = 64, steps = 20, warmup = 3;
};

Status Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--minimum" || arg == "--profile") {
      (arg == "--minimum" ? a->minimum : a->profile) = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      a->help = true;
      return Status::Ok();
    }
    if (i + 1 >= argc) return InvalidArgument(arg + " needs a value\n" + kUsage);
    if (arg == "--config")
      a->config = argv[++i];
    else if (arg == "--workspace")
      a->workspace = argv[++i];
    else if (arg == "--params")
      a->params = argv[++i];
    else if (arg == "--update")
      a->update = argv[++i];
    else if (arg == "--memory")
      a->memory = argv[++i];
    else if (arg == "--device")
      a->device = argv[++i];
    else if (arg == "--device-memory")
      a->device_memory = argv[++i];
    else if (arg == "--export")
      a->export_dir = argv[++i];
    else if (arg == "--batch")
      a->batch = std::atoll(argv[++i]);
    else if (arg == "--steps")
      a->steps = std::atoll(argv[++i]);
    else if (arg == "--warmup")
      a->warmup = std::atoll(argv[++i]);
    else if (arg == "--set") {
      std::string kv = argv[++i];
      size_t eq = kv.find('=');
      if (eq == std::string::npos) return InvalidArgument("--set needs KEY=VALUE");
      a->sets[kv.substr(0, eq)] = YAML::Load(kv.substr(eq + 1));
    } else
      return InvalidArgument("unknown option '" + arg + "'\n" + kUsage);
  }
  if (a->config.empty() || a->batch < 1 || a->steps < 1) return InvalidArgument(kUsage);
  return Status::Ok();
}

Status Run(const Args& args) {
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(args.config, args.sets));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Device> owned, CreateDevice(args.device, {}));
  Device& device = *owned;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {args.batch, device.type()}));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net, device));
  SolverConfig sc;
  sc.momentum = 0.9;
  sc.weight_decay = 5e-4;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sc));
  solver->AddState(*net);
  MemoryOptions memory;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(args.memory, &memory));
  if (!args.device_memory.empty()) {
    SPILL_ASSIGN_OR_RETURN(memory.device_budget, ParseBytes(args.device_memory));
  }
  SPILL_ASSIGN_OR_RETURN(memory.workspace, ParseWorkspacePolicy(args.workspace));
  SPILL_ASSIGN_OR_RETURN(memory.params, ParseParamPlacement(args.params));
  if (args.update != "device" && args.update != "host") {
    return InvalidArgument("--update must be device or host");
  }
  memory.update_on_host = args.update == "host";
  // Times measured once per convolution shape, shared with train and plan.
  cpu::SetConvTiming({cpu::ConvTimingMode::kMeasure, cpu::DefaultConvTimingCache()});
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
    std::filesystem::create_directories(args.export_dir);
    std::ofstream(std::filesystem::path(args.export_dir) / "net.json") << NetToJson(*net);
    SPILL_RETURN_IF_ERROR(
        SaveCheckpoint((std::filesystem::path(args.export_dir) / "initial.npz").string(), *net,
                       *runtime, device, solver.get(), {}, ""));
  }
  const Shape in = net->input_shape();
  std::vector<float> images(in.numel()), labels(in.n());
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * UniformAt(3, i) - 1;
  for (int64_t i = 0; i < in.n(); ++i)
    labels[i] = static_cast<float>(i % std::max<int64_t>(net->num_classes(), 1));
  HostBatch batch{images.data(), labels.data()};
  std::chrono::steady_clock::time_point start;
  double loss = 0;
  for (int64_t step = 0; step < args.warmup + args.steps; ++step) {
    if (step == args.warmup) {
      start = std::chrono::steady_clock::now();
      executor.set_profiling(args.profile);
    }
    solver->BeginStep(*net, *runtime, device, 0.01);
    SPILL_ASSIGN_OR_RETURN(LossResult r, executor.Run(batch, Phase::kTrain, step));
    SPILL_RETURN_IF_ERROR(solver->FinishStep(*runtime));
    loss = r.loss;
  }
  device.compute_queue().Synchronize();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "spill %s on %s, batch %ld: %.2f images/s (%ld steps in %.2f s, last loss %.4f, peak %s of a "
      "%s budget, %s, "
      "workspace %s, %s moved to host per iteration, %d recomputations)\n",
      net->name().c_str(), args.device.c_str(), args.batch, args.steps * args.batch / seconds,
      args.steps, seconds, loss, FormatBytes(static_cast<double>(runtime->run_peak())).c_str(),
      FormatBytes(static_cast<double>(memory.device_budget)).c_str(), memory.mode.c_str(),
      memory.workspace.ToString().c_str(),
      FormatBytes(static_cast<double>(runtime->log().to_host)).c_str(), runtime->log().recomputed);
  if (args.profile) std::fputs(executor.ProfileTable().c_str(), stdout);
  return Status::Ok();
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  spill::Args args;
  spill::Status status = spill::Parse(argc, argv, &args);
  if (status.ok() && args.help) {
    std::fputs(spill::kUsage, stdout);
    return 0;
  }
  if (status.ok()) status = spill::Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "bench_train: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
