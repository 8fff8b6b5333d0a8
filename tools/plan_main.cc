// plan: device memory of a training iteration, step by step, from shapes
// alone. Nothing is computed and no memory is reserved: the memory runtime
// runs its real code path without a device, so the numbers are the ones a
// training run measures.
//
//   plan --config configs/resnet152.yaml                 peaks of every mode
//   plan --config models/resnet50.yaml --batch 32 --memory liveness --steps
//   plan --config X --json                                machine-readable
//   plan --config X --minimum                             smallest budget per mode
//   plan --config X --svg memory.svg                      a plot like Fig. 10
//   plan --config X --device-profile titanx-pcie3         predicted time per mode
//   plan --config X --memory superneurons --device-profile h100-pcie5 --timeline t.json
//   plan --config X --memory dymem --size-pool            GTBM's pool, sized with beta
//   plan --config X --fragmentation-svg frag.svg          footprint and U_f per step
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "framework/device_registry.h"
#include "framework/net.h"
#include "framework/solver.h"
#include "framework/units.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planner.h"
#include "memory/sim/timeline_svg.h"
#include "memory/sim/trace_json.h"
#include "tools/dymem_reports.h"
#include "tools/timeline_tools.h"
#include "tools/train_config.h"

namespace spill {
namespace {

const char kUsage[] = R"(usage: plan --config FILE [options]
  --config FILE        a training config or a network file (models/*.yaml)
  --batch B            batch size (default: the config's, or 32 for a network file)
  --set KEY=VALUE      set a model parameter (repeatable), e.g. --set size=224
  --device NAME        whose layers to plan: cpu or cuda (cuDNN's algorithms and
                       workspaces; --config=cuda builds) (default: the config's, or cpu)
  --memory MODE        plan one mode (default: every mode)
  --device-memory SIZE budget to plan under (default: unlimited)
  --host-memory SIZE   host memory for offloaded tensors (default: the config's, 32GiB)
  --prefetch-ahead N   prefetch offloaded tensors N checkpoint layers ahead (default 1)
  --recompute-strategy S  cost_aware (default), speed or memory
  --workspace POLICY   dynamic (default), fastest, memory_optimal, cap:SIZE, pin:NAME
  --allocator NAME     how device requests are placed: first_fit (default), best_fit,
                       static (offsets precomputed by dynamic storage allocation), va
                       (virtual addressing in --chunk pieces), gtbm, gtbm_soft (Dymem's
                       grouping by mobility), ideal (plan only: the max load, as if
                       memory never fragmented)
  --eviction RULE      the tensor cache's victim rule: lru (default) or belady
  --no-compact         never slide live tensors down to close holes, so that allocators
                       are compared by their footprint alone
  --window SIZE        the window scheduler's look-ahead: a multiple of its budget (1.5x,
                       the default) or bytes
  --window-budget SIZE the device bytes the window scheduler may fill: a multiple of the
                       budget less persistent tensors and workspace (1x) or bytes
  --chunk SIZE         the va allocator's physical chunk (default 2MiB)
  --trace FILE         write the event log of one iteration as JSON lines: every
                       allocation and free (block, bytes, offset, step, tensor), transfer,
                       drop and compute (of the last mode planned)
  --timing MODE        model, or cache (the default: times measured by `train`
                       where cached, the model elsewhere), or measure (time the
                       convolutions, and with --device-profile cpu every step of each
                       mode on this CPU, caching both)
  --device-profile P   predict each mode's iteration time on device profile P (a
                       simulation of the compute and copy queues; GPU profiles are
                       spec-sheet models, not measurements):
%PROFILES%  --link-gbps G        the cpu profile's link, as train --link-gbps throttles it
  --map-us US          host microseconds to map or unmap one chunk under --allocator va
                       (no spec sheet gives it; default 0 - the drain of the queues
                       before an unmap is simulated either way)
  --timeline FILE.json write the (last) mode's simulated iteration as a Chrome/Perfetto
                       trace (ui.perfetto.dev, chrome://tracing)
  --timeline-svg FILE  draw the (last) mode's simulated iteration as SVG
  --minimum            also find the smallest budget each mode runs in
  --steps              print every step
  --json               print JSON instead of text
  --csv FILE           write the per-step records of the (last) mode as CSV
  --svg FILE           plot memory per step, one curve per mode
  --fragmentation-svg FILE  plot the footprint per step and U_f per allocation of the
                       (last) mode under first_fit, best_fit, gtbm and --allocator, without
                       compaction, in one pool (--device-memory, or the largest footprint)
  --size-pool          with the gtbm allocator: size the pool from an iteration planned
                       at --device-memory as Dymem does (init - squeeze gap + beta), check
                       that it runs, and find the exact minimum and the smallest beta that runs
  --beta SIZE          Dymem's safety margin for --size-pool (default 300MiB)
  --release R, --prefetch P, --offload-set S, --barrier, --min-offload SIZE
                       the dymem scheduler's switches (memory.release: lazy|eager,
                       prefetch: dymem|ahead, offload_set: dymem|conv, barrier,
                       min_offload)
)";

std::string Usage() {
  std::string usage = kUsage;
  usage.replace(usage.find("%PROFILES%"), 10, DeviceProfileHelp());
  return usage;
}

struct Args {
  std::string config, device, memory, device_memory, host_memory, csv, svg, strategy, workspace,
      timing = "cache", allocator, eviction, trace, window, window_budget, chunk, device_profile,
      timeline, timeline_svg, fragmentation_svg, release, prefetch, offload_set, min_offload;
  double link_gbps = 0, map_us = 0;
  bool no_compact = false, size_pool = false, barrier = false;
  size_t beta = kDefaultBeta;
  int prefetch_ahead = -1;
  int64_t batch = 0;
  bool minimum = false, steps = false, json = false;
  ParamOverrides sets;
};

Status Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= argc) return InvalidArgument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--config") {
      SPILL_ASSIGN_OR_RETURN(a->config, value());
    } else if (arg == "--memory") {
      SPILL_ASSIGN_OR_RETURN(a->memory, value());
    } else if (arg == "--device") {
      SPILL_ASSIGN_OR_RETURN(a->device, value());
    } else if (arg == "--device-memory") {
      SPILL_ASSIGN_OR_RETURN(a->device_memory, value());
    } else if (arg == "--host-memory") {
      SPILL_ASSIGN_OR_RETURN(a->host_memory, value());
    } else if (arg == "--csv") {
      SPILL_ASSIGN_OR_RETURN(a->csv, value());
    } else if (arg == "--svg") {
      SPILL_ASSIGN_OR_RETURN(a->svg, value());
    } else if (arg == "--recompute-strategy") {
      SPILL_ASSIGN_OR_RETURN(a->strategy, value());
    } else if (arg == "--workspace") {
      SPILL_ASSIGN_OR_RETURN(a->workspace, value());
    } else if (arg == "--timing") {
      SPILL_ASSIGN_OR_RETURN(a->timing, value());
    } else if (arg == "--allocator") {
      SPILL_ASSIGN_OR_RETURN(a->allocator, value());
    } else if (arg == "--eviction") {
      SPILL_ASSIGN_OR_RETURN(a->eviction, value());
    } else if (arg == "--trace") {
      SPILL_ASSIGN_OR_RETURN(a->trace, value());
    } else if (arg == "--window") {
      SPILL_ASSIGN_OR_RETURN(a->window, value());
    } else if (arg == "--window-budget") {
      SPILL_ASSIGN_OR_RETURN(a->window_budget, value());
    } else if (arg == "--chunk") {
      SPILL_ASSIGN_OR_RETURN(a->chunk, value());
    } else if (arg == "--device-profile") {
      SPILL_ASSIGN_OR_RETURN(a->device_profile, value());
    } else if (arg == "--timeline") {
      SPILL_ASSIGN_OR_RETURN(a->timeline, value());
    } else if (arg == "--timeline-svg") {
      SPILL_ASSIGN_OR_RETURN(a->timeline_svg, value());
    } else if (arg == "--link-gbps") {
      SPILL_ASSIGN_OR_RETURN(std::string g, value());
      char* end = nullptr;
      a->link_gbps = std::strtod(g.c_str(), &end);
      if (g.empty() || *end != '\0' || a->link_gbps <= 0) {
        return InvalidArgument("--link-gbps needs a positive number of GB/s, got '" + g + "'");
      }
    } else if (arg == "--map-us") {
      SPILL_ASSIGN_OR_RETURN(std::string us, value());
      char* end = nullptr;
      a->map_us = std::strtod(us.c_str(), &end);
      if (us.empty() || *end != '\0' || !(a->map_us >= 0)) {
        return InvalidArgument("--map-us needs a number of microseconds >= 0, got '" + us + "'");
      }
    } else if (arg == "--no-compact") {
      a->no_compact = true;
    } else if (arg == "--fragmentation-svg") {
      SPILL_ASSIGN_OR_RETURN(a->fragmentation_svg, value());
    } else if (arg == "--size-pool") {
      a->size_pool = true;
    } else if (arg == "--release") {
      SPILL_ASSIGN_OR_RETURN(a->release, value());
    } else if (arg == "--prefetch") {
      SPILL_ASSIGN_OR_RETURN(a->prefetch, value());
    } else if (arg == "--offload-set") {
      SPILL_ASSIGN_OR_RETURN(a->offload_set, value());
    } else if (arg == "--min-offload") {
      SPILL_ASSIGN_OR_RETURN(a->min_offload, value());
    } else if (arg == "--barrier") {
      a->barrier = true;
    } else if (arg == "--beta") {
      SPILL_ASSIGN_OR_RETURN(std::string b, value());
      SPILL_ASSIGN_OR_RETURN(a->beta, ParseBytes(b));
    } else if (arg == "--prefetch-ahead") {
      SPILL_ASSIGN_OR_RETURN(std::string n, value());
      a->prefetch_ahead = std::atoi(n.c_str());
    } else if (arg == "--batch") {
      SPILL_ASSIGN_OR_RETURN(std::string b, value());
      a->batch = std::atoll(b.c_str());
      if (a->batch < 1) return InvalidArgument("--batch needs a positive integer");
    } else if (arg == "--set") {
      SPILL_ASSIGN_OR_RETURN(std::string kv, value());
      size_t eq = kv.find('=');
      if (eq == std::string::npos) return InvalidArgument("--set needs KEY=VALUE");
      a->sets[kv.substr(0, eq)] = YAML::Load(kv.substr(eq + 1));
    } else if (arg == "--minimum")
      a->minimum = true;
    else if (arg == "--steps")
      a->steps = true;
    else if (arg == "--json")
      a->json = true;
    else if (arg == "--help" || arg == "-h") {
      std::fputs(Usage().c_str(), stdout);
      std::exit(0);
    } else
      return InvalidArgument("unknown option '" + arg + "'\n" + Usage());
  }
  if (a->config.empty()) return InvalidArgument("--config is required\n" + Usage());
  if ((!a->timeline.empty() || !a->timeline_svg.empty()) && a->device_profile.empty()) {
    return InvalidArgument(
        "--timeline and --timeline-svg simulate on a device profile: add "
        "--device-profile NAME\n" +
        Usage());
  }
  if (a->timing != "model" && a->timing != "cache" && a->timing != "measure") {
    return InvalidArgument("--timing must be model, cache or measure, not '" + a->timing + "'");
  }
  return Status::Ok();
}

// --window, --window-budget, --host-memory and --chunk.
Status ApplyWindowFlags(const Args& args, MemoryOptions* options) {
  for (auto [flag, text, setting] :
       {std::tuple{"--window", &args.window, &options->window},
        {"--window-budget", &args.window_budget, &options->window_budget}}) {
    if (text->empty()) continue;
    auto parsed = ParseSizeSetting(*text);
    if (!parsed.ok()) return parsed.status().WithContext(flag);
    *setting = *parsed;
  }
  if (!args.host_memory.empty()) {
    auto host = ParseBytes(args.host_memory);
    if (!host.ok()) return host.status().WithContext("--host-memory");
    options->host_budget = *host;
  }
  if (!args.chunk.empty()) {
    auto chunk = ParseBytes(args.chunk);
    if (!chunk.ok()) return chunk.status().WithContext("--chunk");
    options->chunk = *chunk;
  }
  return Status::Ok();
}

// The network and the solver of a training config or of a bare network file.
struct Subject {
  NetSpec spec;
  std::unique_ptr<Net> net;
  SolverConfig solver;
  bool has_solver = false;
  MemoryOptions memory;
};

StatusOr<Subject> Load(const Args& a) {
  Subject s;
  YAML::Node root;
  try {
    root = YAML::LoadFile(a.config);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(a.config + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  NetSpec spec;
  int64_t batch = a.batch ? a.batch : 32;
  std::string device = "cpu";
  if (root.IsMap() && root["layers"]) {
    SPILL_ASSIGN_OR_RETURN(spec, LoadNetFile(a.config, a.sets));
  } else {
    SPILL_ASSIGN_OR_RETURN(TrainConfig c, LoadTrainConfig(a.config));
    for (const auto& [k, v] : a.sets) c.model_params[k] = v;
    if (!c.model_file.empty()) {
      SPILL_ASSIGN_OR_RETURN(spec, LoadNetFile(c.model_file, c.model_params));
    } else {
      SPILL_ASSIGN_OR_RETURN(spec, ParseNetNode(c.model_node, c.file, c.model_params, c.base_dir));
    }
    if (!a.batch) batch = c.data.batch;
    s.solver = c.solver;
    s.has_solver = true;
    s.memory = c.memory;
    device = c.run.device;
  }
  if (!a.device.empty()) device = a.device;
  SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(device));
  SPILL_ASSIGN_OR_RETURN(s.net, Net::Build(spec, {batch, type}));
  s.spec = spec;
  if (s.has_solver) {
    SPILL_ASSIGN_OR_RETURN(auto solver, Solver::Create(s.solver));
    solver->AddState(*s.net);
  }
  return s;
}

std::string Bytes(size_t b) { return FormatBytes(static_cast<double>(b)); }

void PrintSteps(const MemoryPlan& plan, const Net& net) {
  std::printf("  %5s %-9s %-32s %12s %12s %5s %11s %11s %6s %11s  %s\n", "step", "pass", "layer",
              "in use", "peak", "live", "to host", "to device", "recomp", "workspace",
              "algorithms");
  for (const StepRecord& r : plan.log.steps) {
    std::printf("  %5d %-9s %-32s %12s %12s %5d %11s %11s %6d %11s  %s\n", r.step + 1,
                r.pass == Pass::kForward ? "forward" : "backward",
                net.layer(r.layer).name().c_str(), Bytes(r.total).c_str(), Bytes(r.peak).c_str(),
                r.live_tensors, Bytes(r.to_host).c_str(), Bytes(r.to_device).c_str(), r.recomputed,
                Bytes(r.workspace).c_str(), r.algorithm.c_str());
  }
}

void PrintPeak(const MemoryPlan& plan, const Net& net) {
  const StepRecord& r = plan.log.steps[plan.peak_step];
  std::printf("  peak at step %d (%s %s):", plan.peak_step + 1,
              r.pass == Pass::kForward ? "forward" : "backward", net.layer(r.layer).name().c_str());
  for (int c = 0; c < kNumCategories; ++c) {
    if (r.in_use[c]) {
      std::printf(" %s %s;", MemoryCategoryName(static_cast<MemoryCategory>(c)),
                  Bytes(r.in_use[c]).c_str());
    }
  }
  std::vector<TensorId> live = plan.log.peak_live;
  const auto& t = net.schedule().tensors;
  std::sort(live.begin(), live.end(),
            [&](TensorId x, TensorId y) { return t[x].bytes > t[y].bytes; });
  std::printf("\n  live at the peak (%zu tensors), largest:", live.size());
  for (size_t i = 0; i < live.size() && i < 5; ++i) {
    std::printf(" %s %s%s", t[live[i]].name.c_str(), Bytes(t[live[i]].bytes).c_str(),
                i + 1 < std::min<size_t>(5, live.size()) ? "," : "");
  }
  std::printf("\n");
}

std::string JsonPrediction(const Prediction& p, const PlanPredictor& predictor) {
  const TimelineSummary& s = p.summary;
  char text[400];
  std::snprintf(text, sizeof(text),
                ",\"prediction\":{\"profile\":\"%s\",\"iteration_seconds\":%.9g,"
                "\"relative_throughput\":%.6g,\"compute_seconds\":%.9g,\"copy_seconds\":%.9g,"
                "\"overlap\":%.6g,\"compute_wait_seconds\":%.9g,\"host_wait_seconds\":%.9g,"
                "\"step_costs\":\"%s\"}",
                predictor.profile().name.c_str(), s.iteration_seconds,
                predictor.roomy().summary.iteration_seconds / std::max(s.iteration_seconds, 1e-12),
                s.compute_seconds, s.copy_seconds, s.overlap(), s.compute_wait_seconds,
                s.host_wait_seconds, p.costs.Source().c_str());
  return text;
}

std::string JsonPlan(const std::string& mode, const MemoryPlan& plan, const Net& net,
                     double seconds, size_t minimum, bool steps, const Prediction* prediction,
                     const PlanPredictor* predictor) {
  std::ostringstream out;
  out << "{\"mode\":\"" << mode << "\",\"fits\":" << (plan.fits ? "true" : "false");
  if (plan.fits) {
    out << ",\"peak_bytes\":" << plan.peak << ",\"peak_step\":" << plan.peak_step + 1
        << ",\"persistent_bytes\":" << plan.persistent << ",\"max_load_bytes\":" << plan.peak
        << ",\"footprint_bytes\":" << plan.footprint
        << ",\"fragmentation_bytes\":" << plan.fragmentation()
        << ",\"compacted_bytes\":" << plan.compacted
        << ",\"recomputations\":" << plan.recomputations
        << ",\"to_host_bytes\":" << plan.log.to_host
        << ",\"to_device_bytes\":" << plan.log.to_device << ",\"plan_seconds\":" << seconds;
    if (minimum) out << ",\"minimum_budget_bytes\":" << minimum;
    if (prediction) out << JsonPrediction(*prediction, *predictor);
    out << ",\"peak_live\":[";
    for (size_t i = 0; i < plan.log.peak_live.size(); ++i) {
      out << (i ? "," : "") << "\"" << net.schedule().tensors[plan.log.peak_live[i]].name << "\"";
    }
    out << "]";
    if (steps) {
      out << ",\"steps\":[";
      for (size_t i = 0; i < plan.log.steps.size(); ++i) {
        const StepRecord& r = plan.log.steps[i];
        out << (i ? "," : "") << "{\"step\":" << r.step + 1 << ",\"layer\":\""
            << net.layer(r.layer).name() << "\",\"total\":" << r.total << ",\"peak\":" << r.peak
            << ",\"live\":" << r.live_tensors << ",\"to_host\":" << r.to_host
            << ",\"to_device\":" << r.to_device << ",\"recomputed\":" << r.recomputed
            << ",\"workspace\":" << r.workspace << ",\"algorithm\":\"" << r.algorithm << "\"}";
      }
      out << "]";
    }
  } else {
    out << ",\"failure\":\"" << plan.failure << "\"";
  }
  return out.str() + "}";
}

// What an allocator that maps memory (va) mapped in the planned iteration
// (events are recorded with --trace or --device-profile).
void PrintMapping(const MemoryPlan& plan) {
  long maps = 0, unmaps = 0, drains = 0;
  for (const MemoryEvent& e : plan.events) {
    maps += e.maps;
    unmaps += e.unmaps;
    drains += e.unmaps > 0;
  }
  if (maps == 0 && unmaps == 0) return;
  std::printf(
      "  mapping per iteration: %ld chunks mapped, %ld unmapped (%ld waits for the "
      "queues to drain)\n",
      maps, unmaps, drains);
}

// The predictor of --device-profile (null without one).
StatusOr<std::unique_ptr<PlanPredictor>> MakePredictor(const Args& args, Subject& subject) {
  if (args.device_profile.empty()) return std::unique_ptr<PlanPredictor>();
  SPILL_ASSIGN_OR_RETURN(
      std::unique_ptr<PlanPredictor> predictor,
      PlanPredictor::Create(args.device_profile, args.link_gbps, *subject.net,
                            args.timing == "measure" ? &subject.spec : nullptr, subject.memory));
  predictor->set_map_seconds_per_chunk(args.map_us * 1e-6);
  if (!args.json) {
    std::printf("device profile %s\n", DescribeDeviceProfile(predictor->profile()).c_str());
  }
  return predictor;
}

// A mode's predicted iteration (null without a predictor or when the plan
// does not fit).
StatusOr<std::unique_ptr<Prediction>> PredictMode(PlanPredictor* predictor, const MemoryPlan& plan,
                                                  const MemoryOptions& options, const Net& net,
                                                  const std::string& mode) {
  if (predictor == nullptr || !plan.fits) return std::unique_ptr<Prediction>();
  SPILL_ASSIGN_OR_RETURN(
      Prediction p,
      predictor->Predict(plan, options,
                         net.name() + ", batch " + std::to_string(net.batch()) + ", " + mode +
                             ", " + predictor->profile().name + " (simulated)"));
  return std::make_unique<Prediction>(std::move(p));
}

// The dymem scheduler's switches given as flags.
Status ApplyDymemSwitches(const Args& args, MemoryOptions* options) {
  if (!args.release.empty()) options->release = args.release;
  if (!args.prefetch.empty()) options->prefetch = args.prefetch;
  if (!args.offload_set.empty()) options->offload_set = args.offload_set;
  if (args.barrier) options->barrier = true;
  if (!args.min_offload.empty()) {
    SPILL_ASSIGN_OR_RETURN(options->min_offload_bytes, ParseBytes(args.min_offload));
  }
  return options->Validate();
}

// The fragmentation of `mode` under first fit, best fit, GTBM and the chosen
// allocator, in one pool.
Status WriteFragmentation(const Args& args, const Net& net, const std::string& mode,
                          MemoryOptions options) {
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, &options));
  if (args.prefetch_ahead >= 0) options.prefetch_ahead = args.prefetch_ahead;
  if (!args.workspace.empty()) {
    SPILL_ASSIGN_OR_RETURN(options.workspace, ParseWorkspacePolicy(args.workspace));
  }
  SPILL_RETURN_IF_ERROR(ApplyDymemSwitches(args, &options));
  SPILL_RETURN_IF_ERROR(ApplyWindowFlags(args, &options));
  std::vector<std::string> allocators = {"first_fit", "best_fit", "gtbm"};
  if (!args.allocator.empty() &&
      std::find(allocators.begin(), allocators.end(), args.allocator) == allocators.end()) {
    allocators.push_back(args.allocator);
  }
  size_t pool = 0;
  if (!args.device_memory.empty()) {
    SPILL_ASSIGN_OR_RETURN(pool, ParseBytes(args.device_memory));
  }
  SPILL_ASSIGN_OR_RETURN(FragmentationComparison comparison,
                         CompareFragmentation(net.view(), options, allocators, pool));
  if (!args.json) std::fputs(FragmentationText(comparison).c_str(), stdout);
  std::ofstream(args.fragmentation_svg) << FragmentationSvg(
      comparison.profiles,
      net.name() + ", batch " + std::to_string(net.batch()) + ", " + mode +
          (options.scheduler == "dymem" ? ", " + options.release + " release" : "") +
          ", no compaction, pool " + FormatBytes(static_cast<double>(comparison.pool)));
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Args args;
  Status status = Parse(argc, argv, &args);
  if (!status.ok()) {
    std::fprintf(stderr, "plan: %s\n", status.message().c_str());
    return 2;
  }
  // Planning measures only when asked to: it reads what training measured,
  // or models.
  cpu::SetConvTiming(
      {args.timing == "measure" ? cpu::ConvTimingMode::kMeasure : cpu::ConvTimingMode::kModel,
       args.timing == "model" ? "" : cpu::DefaultConvTimingCache()});
  auto subject = Load(args);
  if (!subject.ok()) {
    std::fprintf(stderr, "plan: %s\n", subject.status().message().c_str());
    return 1;
  }
  const Net& net = *subject->net;
  std::vector<std::string> modes =
      args.memory.empty() ? MemoryModeNames() : std::vector<std::string>{args.memory};
  if (!args.json) {
    const Shape in = net.input_shape();
    std::printf("%s (%s): batch %ld, input %ldx%ldx%ld, %d layers, %zu steps%s\n",
                net.name().c_str(), args.config.c_str(), net.batch(), in.c(), in.h(), in.w(),
                net.num_layers(), net.schedule().steps.size(),
                subject->has_solver ? ", with solver state" : "");
  }
  auto created = MakePredictor(args, *subject);
  if (!created.ok()) {
    std::fprintf(stderr, "plan: %s\n", created.status().message().c_str());
    return 2;
  }
  std::unique_ptr<PlanPredictor> predictor = std::move(created).value();
  Timeline timeline;
  std::vector<MemoryLog> logs;
  std::string json = "{\"network\":\"" + net.name() +
                     "\",\"batch\":" + std::to_string(net.batch()) + ",\"modes\":[";
  for (size_t m = 0; m < modes.size(); ++m) {
    MemoryOptions options = subject->memory;
    Status mode = ApplyMemoryMode(modes[m], &options);
    if (!mode.ok()) {
      std::fprintf(stderr, "plan: %s\n", mode.message().c_str());
      return 2;
    }
    options.device_budget = kUnlimitedBudget;
    if (args.prefetch_ahead >= 0) options.prefetch_ahead = args.prefetch_ahead;
    if (!args.allocator.empty()) options.allocator = args.allocator;
    if (!args.eviction.empty()) options.eviction = args.eviction;
    if (args.no_compact) options.compact = false;
    Status window = ApplyWindowFlags(args, &options);
    if (!window.ok()) {
      std::fprintf(stderr, "plan: %s\n", window.message().c_str());
      return 2;
    }
    options.record_events = !args.trace.empty() || predictor;
    if (!args.workspace.empty()) {
      auto workspace = ParseWorkspacePolicy(args.workspace);
      if (!workspace.ok()) {
        std::fprintf(stderr, "plan: %s\n", workspace.status().message().c_str());
        return 2;
      }
      options.workspace = *workspace;
    }
    if (!args.strategy.empty()) {
      auto strategy = ParseRecomputeStrategy(args.strategy);
      if (!strategy.ok()) {
        std::fprintf(stderr, "plan: %s\n", strategy.status().message().c_str());
        return 2;
      }
      options.recompute_strategy = *strategy;
    }
    if (!args.device_memory.empty()) {
      auto budget = ParseBytes(args.device_memory);
      if (!budget.ok()) {
        std::fprintf(stderr, "plan: --device-memory: %s\n", budget.status().message().c_str());
        return 2;
      }
      options.device_budget = *budget;
    }
    Status switches = ApplyDymemSwitches(args, &options);
    if (!switches.ok()) {
      std::fprintf(stderr, "plan: %s\n", switches.message().c_str());
      return 2;
    }
    auto start = std::chrono::steady_clock::now();
    auto plan = Plan(net.view(), options);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!plan.ok()) {
      std::fprintf(stderr, "plan: %s\n", plan.status().message().c_str());
      return 1;
    }
    size_t minimum = 0;
    if (args.minimum && plan->fits) {
      auto found = MinimumBudget(net.view(), options);
      if (found.ok()) minimum = *found;
    }
    auto prediction = PredictMode(predictor.get(), *plan, options, net, modes[m]);
    if (!prediction.ok()) {
      std::fprintf(stderr, "plan: %s\n", prediction.status().message().c_str());
      return 1;
    }
    if (*prediction) timeline = (*prediction)->timeline;
    if (args.json) {
      json += (m ? "," : "") + JsonPlan(modes[m], *plan, net, seconds, minimum, args.steps,
                                        prediction->get(), predictor.get());
    } else if (!plan->fits) {
      std::printf("%-13s does not fit: %s\n", modes[m].c_str(), plan->failure.c_str());
    } else {
      std::printf(
          "%-13s peak %12s (%ld bytes) at step %d; persistent %s; moved %s to host, %s back; "
          "%ld recomputations; planned in %.3f s\n",
          modes[m].c_str(), Bytes(plan->peak).c_str(), static_cast<long>(plan->peak),
          plan->peak_step + 1, Bytes(plan->persistent).c_str(), Bytes(plan->log.to_host).c_str(),
          Bytes(plan->log.to_device).c_str(), static_cast<long>(plan->recomputations), seconds);
      std::printf(
          "  %s allocator: max load %s, footprint %s, fragmentation %s (%.2f%%), compaction "
          "moved "
          "%s\n",
          options.allocator.c_str(), Bytes(plan->peak).c_str(), Bytes(plan->footprint).c_str(),
          Bytes(plan->fragmentation()).c_str(),
          100.0 * plan->fragmentation() / std::max<size_t>(plan->footprint, 1),
          Bytes(plan->compacted).c_str());
      PrintMapping(*plan);
      if (minimum)
        std::printf("  smallest budget that runs: %s (%zu bytes)\n", Bytes(minimum).c_str(),
                    minimum);
      if (*prediction) {
        std::printf("  predicted on %s: %s\n", predictor->profile().name.c_str(),
                    DescribePrediction(**prediction, net.batch(), &predictor->roomy()).c_str());
      }
      if (modes.size() == 1) PrintPeak(*plan, net);
      if (args.steps) PrintSteps(*plan, net);
    }
    if (args.size_pool && plan->fits && options.allocator == "gtbm") {
      auto sizing = SizeGtbmPool(net.view(), options, args.beta);
      if (!sizing.ok()) {
        std::fprintf(stderr, "plan: --size-pool: %s\n", sizing.status().message().c_str());
        return 1;
      }
      if (args.json) {
        json.insert(json.size() - 1, ",\"pool_sizing\":" + PoolSizingJson(*sizing));
      } else {
        std::fputs(PoolSizingText(*sizing).c_str(), stdout);
      }
    }
    if (plan->fits) logs.push_back(plan->log);
    if (!args.trace.empty() && plan->fits) {
      std::ofstream(args.trace) << MemoryEventsJson(plan->events, net.schedule());
    }
    if (!args.csv.empty() && plan->fits) {
      std::ofstream(args.csv) << MemoryLogCsv(plan->log, net.schedule(), net.layer_names());
    }
  }
  if (!args.fragmentation_svg.empty()) {
    Status written = WriteFragmentation(args, net, modes.back(), subject->memory);
    if (!written.ok()) {
      std::fprintf(stderr, "plan: --fragmentation-svg: %s\n", written.message().c_str());
      return 1;
    }
  }
  if (args.json) std::printf("%s]}\n", json.c_str());
  if (!args.timeline.empty()) std::ofstream(args.timeline) << TimelineTraceJson(timeline);
  if (!args.timeline_svg.empty()) std::ofstream(args.timeline_svg) << TimelineSvg(timeline);
  if (!args.svg.empty()) {
    std::ofstream(args.svg) << MemoryPlotSvg(logs,
                                             net.name() + ", batch " + std::to_string(net.batch()));
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) { return spill::Main(argc, argv); }
