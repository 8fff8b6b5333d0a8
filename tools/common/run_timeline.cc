// The timeline of real iterations: RunRecorder and MeasureRun (declared in
// timeline_tools.h). Times come from one clock (MonotonicSeconds): the
// executor's compute spans, the CPU device's copy spans and the memory
// runtime's event timestamps, all relative to the iteration's start.
#include <algorithm>

#include "framework/base/clock.h"
#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/device/device_registry.h"
#include "framework/graph/initializer.h"
#include "framework/solver/solver.h"
#include "tools/common/net_options.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

constexpr double kLearningRate = 0.01;

bool IsCopy(const MemoryEvent& e) {
  return (e.type == MemoryEventType::kBeginOffload && e.bytes > 0) ||
         e.type == MemoryEventType::kBeginPrefetch;
}

// Copy slices from the copy workers' spans, on the lane of their direction,
// named after the transfers the runtime began (each copy queue runs its
// direction's in that order).
void AddCopies(const std::vector<CopySpan>& spans, const std::vector<MemoryEvent>& events,
               const Schedule& schedule, double t0, Timeline* timeline) {
  std::vector<const MemoryEvent*> copies[2];  // by direction: to the device, to the host
  for (const MemoryEvent& e : events) {
    if (IsCopy(e)) copies[e.type == MemoryEventType::kBeginOffload].push_back(&e);
  }
  size_t spans_each_way[2] = {0, 0};
  for (const CopySpan& span : spans) spans_each_way[span.kind == CopyKind::kDeviceToHost]++;
  // Named where each direction's spans and transfers pair up one to one.
  const bool named[2] = {copies[0].size() == spans_each_way[0],
                         copies[1].size() == spans_each_way[1]};
  size_t next[2] = {0, 0};
  for (const CopySpan& span : spans) {
    const bool to_host = span.kind == CopyKind::kDeviceToHost;
    const MemoryEvent* e = named[to_host] ? copies[to_host][next[to_host]++] : nullptr;
    TimelineSlice s;
    s.lane = to_host ? Lane::kToHost : Lane::kToDevice;
    s.category = to_host ? "offload" : "prefetch";
    s.name = std::string(to_host ? "offload " : "prefetch ") +
             (e != nullptr ? schedule.tensors[e->tensor].name : "");
    s.start = span.begin - t0;
    s.duration = span.end - span.begin;
    s.step = e != nullptr ? e->step : -1;
    s.bytes = span.bytes;
    timeline->slices.push_back(s);
  }
}

}  // namespace

RunRecorder::RunRecorder(Executor& executor, MemoryRuntime& runtime, Device& device)
    : executor_(executor), runtime_(runtime), device_(device) {
  executor_.set_recording(true);
  runtime_.set_event_clock(MonotonicSeconds);
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device_)) cpu->set_record_copies(true);
}

RunRecorder::~RunRecorder() {
  executor_.set_recording(false);
  runtime_.set_event_clock(nullptr);
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device_)) cpu->set_record_copies(false);
}

void RunRecorder::Begin() {
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device_)) cpu->TakeCopySpans();  // earlier ones
  begin_ = MonotonicSeconds();
  update_begin_ = update_end_ = begin_;
}

void RunRecorder::Update(double begin, double end) {
  update_begin_ = begin;
  update_end_ = end;
}

Timeline RunRecorder::Finish(const Net& net, const std::string& title) {
  spans_ = executor_.spans();
  const std::vector<MemoryEvent>& events = runtime_.events();
  Timeline timeline;
  timeline.title = title;
  double end = update_end_;
  for (const Executor::ComputeSpan& span : spans_) {
    TimelineSlice s;
    s.name = net.layer(span.layer).name() + (span.recompute                ? " recompute"
                                             : span.pass == Pass::kForward ? " forward"
                                                                           : " backward");
    s.category = span.recompute                ? "recompute"
                 : span.pass == Pass::kForward ? "forward"
                                               : "backward";
    s.start = span.begin - begin_;
    s.duration = span.end - span.begin;
    s.step = span.step;
    timeline.slices.push_back(s);
    end = std::max(end, span.end);
  }
  timeline.slices.push_back({Lane::kCompute, "update", "update", update_begin_ - begin_,
                             update_end_ - update_begin_, -1});
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device_)) {
    const std::vector<CopySpan> copies = cpu->TakeCopySpans();
    for (const CopySpan& c : copies) end = std::max(end, c.end);
    AddCopies(copies, events, net.schedule(), begin_, &timeline);
  }
  std::vector<double> times;
  for (const MemoryEvent& e : events) times.push_back(e.time - begin_);
  timeline.memory = MemorySamples(events, times, BaseDeviceBytes(runtime_.log(), events));
  timeline.seconds = end - begin_;
  return timeline;
}

