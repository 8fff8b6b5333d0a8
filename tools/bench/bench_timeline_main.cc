// bench_timeline: checks the timeline simulator against real runs. For each
// network and memory mode at its smallest budget, it
//   1. measures every step's compute time on this CPU (unthrottled copies),
//   2. runs the mode with the CPU device's copies throttled to each link
//      bandwidth and measures the time per iteration,
//   3. predicts that time by replaying the plan's event log on the "cpu"
//      profile (the measured step times, the throttled link, this CPU's
//      calibrated copy latency),
// and prints predicted beside measured as a Markdown table.
//
// On a shared machine other processes take the cores at random moments
// (with two OpenMP threads, that meet at a barrier after every loop,
// iterations took 1x to 4x their time; tools/bench/bench_timeline.sh runs one).
// So the runs take turns iteration by iteration - reference, each throttled
// run, reference again - and each throttled iteration is predicted from the
// reference iteration next to it (the one before it for the first half of
// the links, the one after it for the rest: they ran back to back, under
// much the same load); the table gives medians over the pairs. Load only
// ever slows a run down, so it also compares the fastest iteration of each
// side: the throttled run's against the prediction from the reference's.
// "replay error" is the replay with the measured iteration's own step
// times: it separates the queue model's error from compute that ran slower
// or faster than in the reference iteration.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/base/clock.h"
#include "framework/device/cpu_device.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planning/planner.h"
#include "memory/report/trace_json.h"
#include "tools/common/cli.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

struct Args {
  std::vector<std::string> networks = {"resnet18", "vgg16"};
  std::vector<std::string> modes = {"liveness", "offload", "offload_recompute", "superneurons"};
  std::vector<double> gbps = {0.2, 1.0};
  int iterations = 5;
  std::string workspace = "fastest";
  std::string timelines;  // directory for measured and predicted traces
  bool calibrate = false;
};

// The flags; returns -1 when the benchmark goes on, else the exit code.
int ParseFlags(int argc, char** argv, Args* a) {
  Flags flags("bench_timeline",
              "The timeline simulator against real runs: each network and memory mode at its "
              "smallest budget, run with copies throttled to each link bandwidth, predicted "
              "beside measured.");
  flags.List("--networks", &a->networks,
             "resnet18 (CIFAR stem, batch 64) and/or vgg16 (32x32, batch 32)");
  flags.List("--modes", &a->modes, "memory modes, each at its smallest budget");
  flags.FloatList("--gbps", &a->gbps, "link bandwidths to throttle copies to, GB/s", 1e-6, 1e6);
  int64_t iterations = a->iterations;
  flags.Int("--iterations", &iterations, "timed iterations per throttled run", 1, 1000000);
  flags.Flag("--calibrate", &a->calibrate,
             "calibrate this CPU again (copy latency, rates) instead of reading the cache");
  flags.String("--timelines", &a->timelines,
               "also write each row's last measured iteration and its prediction as "
               "Chrome/Perfetto traces (NETWORK_MODE_GBPS_{measured,predicted}.json) here");
  flags.String("--workspace", &a->workspace,
               "convolution workspace policy (fastest: the fastest algorithm everywhere, its "
               "workspace part of the smallest budget; dynamic picks slow algorithms without "
               "workspace at the smallest budget)");
  const int code = flags.Parse(argc, argv);
  a->iterations = static_cast<int>(iterations);
  return code;
}

struct Subject {
  std::string name;
  std::string label;
  NetSpec spec;
  int64_t batch = 0;
};

StatusOr<Subject> LoadSubject(const std::string& name) {
  Subject s;
  s.name = name;
  ParamOverrides params;
  params["classes"] = YAML::Node(10);
  params["size"] = YAML::Node(32);
  if (name == "resnet18") {
    params["stem"] = YAML::Node("cifar");
    s.label = "ResNet-18 (CIFAR stem) b64";
    s.batch = 64;
  } else if (name == "vgg16") {
    s.label = "VGG-16 32x32 b32";
    s.batch = 32;
  } else {
    return InvalidArgument("unknown network '" + name + "' (known: resnet18, vgg16)");
  }
  SPILL_ASSIGN_OR_RETURN(s.spec, LoadNetFile("models/" + name + ".yaml", params));
  return s;
}

