// bench_evaluate: the fast evaluator (memory/evaluate.h) against the exact
// check it stands in for - Plan() under the `ideal` allocator plus the
// timeline simulator's replay of its event log - on random decision vectors
// of a network (ResNet-50 at batch 32 by default).
//
//   bazel run -c opt //tools/bench:bench_evaluate                 # ResNet-50 b32, 40 vectors
//   bazel run -c opt //tools/bench:bench_evaluate -- models/vgg16.yaml 32 40
//
// Both sides score the same vectors, interleaved (one evaluator call, one
// Plan() + simulation), so a loaded machine slows them alike; each side's
// time is its median. Every vector's peak and time are compared: a
// difference aborts the benchmark. Convolution times come from the model,
// not measured, so both sides see the same algorithms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "framework/base/units.h"
#include "framework/config/net_spec.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_timer.h"
#include "memory/evaluate.h"
#include "memory/planning/planner.h"
#include "memory/scheduler_registry.h"
#include "memory/sim/timeline.h"

namespace spill {
namespace {

constexpr double kRelativeTolerance = 1e-6;
constexpr uint64_t kSeed = 27;

PhasePlans* given_plans = nullptr;
const bool kGiven =
    RegisterScheduler({"bench_evaluate_given", "the plans bench_evaluate hands in",
                       [](const NetworkView&, const MemoryOptions&) -> StatusOr<PhasePlans> {
                         return *given_plans;
                       }});

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status Run(const std::string& file, int64_t batch, int vectors) {
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(file));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {batch, DeviceType::kCpu}));
  const NetworkView view = net->view();
  MemoryOptions options;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode("offload", &options));
  options.scheduler = "bench_evaluate_given";
  options.allocator = "ideal";
  options.device_budget = kUnlimitedBudget;
  options.record_events = true;
  SPILL_ASSIGN_OR_RETURN(DeviceProfile profile, FindDeviceProfile("gtx1080ti-pcie3"));
  SPILL_ASSIGN_OR_RETURN(EvalModel model, BuildEvalModel(view, options, profile, 0));
  Evaluator evaluator(model);
  std::mt19937_64 rng(kSeed);
  std::vector<double> fast, exact;
  size_t events = 0;
  for (int i = 0; i < vectors; ++i) {
    const Decisions d = RandomDecisions(model, rng);
    auto start = std::chrono::steady_clock::now();
    const Evaluation e = evaluator.Run(d);
    fast.push_back(Since(start));
    start = std::chrono::steady_clock::now();
    PhasePlans plans = ToPhasePlans(model, d);
    given_plans = &plans;
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
    const IterationCosts costs = ModelCosts(view, plan.log, profile, nullptr);
    const Timeline timeline = SimulateIteration(view, plan.events, costs, profile,
                                                BaseDeviceBytes(plan.log, plan.events));
    exact.push_back(Since(start));
    events = plan.events.size();
    if (e.peak != plan.peak ||
        std::abs(e.seconds - timeline.seconds) > kRelativeTolerance * timeline.seconds) {
      return Internal("vector " + std::to_string(i) + ": the evaluator gives peak " +
                      std::to_string(e.peak) + " and " + std::to_string(e.seconds) +
                      " s; Plan() and the simulator " + std::to_string(plan.peak) + " and " +
                      std::to_string(timeline.seconds) + " s");
    }
  }
  const double f = Median(fast), x = Median(exact);
  std::printf("%s, batch %ld: %zu steps, %zu tensors, %zu candidates, %zu events per iteration\n",
              net->name().c_str(), static_cast<long>(batch), model.schedule->steps.size(),
              model.schedule->tensors.size(), model.candidates.size(), events);
  std::printf("| scorer | median per plan | |\n|---|---|---|\n");
  std::printf("| evaluator (memory/evaluate.h) | %.3f ms | |\n", f * 1e3);
  std::printf("| Plan() + SimulateIteration | %.3f ms | |\n", x * 1e3);
  std::printf("| ratio | %.0fx | %d random plans, peaks and times equal |\n", x / f, vectors);
  return Status::Ok();
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  const std::string file = argc > 1 ? argv[1] : "models/resnet50.yaml";
  auto batch = spill::ParseInt64(argc > 2 ? argv[2] : "32");
  auto vectors = spill::ParseInt64(argc > 3 ? argv[3] : "40");
  constexpr int64_t kMaxVectors = 1000000;
  if (!batch.ok() || !vectors.ok() || *batch <= 0 || *vectors <= 0 || *vectors > kMaxVectors) {
    std::fprintf(stderr, "usage: bench_evaluate [NETWORK.yaml [BATCH [VECTORS]]]\n");
    return 2;
  }
  spill::Status status = spill::Run(file, *batch, static_cast<int>(*vectors));
  if (!status.ok()) {
    std::fprintf(stderr, "bench_evaluate: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