void RunRecorder::AddStepTimes(const Net& net, StepTimes* times) const {
  const MemoryLog& log = runtime_.log();
  const Schedule& schedule = net.schedule();
  for (const Executor::ComputeSpan& span : spans_) {
    // A recomputation reruns its layer's forward under its forward's algorithms.
    const int step = span.recompute ? schedule.forward_step[span.layer] : span.step;
    times->Add(net.layer(span.layer).name(), span.recompute ? Pass::kForward : span.pass,
               log.steps[step].algorithm, span.end - span.begin);
  }
  times->AddUpdate(update_end_ - update_begin_);
  // The host's time between computations: the median gap (longer gaps are
  // waits for copies or compactions, which the simulator models itself).
  std::vector<double> gaps;
  for (size_t i = 1; i < spans_.size(); ++i) {
    gaps.push_back(std::max(0.0, spans_[i].begin - spans_[i - 1].end));
  }
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    times->AddHostStep(gaps[gaps.size() / 2]);
  }
}

StatusOr<std::unique_ptr<TracedRun>> TracedRun::Create(const NetSpec& spec, int64_t batch,
                                                       Device& device,
                                                       const MemoryOptions& memory) {
  std::unique_ptr<TracedRun> r(new TracedRun());
  r->device_ = &device;
  SPILL_ASSIGN_OR_RETURN(r->net_,
                         Net::Build(spec, NetOptionsFor(batch, device.type(), memory.workspace)));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*r->net_, device));
  SolverConfig sgd;
  sgd.momentum = 0.9;
  SPILL_ASSIGN_OR_RETURN(r->solver_, Solver::Create(sgd));
  r->solver_->AddState(*r->net_);
  MemoryOptions options = memory;
  options.record_events = true;
  SPILL_ASSIGN_OR_RETURN(r->runtime_, MemoryRuntime::Create(r->net_->view(), options, &device));
  r->executor_ = std::make_unique<Executor>(*r->net_, &device, *r->runtime_);
  SPILL_RETURN_IF_ERROR(InitializeParameters(*r->net_, *r->runtime_, 1));
  SPILL_RETURN_IF_ERROR(r->solver_->ResetState(*r->net_, *r->runtime_));
  const Shape in = r->net_->input_shape();
  r->images_.resize(in.numel());
  r->labels_.resize(in.n());
  for (size_t i = 0; i < r->images_.size(); ++i) r->images_[i] = 2 * UniformAt(5, i) - 1;
  for (int64_t i = 0; i < in.n(); ++i) {
    r->labels_[i] = static_cast<float>(i % std::max<int64_t>(r->net_->num_classes(), 1));
  }
  r->recorder_ = std::make_unique<RunRecorder>(*r->executor_, *r->runtime_, device);
  return r;
}

TracedRun::~TracedRun() { recorder_.reset(); }

Status TracedRun::Iterate(bool keep) {
  const HostBatch host{images_.data(), labels_.data()};
  recorder_->Begin();
  const double begin = MonotonicSeconds();
  // As train runs it: parameters kept in host memory are updated during
  // backward, as soon as their gradients are complete.
  solver_->BeginStep(*net_, *runtime_, *device_, kLearningRate);
  SPILL_ASSIGN_OR_RETURN(const LossResult result,
                         executor_->Run(host, Phase::kTrain, iterations_++));
  last_loss_ = result.loss;
  const double update = MonotonicSeconds();
  SPILL_RETURN_IF_ERROR(solver_->FinishStep(*runtime_));
  device_->compute_queue().Synchronize();
  const double end = MonotonicSeconds();
  recorder_->Update(update, end);
  last_ = recorder_->Finish(*net_, net_->name() + ", " + runtime_->options().mode + " (measured)");
  history_.push_back({end - begin, Summarize(last_).compute_seconds});
  if (!keep) return Status::Ok();
  recorder_->AddStepTimes(*net_, &steps_);
  samples_.push_back({end - begin, StepTimes()});
  recorder_->AddStepTimes(*net_, &samples_.back().steps);
  iteration_seconds_ += end - begin;
  compute_seconds_ += Summarize(last_).compute_seconds;
  ++kept_;
  return Status::Ok();
}

StatusOr<MeasuredRun> MeasureRun(const NetSpec& spec, int64_t batch, Device& device,
                                 const MemoryOptions& memory, int iterations) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<TracedRun> r,
                         TracedRun::Create(spec, batch, device, memory));
  for (int i = 0; i <= iterations; ++i) SPILL_RETURN_IF_ERROR(r->Iterate(/*keep=*/i > 0));
  MeasuredRun run;
  run.steps = r->steps();
  run.iteration_seconds = r->mean_iteration_seconds();
  run.compute_seconds = r->mean_compute_seconds();
  run.last = r->last();
  return run;
}

}  // namespace spill
