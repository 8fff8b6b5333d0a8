#include "tests/testing/net_harness.h"

#include <algorithm>
#include <cmath>

#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/device/device_registry.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "framework/graph/net.h"
#include "framework/solver/solver.h"
#include "layers/embedding_layer.h"
#include "memory/runtime/runtime.h"

namespace spill {
namespace testing {
namespace {

// Every parameter (or its gradient) after the run, read wherever it lives;
// gradients used up by an update on the device are left out.
std::vector<std::vector<float>> Fetch(const Net& net, MemoryRuntime& runtime, bool grads) {
  std::vector<std::vector<float>> out;
  const Schedule& s = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    const LayerTensors& lt = s.layers[id];
    for (size_t p = 0; p < lt.params.size(); ++p) {
      TensorId t = grads ? lt.param_grads[p] : lt.params[p];
      if (t == kNoTensor) continue;
      std::vector<float> v(s.tensors[t].shape.numel());
      Status read = runtime.ReadTensor(t, v.data());
      if (!read.ok()) {
        SPILL_CHECK(grads) << read.ToString();
        continue;
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace

namespace {

// SGD with momentum and weight decay: the solver state is a tensor too.
SolverConfig HarnessSolver() {
  SolverConfig sgd;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-3;
  return sgd;
}

// With variable lengths every iteration's records are kept.
void NoteIteration(const MemoryRuntime& runtime, const SyntheticRun& run, TrainTrace* trace) {
  if (run.lengths.empty()) return;
  trace->iteration_logs.push_back(runtime.log());
  trace->iteration_events.push_back(runtime.events());
}

}  // namespace

StatusOr<std::unique_ptr<Net>> BuildTrainingNet(const NetSpec& spec, int64_t batch,
                                                DeviceType device, bool blocked_layouts,
                                                Precision precision) {
  NetOptions options;
  options.batch = batch;
  options.device = device;
  options.blocked_layouts = blocked_layouts;
  options.precision = precision;
  return BuildTrainingNet(spec, options);
}

NetOptions NetOptionsOf(const SyntheticRun& run, DeviceType device) {
  NetOptions options;
  options.batch = run.batch;
  options.device = device;
  options.blocked_layouts = run.blocked_layouts;
  options.layout = run.layout;
  options.precision = run.precision;
  options.slice_copies_from = run.slice_copies_from;
  return options;
}

StatusOr<std::unique_ptr<Net>> BuildTrainingNet(const NetSpec& spec, const NetOptions& options) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, options));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(HarnessSolver()));
  solver->AddState(*net);
  return net;
}

SyntheticRun SmallMemoryRun(const std::string& mode) {
  SyntheticRun run;
  run.batch = 3;
  run.steps = 3;
  run.learning_rate = 0.05f;
  SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok()) << mode;
  run.memory.device_budget = 64 << 20;
  run.memory.host_budget = 16 << 20;
  run.memory.poison_freed = true;
  return run;
}

NetSpec MustParse(const std::string& yaml, const ParamOverrides& overrides) {
  auto spec = ParseNetString(yaml, "test.yaml", overrides);
  SPILL_CHECK(spec.ok()) << spec.status().ToString();
  return *spec;
}

Status BuildStatus(const std::string& yaml, const std::string& label) {
  auto spec = ParseNetString(yaml, label);
  if (!spec.ok()) return spec.status();
  return Net::Build(*spec, {2, DeviceType::kCpu}).status();
}

StatusOr<TrainTrace> TrainSynthetic(const NetSpec& spec, const SyntheticRun& run) {
  DeviceConfig config;
  config.link_bytes_per_second = run.link_bytes_per_second;
  std::unique_ptr<Device> owned;
  if (run.use_device == nullptr) {
    SPILL_ASSIGN_OR_RETURN(owned, CreateDevice(run.device, config));
  }
  Device& device = run.use_device != nullptr ? *run.use_device : *owned;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                         Net::Build(spec, NetOptionsOf(run, device.type())));
  if (run.calibrate) SPILL_RETURN_IF_ERROR(CalibrateNet(*net, device));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(HarnessSolver()));
  solver->AddState(*net);
  GivenPlans given;
  if (run.plans) given.plans = *run.plans;
  SPILL_ASSIGN_OR_RETURN(
      std::unique_ptr<MemoryRuntime> runtime,
      MemoryRuntime::Create(net->view(), run.memory, &device, run.plans ? &given : nullptr));
  Executor executor(*net, &device, *runtime);
  SPILL_RETURN_IF_ERROR(InitializeParameters(*net, *runtime, run.seed));
  if (run.initialize) SPILL_RETURN_IF_ERROR(run.initialize(*net, *runtime));
  SPILL_RETURN_IF_ERROR(solver->ResetState(*net, *runtime));
  const int64_t classes = std::max<int64_t>(net->num_classes(), 1);
  const int64_t vocabulary = InputVocabulary(*net);
  // A loss that ignores a label (padding) sees it at every fifth sample.
  const int64_t ignored = net->layer(net->loss_layers()[0]).ignored_label();
  TrainTrace trace;
  for (int step = 0; step < run.steps; ++step) {
    if (!run.lengths.empty()) {
      SPILL_RETURN_IF_ERROR(net->SetSequenceLength(run.lengths[step % run.lengths.size()]));
      SPILL_RETURN_IF_ERROR(runtime->Reshape(net->view()));
    }
    const Shape input = net->input_shape();
    std::vector<float> images(input.numel()), labels(net->label_shape().numel());
    const int batch_index = run.same_batch ? 0 : step;
    for (size_t i = 0; i < images.size(); ++i) {
      const float u = UniformAt(run.seed + 1000 + batch_index, i);
      images[i] = vocabulary > 0 ? std::floor(u * static_cast<float>(vocabulary)) : 2 * u - 1;
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      labels[i] = static_cast<float>((i * 7 + batch_index) % classes);
      if (ignored != kNoIgnoredLabel && (i + batch_index) % 5 == 2) {
        labels[i] = static_cast<float>(ignored);
      }
    }
    HostBatch batch{images.data(), labels.data()};
    if (run.inference) {
      SPILL_ASSIGN_OR_RETURN(LossResult result, executor.Run(batch, Phase::kEval, run.seed + step));
      trace.losses.push_back(result.loss);
      trace.scores.push_back(executor.scores());
      NoteIteration(*runtime, run, &trace);
      continue;
    }
    solver->BeginStep(*net, *runtime, device, run.learning_rate);
    SPILL_ASSIGN_OR_RETURN(LossResult result, executor.Run(batch, Phase::kTrain, run.seed + step));
    trace.losses.push_back(result.loss);
    trace.scores.push_back(executor.scores());
    if (step + 1 == run.steps) trace.grads = Fetch(*net, *runtime, true);
    SPILL_RETURN_IF_ERROR(solver->FinishStep(*runtime));
    NoteIteration(*runtime, run, &trace);
  }
  trace.replans = runtime->replans();
  trace.params = Fetch(*net, *runtime, false);
  trace.log = runtime->log();
  trace.recomputations = executor.recomputations();
  trace.dropped_branches = executor.depth_stats().dropped_branches;
  trace.to_host = runtime->residency().counters().to_host_bytes;
  trace.to_device = runtime->residency().counters().to_device_bytes;
  trace.footprint = runtime->allocator().PeakFootprint();
  trace.mismatches = runtime->allocator().mismatches();
  trace.events = runtime->events();
  trace.device_pool = runtime->allocator().stats();
  trace.host_pool = runtime->host_pool().stats();
  return trace;
}

}  // namespace testing
}  // namespace spill
