// train: trains a network from a YAML configuration.
//
//   train                                   the built-in default (a CNN on Fashion-MNIST)
//   train --config configs/resnet18_cifar.yaml
//   train --config X --max-steps 100 --report report.json
//   train --config X --max-steps 2 --html memory.html
//                                           the memory page of the second iteration
//   train --config X --resume               continue from <output>/checkpoint.npz
//   train --config X --overwrite            start over, replacing <output>/checkpoint.npz
//   train --config X --memory superneurons --device-memory 64MiB
//                                           override those keys of the config's memory:
//                                           section (tools/common/memory_flags.h), keep the rest
//   mpirun -np 2 train --config X           data parallel (tools/trainer/data_parallel.h)
//
// Ctrl-C, SIGTERM and SIGHUP save a checkpoint and stop; a second signal stops
// at once. Two runs never share an output folder (a lock file, see trainer.h).
#include <csignal>
#include <cstdio>
#include <string>

#include "framework/base/files.h"
#include "framework/base/logging.h"
#include "framework/base/units.h"
#include "framework/device/device_registry.h"
#include "framework/distributed/distributed.h"
#include "memory/planning/feasibility.h"
#include "memory/planning/planner.h"
#include "tools/common/cli.h"
#include "tools/common/memory_flags.h"
#include "tools/trainer/progress.h"
#include "tools/trainer/trainer.h"

namespace spill {

constexpr int kStoppedExitCode = 130;  // stopped by a signal, checkpoint saved

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int64_t kMaxRunSteps = 1000000000000;  // --max-steps
constexpr int64_t kMaxEpochs = 1000000;          // --epochs

volatile std::sig_atomic_t signals_received = 0;

// The first signal asks the trainer to checkpoint and stop after this step;
// a second one ends the process the way the signal normally does.
void OnSignal(int signal) {
  if (++signals_received > 1) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  Trainer::RequestStop();
}

// "train", or "train (rank 1 of 2)" under mpirun: errors say which rank.
std::string ToolName() {
  const Communicator& world = Communicator::World();
  return world.size() > 1 ? "train (" + world.Describe() + ")" : "train";
}

void InstallSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (int s : kSignals) sigaction(s, &action, nullptr);
}

struct Args {
  std::string config, report, resume, init, output, memory_log, trace, device, log, timeline, html,
      precision;
  MemoryFlags memory;  // as given: each overrides the config's memory: section
  double link_gbps = 0;
  bool resume_default = false, no_progress = false, print_default = false, profile = false,
       overwrite = false;
  int64_t max_steps = 0, epochs = 0, zero = -1, micro_batches = 0;
};

void Declare(Flags& f, Args* a) {
  f.InputFile("--config", &a->config,
              "training configuration (default: the built-in Fashion-MNIST CNN)");
  f.Flag("--print-default-config", &a->print_default, "print the built-in configuration and exit");
  f.Int("--max-steps", &a->max_steps, "stop after N steps in this run", 1, kMaxRunSteps);
  f.Int("--epochs", &a->epochs, "override run.epochs", 1, kMaxEpochs);
  f.String("--resume", &a->resume, "continue from a checkpoint (default: <output>/checkpoint.npz)")
      ->expected(0, 1)
      ->type_name("[CHECKPOINT]");
  f.InputFile(
      "--init", &a->init,
      "fine-tune: start from the parameters of this checkpoint (.npz) or ONNX model (.onnx) "
      "that match the network by "
      "name and shape (overrides run.init)");
  f.Flag("--overwrite", &a->overwrite,
         "start over in an output folder that holds a checkpoint, replacing it");
  f.String("--output", &a->output, "override run.output")->type_name("DIR");
  f.OutputFile("--report", &a->report, "write the final figures as JSON");
  f.OutputFile("--memory-log", &a->memory_log,
               "write per-step device memory of one iteration (.csv or .jsonl)");
  f.Float("--link-gbps", &a->link_gbps,
          "throttle host<->device copies to G gigabytes per second (CPU device)", 1e-6, 1e6);
  f.Device(&a->device, "override run.device");
  f.String("--precision", &a->precision,
           "override run.precision: fp32; bf16 or fp16 to store activations and their "
           "gradients in 16 bits (parameters and solver state stay float32; fp16 scales the "
           "loss); tf32: tensor-core math on a GPU")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "tf32"}))
      ->type_name("P");
  f.Int("--zero", &a->zero,
        "override distributed.zero: 0 replicates the solver state on every rank, 1 shards it, "
        "2 also lets gradients leave the device after backward, 3 also shards the parameters",
        0, 3);
  f.Int("--micro-batches", &a->micro_batches,
        "override run.micro_batches: compute each batch in K micro-batches, one after another, "
        "and update once with the mean of their gradients (gradient accumulation)",
        1, 1 << 20);
  f.Flag("--no-progress", &a->no_progress, "no progress bar");
  f.Flag("--profile", &a->profile, "print compute time per layer type at the end");
  f.String("--trace", &a->trace,
           "record network, weights, batches and losses for tools/bench/crosscheck_torch.py")
      ->type_name("DIR");
  f.OutputFile("--timeline", &a->timeline,
               "write one iteration (the second) as a Chrome/Perfetto trace: compute and copy "
               "queues, memory by category (open in ui.perfetto.dev)");
  f.OutputFile("--html", &a->html,
               "write the memory page of that iteration: one self-contained HTML file with its "
               "curve per step, address space, step details and measured queues");
  f.String("--log", &a->log, "logging, e.g. info or info,memory:debug")
      ->check(CLI::Validator(
          [](std::string& spec) {
            Status status = CheckLogSpec(spec);
            return status.ok() ? std::string() : status.message();
          },
          ""))
      ->type_name("SPEC");
  a->memory.Declare(f, ConfigMemoryFlagsUse());
}

