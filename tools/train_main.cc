// train: trains a network from a YAML configuration.
//
//   train                                   the built-in default (a CNN on Fashion-MNIST)
//   train --config configs/resnet18_cifar.yaml
//   train --config X --max-steps 100 --report report.json
//   train --config X --resume               continue from <output>/checkpoint.npz
//
// Ctrl-C saves a checkpoint and stops; a second Ctrl-C stops at once.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "framework/device_registry.h"
#include "framework/logging.h"
#include "framework/units.h"
#include "memory/planner.h"
#include "tools/progress.h"
#include "tools/trainer.h"

namespace spill {
namespace {

const char kUsage[] = R"(usage: train [options]
  --config FILE          training configuration (default: the built-in Fashion-MNIST CNN)
  --print-default-config print the built-in configuration and exit
  --max-steps N          stop after N steps in this run
  --epochs N             override run.epochs
  --resume [CHECKPOINT]  continue from a checkpoint (default: <output>/checkpoint.npz)
  --output DIR           override run.output
  --report FILE.json     write the final figures as JSON
  --memory MODE          override memory.mode (baseline, liveness, offload, recompute, superneurons)
  --device-memory SIZE   override memory.device_budget (e.g. 2GiB)
  --memory-log FILE      write per-step device memory of one iteration (.csv or .jsonl)
  --workspace POLICY     convolution workspace: dynamic, fastest, memory_optimal, cap:SIZE, pin:NAME
  --link-gbps G          throttle host<->device copies to G gigabytes per second (CPU device)
  --device cpu|cuda      override run.device
  --no-progress          no progress bar
  --profile              print compute time per layer type at the end
  --trace DIR            record network, weights, batches and losses for tools/crosscheck_torch.py
  --timeline FILE.json   write one iteration (the second) as a Chrome/Perfetto trace: compute and
                         copy queues, memory by category (open in ui.perfetto.dev)
  --log SPEC             logging, e.g. info or info,memory:debug
)";

volatile std::sig_atomic_t interrupts = 0;

void OnInterrupt(int) {
  if (++interrupts > 1) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
  Trainer::RequestStop();
}

struct Args {
  std::string config, report, resume, output, memory, device_memory, memory_log, trace, workspace,
      device, timeline;
  double link_gbps = 0;
  bool resume_default = false, progress = true, print_default = false, profile = false;
  int64_t max_steps = 0, epochs = 0;
};

Status ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) -> Status {
      if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
      *out = argv[++i];
      return Status::Ok();
    };
    std::string number;
    if (arg == "--config")
      SPILL_RETURN_IF_ERROR(value(&a->config));
    else if (arg == "--report")
      SPILL_RETURN_IF_ERROR(value(&a->report));
    else if (arg == "--output")
      SPILL_RETURN_IF_ERROR(value(&a->output));
    else if (arg == "--memory")
      SPILL_RETURN_IF_ERROR(value(&a->memory));
    else if (arg == "--device-memory")
      SPILL_RETURN_IF_ERROR(value(&a->device_memory));
    else if (arg == "--memory-log")
      SPILL_RETURN_IF_ERROR(value(&a->memory_log));
    else if (arg == "--trace")
      SPILL_RETURN_IF_ERROR(value(&a->trace));
    else if (arg == "--timeline")
      SPILL_RETURN_IF_ERROR(value(&a->timeline));
    else if (arg == "--workspace")
      SPILL_RETURN_IF_ERROR(value(&a->workspace));
    else if (arg == "--device")
      SPILL_RETURN_IF_ERROR(value(&a->device));
    else if (arg == "--link-gbps") {
      std::string g;
      SPILL_RETURN_IF_ERROR(value(&g));
      a->link_gbps = std::atof(g.c_str());
      if (a->link_gbps <= 0) return InvalidArgument("--link-gbps needs a positive number");
    } else if (arg == "--no-progress")
      a->progress = false;
    else if (arg == "--profile")
      a->profile = true;
    else if (arg == "--print-default-config")
      a->print_default = true;
    else if (arg == "--log") {
      std::string spec;
      SPILL_RETURN_IF_ERROR(value(&spec));
      ConfigureLogging(spec);
    } else if (arg == "--resume") {
      if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0)
        a->resume = argv[++i];
      else
        a->resume_default = true;
    } else if (arg == "--max-steps" || arg == "--epochs") {
      SPILL_RETURN_IF_ERROR(value(&number));
      char* end = nullptr;
      long long n = std::strtoll(number.c_str(), &end, 10);
      if (number.empty() || *end != '\0' || n < 1)
        return InvalidArgument(arg + " needs a positive integer");
      (arg == "--max-steps" ? a->max_steps : a->epochs) = n;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      return InvalidArgument("unknown option '" + arg + "'\n" + kUsage);
    }
  }
  return Status::Ok();
}

