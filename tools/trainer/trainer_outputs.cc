// What a training run writes besides its checkpoints: the trace of its
// first steps (--trace: the network, the solver, the initial state, every
// batch, learning rate and loss, and the first step's gradients), the
// memory log (--memory-log), the measured timeline (--timeline) and the
// memory page of that iteration (--html).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "framework/base/files.h"
#include "framework/io/npz.h"
#include "memory/report/memory_page.h"
#include "memory/report/step_records.h"
#include "memory/report/trace_json.h"
#include "tools/common/net_json.h"
#include "tools/trainer/trainer.h"

namespace spill {

using Json = nlohmann::ordered_json;

Status Trainer::StartTrace() {
  namespace fs = std::filesystem;
  const fs::path dir = options_.trace_dir;
  SPILL_RETURN_IF_ERROR(CreateOutputFolder(dir.string(), "--trace"));
  SPILL_RETURN_IF_ERROR(WriteTextFile((dir / "net.json").string(), NetToJson(*net_), "--trace"));
  const SolverConfig& s = config_.solver;
  const Json solver = {{"type", s.type},         {"momentum", s.momentum},
                       {"nesterov", s.nesterov}, {"weight_decay", s.weight_decay},
                       {"beta1", s.beta1},       {"beta2", s.beta2},
                       {"epsilon", s.epsilon}};
  SPILL_RETURN_IF_ERROR(
      WriteTextFile((dir / "solver.json").string(), solver.dump() + "\n", "--trace"));
  return spill::SaveCheckpoint((fs::path(options_.trace_dir) / "initial.npz").string(), *net_,
                               *runtime_, *device_, solver_.get(), position_, config_.text);
}

// The first step's parameter gradients, for a finer comparison than losses.
Status Trainer::SaveGradients() {
  NpzArchive archive;
  const Schedule& s = net_->schedule();
  for (const Solver::Slot& slot : solver_->slots()) {
    const TensorInfo& info = s.tensors[slot.grad];
    std::vector<float> host(info.shape.numel());
    Status read = runtime_->ReadTensor(slot.grad, host.data());
    if (!read.ok()) {
      return read.WithContext(
          "--trace keeps the first step's gradients, which needs memory.params: "
          "device");
    }
    archive[s.tensors[slot.param].name] = NpyArray::Floats(
        {info.shape.n(), info.shape.c(), info.shape.h(), info.shape.w()}, host.data());
  }
  return WriteNpzAtomically((std::filesystem::path(options_.trace_dir) / "gradients.npz").string(),
                            archive);
}

Status Trainer::FinishTrace() {
  const int64_t steps = static_cast<int64_t>(trace_loss_.size());
  // The batches as the dataset gave them: cut to a length bucket (data.buckets),
  // the network's shapes are the last batch's.
  const int64_t n = net_->batch();
  const Shape in = train_data_->example_shape();
  NpzArchive archive;
  archive["images"] = NpyArray::Floats({steps, n, in.c(), in.h(), in.w()}, trace_images_.data());
  const Shape labels = net_->label_shape();  // one per image, or one per pixel or step
  const int64_t width = lengths_ ? in.w() : labels.w();
  archive["labels"] =
      NpyArray::Floats({steps, n, labels.c(), labels.h(), width}, trace_labels_.data());
  if (lengths_) archive["lengths"] = NpyArray::Floats({steps}, trace_lengths_.data());
  archive["lr"] = NpyArray::Floats({steps}, trace_lr_.data());
  archive["loss"] = NpyArray::Floats({steps}, trace_loss_.data());
  // Stochastic depth: the input each layer (in net.json's order) left out.
  if (std::any_of(trace_dropped_.begin(), trace_dropped_.end(), [](float d) { return d >= 0; })) {
    const int64_t layers = static_cast<int64_t>(net_->schedule().route.size());
    archive["dropped"] = NpyArray::Floats({steps, layers}, trace_dropped_.data());
  }
  return WriteNpzAtomically((std::filesystem::path(options_.trace_dir) / "trace.npz").string(),
                            archive);
}

Status Trainer::WriteMemoryLog() {
  const std::string& path = options_.memory_log;
  const bool json = path.size() > 5 && path.substr(path.size() - 5) == "jsonl";
  return WriteTextFile(path,
                       json ? MemoryLogJson(runtime_->log(), net_->schedule(), net_->layer_names())
                            : MemoryLogCsv(runtime_->log(), net_->schedule(), net_->layer_names()),
                       "--memory-log");
}

Status Trainer::FinishTimeline(double update_begin, double update_end) {
  recorder_->Update(update_begin, update_end);
  traced_iteration_ = report_.losses.size() + 1;
  traced_ = recorder_->Finish(*net_, net_->name() + ", batch " + std::to_string(net_->batch()) +
                                         ", " + config_.memory.mode + ", " + device_->Describe() +
                                         " (measured)");
  if (!options_.html.empty()) traced_page_ = MemoryPageHtml();
  if (device_->type() == DeviceType::kCpu) {
    StepTimes times;
    recorder_->AddStepTimes(*net_, &times);
    SPILL_RETURN_IF_ERROR(SaveStepTimes(net_->view(), device_->type(), times));
  }
  // The second iteration of the run: caches are warm.
  return report_.losses.size() == 1 ? WriteTimeline() : Status::Ok();
}

Status Trainer::WriteTimeline() {
  if (timeline_written_ || traced_.slices.empty()) return Status::Ok();
  timeline_written_ = true;
  if (!options_.html.empty()) {
    SPILL_RETURN_IF_ERROR(WriteTextFile(options_.html, traced_page_, "--html"));
    if (options_.verbose) {
      std::fprintf(stderr, "memory page of iteration %zu written to %s\n", traced_iteration_,
                   options_.html.c_str());
    }
  }
  if (options_.timeline.empty()) return Status::Ok();
  SPILL_RETURN_IF_ERROR(WriteTextFile(options_.timeline, TimelineTraceJson(traced_), "--timeline"));
  if (options_.verbose) {
    std::fprintf(stderr, "timeline of iteration %zu written to %s\n", traced_iteration_,
                 options_.timeline.c_str());
  }
  return Status::Ok();
}

// The iteration just traced: its records and events (the runtime's last
// iteration) and its measured queues.
std::string Trainer::MemoryPageHtml() const {
  MemoryPage page(PageSubject{
      net_->name() + ", batch " + std::to_string(net_->batch()) + PrecisionNote(net_->precision()),
      "train: training iteration " + std::to_string(traced_iteration_) + " measured on " +
          device_->Describe() + " (" + config_.file + ")",
      &net_->schedule(), net_->layer_names()});
  page.AddMode(RunPageMode(config_.memory, runtime_->log(), runtime_->events(),
                           runtime_->allocator().PeakFootprint(), &traced_));
  return page.Html();
}

}  // namespace spill
