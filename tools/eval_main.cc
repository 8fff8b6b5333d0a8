// eval: test loss and accuracy of a checkpoint on its training config's test
// split.
//
//   eval --config configs/lenet_fashion.yaml --checkpoint runs/lenet/checkpoint.npz
//   eval --config X --checkpoint Y --memory superneurons --device-memory 64MiB --json
//   eval --config X --checkpoint Y --html memory.html   the memory page of the last batch
//
// The network, its batch and the data pipeline are the config's, so the
// figures equal the ones `train` printed for the same checkpoint, under any
// memory mode and budget (see tools/trainer/inference.h).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "framework/base/files.h"
#include "memory/report/memory_page.h"
#include "tools/common/cli.h"
#include "tools/common/memory_flags.h"
#include "tools/trainer/inference.h"

namespace spill {
namespace {

struct Args {
  std::string config, checkpoint, device, html, precision;
  MemoryFlags memory;  // as given: each overrides the config's memory: section
  bool json = false;
};

void Declare(Flags& f, Args* a) {
  f.InputFile("--config", &a->config, "training configuration the checkpoint was trained with")
      ->required();
  f.InputFile("--checkpoint", &a->checkpoint, "checkpoint (.npz) written by train")->required();
  f.Device(&a->device, "override run.device");
  f.Choice("--precision", &a->precision,
           "fp32 or bf16 (activations in 16 bits; the weights are float32 either way) "
           "(default: the precision the checkpoint was trained in)",
           {"fp32", "bf16", "fp16", "tf32"});
  f.Flag("--json", &a->json, "print the figures as one JSON object");
  f.OutputFile("--html", &a->html,
               "write the memory page of the last test batch: one self-contained HTML file with "
               "its curve per step, address space and step details");
  MemoryFlagsUse use = ConfigMemoryFlagsUse();
  use.trains = false;  // forward passes only
  a->memory.Declare(f, use);
}

Status ApplyOverrides(const Args& a, TrainConfig* c) {
  if (!a.device.empty()) c->run.device = a.device;
  SPILL_RETURN_IF_ERROR(a.memory.Apply(&c->memory));
  if (!a.html.empty()) c->memory.record_events = true;
  return c->memory.Validate();
}

void Print(const Args& a, const TrainConfig& c, const EvalResult& r) {
  if (a.json) {
    const nlohmann::ordered_json out = {
        {"checkpoint", a.checkpoint}, {"test_loss", r.loss}, {"test_accuracy", r.accuracy},
        {"correct", r.correct},       {"images", r.count},   {"memory_mode", c.memory.mode}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("%s: test loss %.4f, test accuracy %.2f%% (%ld of %ld images, memory %s)\n",
              a.checkpoint.c_str(), r.loss, 100 * r.accuracy, r.correct, r.count,
              c.memory.mode.c_str());
}

// The memory page of the last batch evaluated.
Status WriteMemoryPage(const Args& a, const TrainConfig& c, const Inference& inference) {
  const Net& net = inference.net();
  const MemoryRuntime& runtime = inference.runtime();
  MemoryPage page(PageSubject{
      net.name() + ", batch " + std::to_string(net.batch()) + PrecisionNote(net.precision()),
      "eval: the last test batch, measured (" + a.checkpoint + ")", &net.schedule(),
      net.layer_names()});
  page.AddMode(RunPageMode(c.memory, runtime.log(), runtime.events(),
                           runtime.allocator().PeakFootprint(), nullptr));
  return WriteTextFile(a.html, page.Html(), "--html");
}

int Main(int argc, char** argv) {
  Flags flags("eval", "Test loss and accuracy of a checkpoint (see README, Evaluate).");
  Args args;
  Declare(flags, &args);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  auto config = LoadTrainConfig(args.config);
  if (!config.ok()) return ReportStatus("eval", config.status());
  Status status = ApplyOverrides(args, &*config);  // the config alone is valid: a flag is wrong
  if (!status.ok()) return ReportStatus("eval", status, 2);
  std::optional<Precision> precision;
  if (!args.precision.empty()) precision = *ParsePrecision(args.precision, "--precision");
  auto inference = Inference::Create(*config, args.checkpoint, /*needs_data=*/true, precision);
  if (!inference.ok()) return ReportStatus("eval", inference.status());
  auto result = (*inference)->Evaluate();
  if (!result.ok()) return ReportStatus("eval", result.status());
  Print(args, *config, *result);
  if (!args.html.empty()) {
    status = WriteMemoryPage(args, *config, **inference);
    if (!status.ok()) return ReportStatus("eval", status);
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("eval", [&] { return spill::Main(argc, argv); });
}
