// The timeline of real iterations: RunRecorder and MeasureRun (declared in
// timeline_tools.h). Times come from one clock (MonotonicSeconds): the
// executor's compute spans, the CPU device's copy spans and the memory
// runtime's event timestamps, all relative to the iteration's start.
#include <algorithm>

#include "framework/clock.h"
#include "framework/cpu_device.h"
#include "framework/device_registry.h"
#include "framework/initializer.h"
#include "framework/random.h"
#include "framework/solver.h"
#include "tools/timeline_tools.h"

namespace spill {
namespace {

constexpr double kLearningRate = 0.01;

bool IsCopy(const MemoryEvent& e) {
  return (e.type == MemoryEventType::kBeginOffload && e.bytes > 0) ||
         e.type == MemoryEventType::kBeginPrefetch;
}

// Copy slices from the copy worker's spans, named after the transfers the
// runtime began (the copy queue runs them in that order).
void AddCopies(const std::vector<CopySpan>& spans, const std::vector<MemoryEvent>& events,
               const Schedule& schedule, double t0, Timeline* timeline) {
  std::vector<const MemoryEvent*> copies;
  for (const MemoryEvent& e : events) {
    if (IsCopy(e)) copies.push_back(&e);
  }
  const bool named = copies.size() == spans.size();
  for (size_t i = 0; i < spans.size(); ++i) {
    const bool to_host = spans[i].kind == CopyKind::kDeviceToHost;
    TimelineSlice s;
    s.lane = Lane::kCopy;
    s.category = to_host ? "offload" : "prefetch";
    s.name = std::string(to_host ? "offload " : "prefetch ") +
             (named ? schedule.tensors[copies[i]->tensor].name : "");
    s.start = spans[i].begin - t0;
    s.duration = spans[i].end - spans[i].begin;
    s.step = named ? copies[i]->step : -1;
    s.bytes = spans[i].bytes;
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
}

StatusOr<MeasuredRun> MeasureRun(const NetSpec& spec, int64_t batch, Device& device,
                                 const MemoryOptions& memory, int iterations) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, device.type()}));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net, device));
  SolverConfig sgd;
  sgd.momentum = 0.9;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
  solver->AddState(*net);
  MemoryOptions options = memory;
  options.record_events = true;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<MemoryRuntime> runtime,
                         MemoryRuntime::Create(net->view(), options, &device));
  Executor executor(*net, &device, *runtime);
  InitializeParameters(*net, *runtime, device, 1);
  solver->ResetState(*net, *runtime, device);
  const Shape in = net->input_shape();
  std::vector<float> images(in.numel()), labels(in.n());
  for (size_t i = 0; i < images.size(); ++i) images[i] = 2 * UniformAt(5, i) - 1;
  for (int64_t i = 0; i < in.n(); ++i) {
    labels[i] = static_cast<float>(i % std::max<int64_t>(net->num_classes(), 1));
  }
  const HostBatch host{images.data(), labels.data()};
  RunRecorder recorder(executor, *runtime, device);
  MeasuredRun run;
  for (int i = 0; i <= iterations; ++i) {
    recorder.Begin();
    const double begin = MonotonicSeconds();
    SPILL_RETURN_IF_ERROR(executor.Run(host, Phase::kTrain, i).status());
    const double update = MonotonicSeconds();
    solver->Update(*net, *runtime, device, kLearningRate);
    device.compute_queue().Synchronize();
    const double end = MonotonicSeconds();
    recorder.Update(update, end);
    Timeline timeline = recorder.Finish(*net, net->name() + ", " + memory.mode);
    if (i == 0) continue;  // warm-up
    recorder.AddStepTimes(*net, &run.steps);
    run.iteration_seconds += (end - begin) / iterations;
    run.compute_seconds += Summarize(timeline).compute_seconds / iterations;
    run.last = std::move(timeline);
  }
  return run;
}

}  // namespace spill