Status ApplyOverrides(const Args& a, TrainConfig* c) {
  if (!a.output.empty()) c->run.output = a.output;
  if (!a.init.empty()) c->run.init = a.init;
  if (!a.device.empty()) c->run.device = a.device;
  if (a.zero >= 0) c->distributed.zero = static_cast<int>(a.zero);
  if (a.micro_batches > 0) c->run.micro_batches = a.micro_batches;
  if (!a.precision.empty()) {
    SPILL_ASSIGN_OR_RETURN(c->run.precision, ParsePrecision(a.precision, "--precision"));
  }
  if (a.epochs > 0) {
    c->run.epochs = a.epochs;
    c->run.steps = 0;
  }
  SPILL_RETURN_IF_ERROR(a.memory.Apply(&c->memory));
  return c->memory.Validate();
}

// The files the run reads and writes beyond its flags': no output may be an
// input or another output (--report onto the run's own checkpoint, say).
Status CheckRunFiles(const Flags& flags, const TrainConfig& c, const TrainOptions& o) {
  std::vector<NamedFile> inputs = flags.InputFiles(), outputs = flags.OutputFiles();
  inputs.push_back({"the model file", c.model_file});
  inputs.push_back({"model.onnx", c.model_onnx});
  inputs.push_back({"run.init", c.run.init});
  inputs.push_back({"--resume", o.resume});
  const std::string checkpoint = c.run.output + "/checkpoint.npz";
  // A resumed run replaces the checkpoint it started from, by design.
  if (o.resume.empty() || !SameFile(o.resume, checkpoint)) {
    outputs.push_back({"the run's checkpoint", checkpoint});
  }
  outputs.push_back({"the run's log", c.run.output + "/log.jsonl"});
  return CheckDistinctFiles(inputs, outputs);
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
  std::fprintf(stderr, "\n  peak device memory %s of a %s budget (%s)",
               FormatBytes(static_cast<double>(r.peak_device_bytes)).c_str(),
               FormatBytes(static_cast<double>(c.memory.device_budget)).c_str(),
               c.memory.mode.c_str());
  if (r.streamed_steps > 0) {
    std::fprintf(stderr, "; %d steps streamed through host memory", r.streamed_steps);
  }
  if (r.dropped_branches > 0) {
    std::fprintf(
        stderr,
        "\n  stochastic depth: %ld residual branches dropped, %ld layer computations skipped",
        static_cast<long>(r.dropped_branches), static_cast<long>(r.skipped_computations));
  }
  if (r.skipped_steps > 0) {
    std::fprintf(stderr, "\n  fp16 loss scaling: %ld steps skipped (a gradient not finite)",
                 static_cast<long>(r.skipped_steps));
  }
  if (r.lengths_planned > 0) {
    std::fprintf(stderr,
                 "\n  length buckets: %ld lengths planned; %ld of %zu iterations planned anew",
                 static_cast<long>(r.lengths_planned), static_cast<long>(r.replanned_iterations),
                 r.losses.size());
  }
  std::fprintf(stderr, "\n  checkpoint: %s\n", trainer.checkpoint_path().c_str());
}

// The built-in default configuration, or --config's file.
StatusOr<TrainConfig> LoadConfig(const Args& args) {
  if (args.config.empty()) return DefaultTrainConfig();
  return LoadTrainConfig(args.config);
}

// --resume continues a run; --overwrite and --init start a new one.
Status CheckRunMode(const Args& args) {
  const bool resuming = args.resume_default || !args.resume.empty();
  if (resuming && args.overwrite) {
    return InvalidArgument(
        "--resume continues a run and --overwrite replaces it; give one of them");
  }
  if (resuming && !args.init.empty()) {
    return InvalidArgument(
        "--resume continues a run from its checkpoint and --init starts a new one from another's "
        "parameters; give one");
  }
  return Status::Ok();
}

TrainOptions OptionsFor(const Args& args, const TrainConfig& config) {
  TrainOptions options;
  options.max_steps = args.max_steps;
  options.memory_log = args.memory_log;
  options.progress = !args.no_progress;
  options.profile = args.profile;
  options.trace_dir = args.trace;
  options.link_gbps = args.link_gbps;
  options.overwrite = args.overwrite;
  options.timeline = args.timeline;
  options.html = args.html;
  options.resume = args.resume_default ? config.run.output + "/checkpoint.npz" : args.resume;
  return options;
}