// The plan a run of `mode` at its smallest budget makes, with an SGD
// solver's state as MeasureRun adds it.
StatusOr<MemoryPlan> PlanAtMinimum(const Subject& s, const std::string& mode,
                                   const std::string& workspace, Net** net_out,
                                   std::unique_ptr<Net>* owned, MemoryOptions* options) {
  SPILL_ASSIGN_OR_RETURN(*owned, Net::Build(s.spec, {s.batch, DeviceType::kCpu}));
  SolverConfig sgd;
  sgd.momentum = 0.9;
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(sgd));
  solver->AddState(**owned);
  *net_out = owned->get();
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, options));
  SPILL_ASSIGN_OR_RETURN(options->workspace, ParseWorkspacePolicy(workspace));
  options->record_events = true;
  SPILL_ASSIGN_OR_RETURN(options->device_budget, MinimumBudget((*owned)->view(), *options));
  return Plan((*owned)->view(), *options);
}

Status WriteTimelines(const std::string& dir, const Subject& s, const std::string& mode,
                      double gbps, const TracedRun& run, const Prediction& predicted) {
  std::filesystem::create_directories(dir);
  char stem[160];
  std::snprintf(stem, sizeof(stem), "%s_%s_%g", s.name.c_str(), mode.c_str(), gbps);
  const auto path = [&](const char* kind) {
    return (std::filesystem::path(dir) / (std::string(stem) + "_" + kind + ".json")).string();
  };
  Timeline prediction = predicted.timeline;
  prediction.title =
      run.net().name() + ", " + mode + ", " + std::to_string(gbps) + " GB/s (predicted)";
  std::ofstream(path("measured")) << TimelineTraceJson(run.last());
  std::ofstream(path("predicted")) << TimelineTraceJson(prediction);
  const TimelineSummary m = Summarize(run.last()), p = predicted.summary;
  for (const auto& [wall, compute] : run.history()) {
    std::fprintf(stderr, "  iteration %.3f s, compute %.3f s\n", wall, compute);
  }
  std::fprintf(stderr,
               "%s: measured %.3f s = compute %.3f + other %.3f (copies %.3f, %.0f%% hidden); "
               "predicted %.3f s = compute %.3f + waits %.3f + %.3f (copies %.3f)\n",
               stem, m.iteration_seconds, m.compute_seconds,
               m.iteration_seconds - m.compute_seconds, m.copy_seconds, 100 * m.overlap(),
               p.iteration_seconds, p.compute_seconds, p.compute_wait_seconds, p.host_wait_seconds,
               p.copy_seconds);
  return Status::Ok();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Kept iteration i of the throttled run is predicted from kept iteration
// i + `offset` of the reference run (the one next to it); medians over the
// pairs.
struct Row {
  double predicted = 0, measured = 0;
  double error = 0;          // median of predicted / measured - 1
  double replay_error = 0;   // the same with the measured iteration's own step times
  double fastest_error = 0;  // the fastest throttled iteration against the prediction
                             // from the fastest reference iteration
  Prediction prediction;     // of the last pair
};

// The kept iteration of `run` that took the least wall time.
const TracedRun::Sample& Fastest(const TracedRun& run) {
  return *std::min_element(
      run.samples().begin(), run.samples().end(),
      [](const TracedRun::Sample& a, const TracedRun::Sample& b) { return a.seconds < b.seconds; });
}

Row Compare(const NetworkView& view, const MemoryPlan& plan, const DeviceProfile& profile,
            const std::string& mode, const TracedRun& reference, const TracedRun& run,
            size_t offset) {
  std::vector<double> predicted, measured, errors, replay_errors;
  Row row;
  for (size_t i = 0; i < run.samples().size(); ++i) {
    const TracedRun::Sample& m = run.samples()[i];
    row.prediction = Predict(view, plan, profile, &reference.samples()[i + offset].steps, mode);
    const Prediction own = Predict(view, plan, profile, &m.steps, mode);
    predicted.push_back(row.prediction.summary.iteration_seconds);
    measured.push_back(m.seconds);
    errors.push_back(predicted.back() / m.seconds - 1);
    replay_errors.push_back(own.summary.iteration_seconds / m.seconds - 1);
  }
  row.predicted = Median(predicted);
  row.measured = Median(measured);
  row.error = Median(errors);
  row.replay_error = Median(replay_errors);
  const Prediction fastest = Predict(view, plan, profile, &Fastest(reference).steps, mode);
  row.fastest_error = fastest.summary.iteration_seconds / Fastest(run).seconds - 1;
  return row;
}

// The runs take turns, iteration by iteration, so that load from elsewhere
// on the machine falls on the step times and on the runs they predict alike.
Status RunMode(const Args& args, const Subject& s, const std::string& mode,
               const CpuCalibration& calibration) {
  std::unique_ptr<Net> owned;
  Net* net = nullptr;
  MemoryOptions options;
  SPILL_ASSIGN_OR_RETURN(MemoryPlan plan,
                         PlanAtMinimum(s, mode, args.workspace, &net, &owned, &options));
  // Step times come from a run whose copies go at memcpy speed.
  std::vector<std::unique_ptr<CpuDevice>> devices;
  std::vector<std::unique_ptr<TracedRun>> runs;
  devices.push_back(std::make_unique<CpuDevice>());
  for (double gbps : args.gbps) {
    devices.push_back(std::make_unique<CpuDevice>(CpuDeviceOptions{gbps * 1e9}));
  }
  for (auto& device : devices) {
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<TracedRun> run,
                           TracedRun::Create(s.spec, s.batch, *device, options));
    runs.push_back(std::move(run));
  }
  // Reference, throttled runs, ..., reference: one more reference iteration
  // at the end, after the last round.
  for (int i = 0; i <= args.iterations; ++i) {
    for (auto& run : runs) SPILL_RETURN_IF_ERROR(run->Iterate(/*keep=*/i > 0));
  }
  SPILL_RETURN_IF_ERROR(runs[0]->Iterate(/*keep=*/true));
  const size_t links = args.gbps.size();
  for (size_t g = 0; g < links; ++g) {
    const size_t next_to = g < (links + 1) / 2 ? 0 : 1;  // the reference before, or after
    const Row row = Compare(net->view(), plan, CpuProfile(calibration, args.gbps[g] * 1e9), mode,
                            *runs[0], *runs[g + 1], next_to);
    std::printf(
        "| %s | %s | %s | %.2f | %s | %.3f | %.3f | %+.1f%% | %+.1f%% | %+.1f%% | %.0f%% | %.0f%% "
        "|\n",
        s.label.c_str(), mode.c_str(),
        FormatBytes(static_cast<double>(options.device_budget)).c_str(), args.gbps[g],
        FormatBytes(static_cast<double>(plan.log.to_host + plan.log.to_device)).c_str(),
        row.predicted, row.measured, 100 * row.error, 100 * row.replay_error,
        100 * row.fastest_error, 100 * row.prediction.summary.overlap(),
        100 * Summarize(runs[g + 1]->last()).overlap());
    std::fflush(stdout);
    if (!args.timelines.empty()) {
      SPILL_RETURN_IF_ERROR(
          WriteTimelines(args.timelines, s, mode, args.gbps[g], *runs[g + 1], row.prediction));
    }
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Args args;
  if (const int code = ParseFlags(argc, argv, &args); code >= 0) return code;
  // Runs and plans choose algorithms by the same measured times.
  cpu::SetConvTiming({cpu::ConvTimingMode::kMeasure, cpu::DefaultConvTimingCache()});
  auto calibration = CalibrateCpu(args.calibrate);
  if (!calibration.ok()) {
    std::fprintf(stderr, "bench_timeline: %s\n", calibration.status().message().c_str());
    return 1;
  }
  std::printf("cpu profile: %s\n\n", DescribeDeviceProfile(CpuProfile(*calibration, 0)).c_str());
  std::printf(
      "| network | mode | budget | link GB/s | moved | predicted s | measured s | error | "
      "replay error | error, fastest of each | predicted overlap | measured overlap |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& name : args.networks) {
    auto subject = LoadSubject(name);
    if (!subject.ok()) {
      std::fprintf(stderr, "bench_timeline: %s\n", subject.status().message().c_str());
      return 2;
    }
    for (const std::string& mode : args.modes) {
      Status status = RunMode(args, *subject, mode, *calibration);
      if (!status.ok()) {
        std::fprintf(stderr, "bench_timeline: %s, %s: %s\n", name.c_str(), mode.c_str(),
                     status.message().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_timeline", [&] { return spill::Main(argc, argv); });
}