Status ApplyOverrides(const Args& a, TrainConfig* c) {
  if (!a.output.empty()) c->run.output = a.output;
  if (!a.device.empty()) {
    SPILL_RETURN_IF_ERROR(DeviceTypeByName(a.device).status());
    c->run.device = a.device;
  }
  if (a.epochs > 0) {
    c->run.epochs = a.epochs;
    c->run.steps = 0;
  }
  if (!a.memory.empty()) SPILL_RETURN_IF_ERROR(ApplyMemoryMode(a.memory, &c->memory));
  if (!a.device_memory.empty()) {
    SPILL_ASSIGN_OR_RETURN(c->memory.device_budget, ParseBytes(a.device_memory));
  }
  if (!a.workspace.empty()) {
    SPILL_ASSIGN_OR_RETURN(c->memory.workspace, ParseWorkspacePolicy(a.workspace));
  }
  return Status::Ok();
}

void PrintSummary(const Trainer& trainer, const TrainConfig& c) {
  const TrainReport& r = trainer.report();
  std::fprintf(stderr, "%s: %ld steps (%.2f epochs) in %s, %.1f images/s\n",
               trainer.net().name().c_str(), r.steps, r.epochs, FormatDuration(r.seconds).c_str(),
               r.images_per_second);
  std::fprintf(stderr, "  train loss %.4f, train accuracy %.2f%%", r.train_loss,
               100 * r.train_accuracy);
  if (r.evaluated) {
    std::fprintf(stderr, "; test loss %.4f, test accuracy %.2f%%", r.test_loss,
                 100 * r.test_accuracy);
  }
  std::fprintf(stderr, "\n  peak device memory %s of a %s budget (%s)\n  checkpoint: %s\n",
               FormatBytes(static_cast<double>(r.peak_device_bytes)).c_str(),
               FormatBytes(static_cast<double>(c.memory.device_budget)).c_str(),
               c.memory.mode.c_str(), trainer.checkpoint_path().c_str());
}

int Main(int argc, char** argv) {
  Args args;
  Status status = ParseArgs(argc, argv, &args);
  if (!status.ok()) {
    std::fprintf(stderr, "train: %s\n", status.message().c_str());
    return 2;
  }
  TrainConfig config = DefaultTrainConfig();
  if (args.print_default) {
    std::fputs(config.text.c_str(), stdout);
    return 0;
  }
  if (!args.config.empty()) {
    auto loaded = LoadTrainConfig(args.config);
    if (!loaded.ok()) {
      std::fprintf(stderr, "train: %s\n", loaded.status().message().c_str());
      return 1;
    }
    config = *loaded;
  }
  status = ApplyOverrides(args, &config);
  TrainOptions options;
  options.max_steps = args.max_steps;
  options.memory_log = args.memory_log;
  options.progress = args.progress;
  options.profile = args.profile;
  options.trace_dir = args.trace;
  options.link_gbps = args.link_gbps;
  options.timeline = args.timeline;
  options.resume = args.resume_default ? config.run.output + "/checkpoint.npz" : args.resume;
  std::unique_ptr<Trainer> trainer;
  if (status.ok()) {
    auto created = Trainer::Create(config, options);
    status = created.status();
    if (created.ok()) trainer = std::move(created).value();
  }
  if (status.ok()) {
    std::fprintf(stderr, "training %s on %s (%s), batch %ld, memory %s\n",
                 trainer->net().name().c_str(), config.data.dataset.c_str(),
                 config.data.path.c_str(), config.data.batch, config.memory.Describe().c_str());
    std::signal(SIGINT, OnInterrupt);
    status = trainer->Run();
    if (status.ok() || status.code() == StatusCode::kCancelled) PrintSummary(*trainer, config);
    if (args.profile) std::fputs(trainer->ProfileTable().c_str(), stderr);
    if (status.code() == StatusCode::kOutOfMemory) {
      status = ExplainOutOfMemory(status, trainer->net().view(), config.memory);
    }
  }
  if (trainer && !args.report.empty()) {
    std::ofstream out(args.report);
    out << trainer->report().ToJson(config.memory);
  }
  if (status.code() == StatusCode::kCancelled) {
    std::fprintf(stderr, "train: %s; continue with --resume\n", status.message().c_str());
    return 130;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "train: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) { return spill::Main(argc, argv); }