// Rank 0 alone prints and writes files.
void QuietOtherRanks(const Communicator& world, TrainOptions* options, Args* args) {
  if (world.rank() == 0) return;
  options->progress = options->verbose = false;
  options->memory_log = options->trace_dir = options->timeline = options->html = args->report = "";
}

// Where the data comes from: its path, or a pair corpus's files or task.
std::string DataSource(const DataConfig& d) {
  if (d.dataset != "pairs") return d.path;
  const PairOptions& p = d.pairs;
  if (!p.synthetic.empty()) return "synthetic " + p.synthetic;
  if (!p.source.empty()) return p.source + ", " + p.target;
  std::string catalogs;
  for (const std::string& c : p.catalogs) catalogs += (catalogs.empty() ? "" : ", ") + c;
  return catalogs;
}

void PrintStart(const Communicator& world, const Trainer& trainer, const TrainConfig& c) {
  if (world.rank() != 0) return;
  std::fprintf(stderr, "training %s on %s (%s), batch %ld, memory %s%s\n",
               trainer.net().name().c_str(), c.data.dataset.c_str(), DataSource(c.data).c_str(),
               c.data.batch, c.memory.Describe().c_str(),
               c.run.precision == Precision::kBf16
                   ? ", activations and their gradients in bf16 (computed in float32)"
                   : "");
  if (world.size() > 1) {
    std::fprintf(stderr, "data parallel: %d ranks of batch %ld, gradients via host memory%s%s\n",
                 world.size(), trainer.net().batch(),
                 c.distributed.zero == 1 ? ", solver state sharded (zero 1)"
                 : c.distributed.zero == 2
                     ? ", solver state sharded, gradients leave the device (zero 2)"
                 : c.distributed.zero == 3
                     ? ", parameters and solver state sharded, each layer's parameters gathered "
                       "for its steps (zero 3)"
                     : "",
                 world.cuda_aware() ? " (the MPI library is CUDA-aware)" : "");
  }
}

// Prints and writes what the run ended with; the exit code.
int Finish(const Communicator& world, const Args& args, const TrainConfig& config,
           const Trainer& trainer, Status status) {
  if (world.rank() == 0 && (status.ok() || status.code() == StatusCode::kCancelled)) {
    PrintSummary(trainer, config);
  }
  if (args.profile) std::fputs(trainer.ProfileTable().c_str(), stderr);
  if (status.code() == StatusCode::kOutOfMemory) {
    status = ExplainOutOfMemory(status, trainer.net().view(), config.memory);
  }
  if (!args.report.empty()) {
    Status written = WriteTextFile(args.report, trainer.report().ToJson(config.memory), "--report");
    if (status.ok()) status = written;
  }
  if (status.code() == StatusCode::kCancelled) {
    if (world.rank() == 0) {
      std::fprintf(stderr, "train: %s; continue with --resume\n", status.message().c_str());
    }
    return kStoppedExitCode;
  }
  return ReportStatus(ToolName().c_str(), status);
}

int Main(int argc, char** argv) {
  Flags flags("train", "Trains a network from a YAML configuration (see README, Training).");
  Args args;
  Declare(flags, &args);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  args.resume_default = flags.app().count("--resume") > 0 && args.resume.empty();
  if (!args.log.empty()) ConfigureLogging(args.log);
  if (args.print_default) {
    std::fputs(DefaultTrainConfig().text.c_str(), stdout);
    return 0;
  }
  StatusOr<TrainConfig> config = LoadConfig(args);
  if (!config.ok()) return ReportStatus(ToolName().c_str(), config.status());
  Status status = CheckRunMode(args);
  if (!status.ok()) return ReportStatus(ToolName().c_str(), status, 2);
  status = ApplyOverrides(args, &*config);  // the config alone is valid: a flag is wrong
  if (!status.ok()) return ReportStatus(ToolName().c_str(), status, 2);
  TrainOptions options = OptionsFor(args, *config);
  status = CheckRunFiles(flags, *config, options);
  if (!status.ok()) return ReportStatus(ToolName().c_str(), status, 2);
  const Communicator& world = Communicator::World();
  QuietOtherRanks(world, &options, &args);
  auto created = Trainer::Create(*config, options);
  if (!created.ok()) return ReportStatus(ToolName().c_str(), created.status());
  Trainer& trainer = **created;
  PrintStart(world, trainer, *config);
  InstallSignalHandlers();
  return Finish(world, args, *config, trainer, trainer.Run());
}

}  // namespace
}  // namespace spill

// Under mpirun a rank that fails has printed its error; aborting the job
// ends the other ranks, which may be waiting for it in a collective.
int main(int argc, char** argv) {
  spill::Communicator& world = spill::Communicator::World();
  const int code =
      spill::RunTool(spill::ToolName().c_str(), [&] { return spill::Main(argc, argv); });
  if (world.size() > 1 && code != 0 && code != spill::kStoppedExitCode) world.Abort(code);
  world.Finalize();
  return code;
}
