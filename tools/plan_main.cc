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
//   plan --config X --memory dqn --device-memory 2GiB     the learned planner: trains (or
//                                                         reads its cache), then plans
//   plan --config X --html memory.html                    the memory page of every mode
//   plan --config X --ranks 4 --zero 1                    one of 4 data-parallel ranks,
//                                                         its shard of the solver state
//   plan --config X --ranks 4 --zero 3 --rank 0           rank 0, its shard of the parameters
//                                                         too (each gathered for its steps)
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "framework/base/files.h"
#include "framework/base/units.h"
#include "framework/config/yaml_reader.h"
#include "framework/device/device_registry.h"
#include "framework/graph/net.h"
#include "framework/graph/net_checks.h"
#include "framework/solver/solver.h"
#include "layers/cpu/conv_timer.h"
#include "memory/planning/feasibility.h"
#include "memory/planning/planner.h"
#include "memory/report/dymem_reports.h"
#include "memory/report/events_json.h"
#include "memory/report/fragmentation_svg.h"
#include "memory/report/memory_page.h"
#include "memory/report/memory_plot.h"
#include "memory/report/step_records.h"
#include "memory/report/timeline_svg.h"
#include "memory/report/trace_json.h"
#include "memory/scheduler_registry.h"
#include "tools/common/checks.h"
#include "tools/common/cli.h"
#include "tools/common/net_options.h"
#include "tools/common/timeline_tools.h"
#include "tools/planning/length_plan.h"
#include "tools/planning/plan_args.h"
#include "tools/trainer/inference.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace {

using Args = PlanArgs;

// The network and the solver of a training config or of a bare network file.
struct Subject {
  NetSpec spec;
  std::unique_ptr<Net> net;
  // What a run falls back to where `net`'s plan does not fit
  // (tools/common/net_options.h), and the network each one builds.
  std::vector<LeanerBuild> leaner;
  std::vector<std::unique_ptr<Net>> leaner_nets;
  SolverConfig solver;
  bool has_solver = false;
  int zero = 0;  // distributed.zero of the rank planned
  MemoryOptions memory;
  // data.buckets: the length buckets, and epoch 1's batch lengths.
  std::vector<int64_t> bounds;
  std::vector<int64_t> lengths;
};

StatusOr<Subject> Load(const Args& a) {
  Subject s;
  SPILL_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(a.config, "--config"));
  NetSpec spec;
  int64_t batch = a.batch ? a.batch : 32;
  int64_t zero = a.zero < 0 ? 0 : a.zero;
  std::string device = "cpu";
  Precision precision = Precision::kFp32;
  if (root.IsMap() && root["layers"]) {
    SPILL_ASSIGN_OR_RETURN(spec, LoadNetFile(a.config, a.sets));
  } else {
    SPILL_ASSIGN_OR_RETURN(TrainConfig c, LoadTrainConfig(a.config));
    for (const auto& [k, v] : a.sets) c.model_params[k] = v;
    SPILL_RETURN_IF_ERROR(
        CheckDistinctFiles({{"the model file", c.model_file}, {"model.onnx", c.model_onnx}},
                           {{"--csv", a.csv},
                            {"--svg", a.svg},
                            {"--trace", a.trace},
                            {"--timeline", a.timeline},
                            {"--timeline-svg", a.timeline_svg},
                            {"--fragmentation-svg", a.fragmentation_svg}}));
    if (!c.model_file.empty()) {
      SPILL_ASSIGN_OR_RETURN(spec, LoadNetFile(c.model_file, c.model_params));
    } else {
      SPILL_ASSIGN_OR_RETURN(spec, ParseNetNode(c.model_node, c.file, c.model_params, c.base_dir));
    }
    // Text and pairs decide the model's sequence length and classes as
    // train does, where their files can be read.
    std::unique_ptr<Dataset> train, test;
    if ((c.data.dataset == "text" || c.data.dataset == "pairs") &&
        OpenDatasets(c.data, &train, &test).ok()) {
      SPILL_ASSIGN_OR_RETURN(spec, LoadModel(c, *train));
    }
    if (!a.batch) batch = c.data.batch;
    if (a.zero < 0) zero = c.distributed.zero;
    SPILL_ASSIGN_OR_RETURN(s.lengths, EpochLengths(c, batch, &s.bounds));
    s.solver = c.solver;
    s.has_solver = true;
    s.memory = c.memory;
    device = c.run.device;
    precision = c.run.precision;
  }
  if (!a.device.empty()) device = a.device;
  if (!a.precision.empty()) {
    SPILL_ASSIGN_OR_RETURN(precision, ParsePrecision(a.precision, "--precision"));
  }
  if (a.rank >= a.ranks) {
    return InvalidArgument("--rank " + std::to_string(a.rank) + " is not one of the " +
                           std::to_string(a.ranks) + " ranks (0 to " + std::to_string(a.ranks - 1) +
                           ")");
  }
  if (batch % a.ranks != 0) {
    return InvalidArgument("--ranks " + std::to_string(a.ranks) + " cannot split the batch, " +
                           std::to_string(batch) + ", evenly; give a multiple of the ranks");
  }
  batch /= a.ranks;  // the global batch: each rank computes its share
  SPILL_ASSIGN_OR_RETURN(DeviceType type, DeviceTypeByName(device));
  SPILL_RETURN_IF_ERROR(CheckPrecision(precision, type, "precision"));
  MemoryOptions flagged = s.memory;  // the layouts follow the workspace policy given
  SPILL_RETURN_IF_ERROR(a.memory.Apply(&flagged, /*check_read=*/false));
  const NetOptions net_options = NetOptionsFor(batch, type, flagged.workspace, precision);
  SPILL_ASSIGN_OR_RETURN(s.net, Net::Build(spec, net_options));
  s.leaner = LeanerBuilds(*s.net, net_options, flagged.workspace);
  for (const LeanerBuild& build : s.leaner) {
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> built, Net::Build(spec, build.net));
    s.leaner_nets.push_back(std::move(built));
  }
  s.spec = spec;
  if (s.has_solver) {
    // The last rank's range of the state is the largest (by one element).
    const int ranks = static_cast<int>(a.ranks);
    const int rank = a.rank < 0 ? ranks - 1 : static_cast<int>(a.rank);
    std::vector<Net*> nets = {s.net.get()};
    for (const auto& built : s.leaner_nets) nets.push_back(built.get());
    for (Net* net : nets) {
      SPILL_ASSIGN_OR_RETURN(auto solver, Solver::Create(s.solver));
      solver->AddState(*net, zero > 0 ? StateShard{rank, ranks, zero >= 3} : StateShard{});
    }
    s.zero = static_cast<int>(zero);
    // Stage 2: the gradients leave the device after backward, as in the run;
    // stage 3: the parameters are gathered for each step that reads them.
    s.memory.gradients_leave = zero >= 2 && ranks > 1;
    s.memory.params_gathered = zero >= 3 && ranks > 1;
    s.memory.ranks = ranks;
  }
  ApplyPrecision(precision, &s.memory);
  return s;
}

std::string Bytes(size_t b) { return FormatBytes(static_cast<double>(b)); }

// Bytes of the model state one rank holds, wherever its policy keeps them.
struct ModelState {
  size_t parameters = 0, gradients = 0, solver_state = 0;
};

// With sharded parameters a rank holds its pieces of them (ParameterSlot::
// master) for good, the whole ones only while a step reads them.
ModelState ModelStateOf(const Net& net, bool params_gathered) {
  ModelState m;
  std::vector<bool> gathered(net.schedule().tensors.size(), false);
  for (const ParameterSlot& p : net.schedule().parameters) gathered[p.param] = params_gathered;
  for (TensorId id = 0; id < static_cast<TensorId>(gathered.size()); ++id) {
    const TensorInfo& t = net.schedule().tensors[id];
    if (t.kind == TensorKind::kParam && !gathered[id]) m.parameters += t.bytes;
    if (t.kind == TensorKind::kParamGrad) m.gradients += t.bytes;
    if (t.kind == TensorKind::kOptimizerState) m.solver_state += t.bytes;
  }
  return m;
}

// The images each call of a step computes: "all" (the batch at once), the
// slice of a step streamed through host memory, or the slice a 16-bit
// network computes its larger steps in (framework/graph/precision.h).
std::string CallImages(const StepRecord& r, const NetworkView& view) {
  if (r.slice_images > 0) return std::to_string(r.slice_images) + " streamed";
  const int64_t images = view.StepImages(r.layer, r.pass);
  return images < view.batch ? std::to_string(images) : "all";
}

void PrintSteps(const MemoryPlan& plan, const Net& net) {
  std::printf("  %5s %-9s %-32s %12s %12s %5s %11s %11s %6s %11s %12s  %s\n", "step", "pass",
              "layer", "in use", "peak", "live", "to host", "to device", "recomp", "workspace",
              "images/call", "algorithms");
  const NetworkView view = net.view();
  for (const StepRecord& r : plan.log.steps) {
    std::printf("  %5d %-9s %-32s %12s %12s %5d %11s %11s %6d %11s %12s  %s\n", r.step + 1,
                r.pass == Pass::kForward ? "forward" : "backward",
                net.layer(r.layer).name().c_str(), Bytes(r.total).c_str(), Bytes(r.peak).c_str(),
                r.live_tensors, Bytes(r.to_host).c_str(), Bytes(r.to_device).c_str(), r.recomputed,
                Bytes(r.workspace).c_str(), CallImages(r, view).c_str(), r.algorithm.c_str());
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

nlohmann::ordered_json JsonPrediction(const Prediction& p, const PlanPredictor& predictor) {
  const TimelineSummary& s = p.summary;
  return {{"profile", predictor.profile().name},
          {"iteration_seconds", s.iteration_seconds},
          {"relative_throughput",
           predictor.roomy().summary.iteration_seconds / std::max(s.iteration_seconds, 1e-12)},
          {"compute_seconds", s.compute_seconds},
          {"copy_seconds", s.copy_seconds},
          {"to_device_seconds", s.to_device_seconds},
          {"to_host_seconds", s.to_host_seconds},
          {"duplex_seconds", s.duplex_seconds},
          {"overlap", s.overlap()},
          {"compute_wait_seconds", s.compute_wait_seconds},
          {"host_wait_seconds", s.host_wait_seconds},
          {"step_costs", p.costs.Source()}};
}

nlohmann::ordered_json JsonPlan(const std::string& mode, const MemoryPlan& plan, const Net& net,
                                double seconds, size_t minimum, bool steps) {
  nlohmann::ordered_json out = {{"mode", mode}, {"fits", plan.fits}};
  if (!plan.fits) {
    out["failure"] = plan.failure;
    return out;
  }
  out["peak_bytes"] = plan.peak;
  out["peak_step"] = plan.peak_step + 1;
  out["persistent_bytes"] = plan.persistent;
  out["max_load_bytes"] = plan.peak;
  out["footprint_bytes"] = plan.footprint;
  out["fragmentation_bytes"] = plan.fragmentation();
  out["compacted_bytes"] = plan.compacted;
  out["host_peak_bytes"] = plan.log.host_peak;
  out["recomputations"] = plan.recomputations;
  out["to_host_bytes"] = plan.log.to_host;
  out["to_device_bytes"] = plan.log.to_device;
  out["on_demand_bytes"] = plan.log.on_demand;
  out["plan_seconds"] = seconds;
  if (minimum) out["minimum_budget_bytes"] = minimum;
  nlohmann::ordered_json live = nlohmann::ordered_json::array();
  for (TensorId t : plan.log.peak_live) live.push_back(net.schedule().tensors[t].name);
  out["peak_live"] = live;
  if (!plan.events.empty()) out["blocks"] = CountBlocks(plan.events);
  if (!steps) return out;
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const StepRecord& r : plan.log.steps) {
    records.push_back(StepRecordJson(r, net.schedule(), net.layer_names()));
  }
  out["steps"] = records;
  return out;
}

// The allocators that size their own pool, and the flags that choose one.
std::vector<std::string> PoolSizingAllocators() {
  std::vector<std::string> names;
  for (const std::string& name : AllocatorNames()) {
    if (FindAllocator(name)->sizes_pool) names.push_back(name);
  }
  return names;
}

std::string PoolSizingHint() {
  std::vector<std::string> ways;
  for (const MemoryMode& m : MemoryModes()) {
    if (m.allocator != nullptr && FindAllocator(m.allocator)->sizes_pool) {
      ways.push_back("--memory " + std::string(m.name));
    }
  }
  for (const std::string& name : PoolSizingAllocators()) ways.push_back("--allocator " + name);
  std::string text;
  for (size_t i = 0; i < ways.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == ways.size() ? " or " : ", ") + ways[i];
  }
  return text;
}

// The fragmentation of `mode` under first fit, best fit, GTBM and the chosen
// allocator, in one pool.
Status WriteFragmentation(const Args& args, const Net& net, const MemoryOptions& options) {
  std::vector<std::string> allocators;
  for (const std::string& name : AllocatorNames()) {
    if (FindAllocator(name)->fragmentation_reference) allocators.push_back(name);
  }
  const std::string allocator = args.memory.Value("--allocator");
  if (!allocator.empty() &&
      std::find(allocators.begin(), allocators.end(), allocator) == allocators.end()) {
    allocators.push_back(allocator);
  }
  // The pool: --device-memory, or (0) the largest footprint.
  const size_t pool = args.memory.Value("--device-memory").empty() ? 0 : options.device_budget;
  SPILL_ASSIGN_OR_RETURN(FragmentationComparison comparison,
                         CompareFragmentation(net.view(), options, allocators, pool));
  if (!args.json) std::fputs(FragmentationText(comparison).c_str(), stdout);
  const std::string title =
      net.name() + ", batch " + std::to_string(net.batch()) + ", " + options.mode +
      DescribeSettings(options, "scheduler", options.scheduler) + ", no compaction, pool " +
      FormatBytes(static_cast<double>(comparison.pool));
  return WriteTextFile(args.fragmentation_svg, FragmentationSvg(comparison.profiles, title),
                       "--fragmentation-svg");
}

// GTBM's pool sized from the plan, printed or added to the mode's JSON.
Status ReportPoolSizing(const Args& args, const Net& net, const MemoryOptions& options,
                        nlohmann::ordered_json* mode_json) {
  auto sizing = SizeGtbmPool(net.view(), options, args.beta);
  if (!sizing.ok()) return InvalidArgument("--size-pool: " + sizing.status().message());
  if (args.json) {
    (*mode_json)["pool_sizing"] = PoolSizingJson(*sizing);
  } else {
    std::fputs(PoolSizingText(*sizing).c_str(), stdout);
  }
  return Status::Ok();
}

// The memory options of one mode with the flags applied.
// `every`: every mode is planned (no --memory), so the settings given apply
// where a mode reads them; with one mode, a setting it does not read is an
// error naming it.
StatusOr<MemoryOptions> ModeOptions(const Args& args, const Subject& subject,
                                    const std::string& mode, bool every) {
  MemoryOptions options = subject.memory;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, &options));
  options.device_budget = kUnlimitedBudget;  // unless --device-memory says
  SPILL_RETURN_IF_ERROR(args.memory.Apply(&options, /*check_read=*/!every));
  SPILL_RETURN_IF_ERROR(GiveMeasuredProfile(args.link_gbps, &options));
  if (args.size_pool && !FindAllocator(options.allocator)->sizes_pool && !every) {
    return InvalidArgument("--size-pool sizes the pool of an allocator that sizes its own (" +
                           Join(PoolSizingAllocators()) + "); mode '" + mode +
                           "' places with the " + options.allocator + " allocator (use " +
                           PoolSizingHint() + ")");
  }
  options.record_events = !args.trace.empty() || !args.device_profile.empty() || !args.html.empty();
  SPILL_RETURN_IF_ERROR(options.Validate());
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*subject.net, options.workspace));
  return options;
}

// Steps whose tensors did not fit whole: computed in slices through host
// memory (memory.chunk).
// Stochastic depth: the plan computes every branch (the worst case), so
// whichever branches an iteration drops, it runs within the plan.
void PrintStochasticDepth(const Net& net) {
  int branches = 0;
  double expected = 0;
  for (int id = 0; id < net.num_layers(); ++id) {
    const double p = net.layer(id).drop_probability();
    branches += p > 0;
    expected += p;
  }
  if (branches == 0) return;
  std::printf(
      "stochastic depth: %d residual branches may be dropped (%.1f per training iteration on "
      "average); planned with every branch computed, so each drawn pattern runs within the plan\n",
      branches, expected);
}

// In 16 bits: the layers that compute on float32 copies of their 16-bit
// tensors (the others take them as they are), by type, and the largest
// copies one of their steps needs at the front of its workspace.
void PrintConversions(const Net& net) {
  if (ActivationType(net.precision()) == DType::kF32) return;
  std::map<std::string, int> types;
  int layers = 0;
  size_t largest = 0;
  std::string where;
  for (int id = 0; id < net.num_layers(); ++id) {
    bool copies = false;
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const size_t bytes = net.ConversionBytes(id, pass, net.batch());
      if (bytes == 0) continue;
      copies = true;
      if (bytes <= largest) continue;
      largest = bytes;
      where = net.layer(id).name() + (pass == Pass::kForward ? " forward" : " backward");
    }
    if (!copies) continue;
    ++layers;
    ++types[net.layer(id).type()];
  }
  if (layers == 0) {
    std::printf("16 bits: every layer takes its 16-bit tensors as they are\n");
    return;
  }
  std::string listed;
  for (const auto& [type, count] : types) {
    listed += (listed.empty() ? "" : ", ") + type + " " + std::to_string(count);
  }
  std::printf(
      "16 bits: %d of %d layers compute on float32 copies of their 16-bit tensors (%s); the "
      "largest step's copies: %s (%s)\n",
      layers, net.num_layers(), listed.c_str(), Bytes(largest).c_str(), where.c_str());
}

// The first four steps `pick` chooses, as "layer pass <describe(step)>", ", "
// between them and ", ..." past four; `count` of them in all.
struct StepList {
  std::string text;
  int count = 0;
};

template <typename Pick, typename Describe>
StepList ListSteps(const MemoryPlan& plan, const Net& net, Pick pick, Describe describe) {
  StepList list;
  for (const StepRecord& r : plan.log.steps) {
    if (!pick(r) || ++list.count > 4) continue;
    list.text += std::string(list.count > 1 ? ", " : "") + net.layer(r.layer).name() +
                 (r.pass == Pass::kForward ? " forward " : " backward ") + describe(r);
  }
  if (list.count > 4) list.text += ", ...";
  return list;
}

void PrintStreamed(const MemoryPlan& plan, const Net& net) {
  if (plan.log.streamed == 0) return;
  const StepList steps = ListSteps(
      plan, net, [](const StepRecord& r) { return r.slice_images > 0; },
      [](const StepRecord& r) {
        return "(" + std::to_string(r.slice_images) + (r.stream_buffers == 2 ? " x 2" : "") + ")";
      });
  std::printf(
      "  %d steps streamed through host memory, images per slice (x 2: double-buffered): %s\n",
      plan.log.streamed, steps.text.c_str());
}

// What steps read in themselves instead of having it prefetched: parameters
// a plan brings late, prefetches that found no room.
void PrintOnDemand(const MemoryPlan& plan, const Net& net) {
  if (plan.log.on_demand == 0) return;
  const StepList steps = ListSteps(
      plan, net, [](const StepRecord& r) { return r.on_demand > 0; },
      [](const StepRecord& r) { return Bytes(r.on_demand); });
  std::printf(
      "  read on demand (not prefetched: the step waits for the copy): %s in %d steps: %s\n",
      Bytes(plan.log.on_demand).c_str(), steps.count, steps.text.c_str());
}

void PrintPlan(const Args& args, const std::string& mode, const MemoryOptions& options,
               const MemoryPlan& plan, const Net& net, double seconds, size_t minimum,
               bool single) {
  if (!plan.fits) {
    std::printf("%-13s does not fit: %s\n", mode.c_str(), plan.failure.c_str());
    return;
  }
  std::printf(
      "%-13s peak %12s (%ld bytes) at step %d; persistent %s; moved %s to host, %s back; "
      "%ld recomputations; host memory %s%s; planned in %.3f s\n",
      mode.c_str(), Bytes(plan.peak).c_str(), static_cast<long>(plan.peak), plan.peak_step + 1,
      Bytes(plan.persistent).c_str(), Bytes(plan.log.to_host).c_str(),
      Bytes(plan.log.to_device).c_str(), static_cast<long>(plan.recomputations),
      Bytes(plan.log.host_peak).c_str(), options.host_tier == "ram" ? "" : " (on disk)", seconds);
  std::printf(
      "  %s allocator: max load %s, footprint %s, fragmentation %s (%.2f%%), compaction moved "
      "%s\n",
      options.allocator.c_str(), Bytes(plan.peak).c_str(), Bytes(plan.footprint).c_str(),
      Bytes(plan.fragmentation()).c_str(),
      100.0 * plan.fragmentation() / std::max<size_t>(plan.footprint, 1),
      Bytes(plan.compacted).c_str());
  PrintStreamed(plan, net);
  PrintOnDemand(plan, net);
  if (minimum) {
    std::printf("  smallest budget that runs: %s (%zu bytes)\n", Bytes(minimum).c_str(), minimum);
  }
  if (single) PrintPeak(plan, net);
  if (args.steps) PrintSteps(plan, net);
}

// What an allocator that maps memory (va) mapped in the planned iteration
// (events are recorded with --trace or --device-profile).
void PrintMapping(const MemoryPlan& plan) {
  long maps = 0, unmaps = 0, fenced = 0;
  for (const MemoryEvent& e : plan.events) {
    maps += e.maps;
    unmaps += e.unmaps;
    fenced += e.unmaps > 0;
  }
  if (maps == 0 && unmaps == 0) return;
  std::printf(
      "  mapping per iteration: %ld chunks mapped, %ld unmapped (%ld times after the compute "
      "queued before their chunks' free)\n",
      maps, unmaps, fenced);
}

// The predictor of --device-profile for `net` (null without one).
StatusOr<std::unique_ptr<PlanPredictor>> MakePredictor(const Args& args, const Subject& subject,
                                                       const Net& net, bool say) {
  if (args.device_profile.empty()) return std::unique_ptr<PlanPredictor>();
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<PlanPredictor> predictor,
                         PlanPredictor::Create(args.device_profile, args.link_gbps, net,
                                               args.timing == "measure" ? &subject.spec : nullptr,
                                               subject.memory, args.network_gbps));
  predictor->set_map_seconds_per_chunk(args.map_us * 1e-6);
  if (say && !args.json) {
    std::printf("device profile %s\n", DescribeDeviceProfile(predictor->profile()).c_str());
  }
  return predictor;
}

// The dqn planner's training for `options` (trained now or read from its
// cache; Plan() then finds it in the cache), printed or added to the JSON.
// What a planner that searches says of its search (memory/scheduler_registry.h).
Status ReportSearch(const Args& args, const Net& net, const MemoryOptions& options,
                    nlohmann::ordered_json* json) {
  const SchedulerInfo* info = Schedulers().Find(options.scheduler);
  if (info == nullptr || !info->report) return Status::Ok();
  SPILL_ASSIGN_OR_RETURN(SearchReport report, info->report(net.view(), options));
  if (args.json) {
    *json = std::move(report.json);
  } else {
    std::fputs(report.text.c_str(), stdout);
  }
  return Status::Ok();
}

// One mode planned, reported, and predicted on the device profile.
struct ModeRun {
  const Args& args;
  const Subject& subject;
  PlanPredictor* predictor;  // null without --device-profile
  // The same for each leaner build's network (its step costs), made when
  // a plan first uses it; shares are still of the configured network's
  // roomy run.
  std::vector<std::unique_ptr<PlanPredictor>> leaner_predictors;
  bool single;  // the only mode planned
  nlohmann::ordered_json* json;
  std::vector<MemoryLog>* logs;
  Timeline* timeline;  // the last prediction's
  MemoryPage* page;    // --html; null without

  Status Run(const std::string& mode) {
    SPILL_ASSIGN_OR_RETURN(MemoryOptions options, ModeOptions(args, subject, mode, !single));
    nlohmann::ordered_json planner;
    SPILL_RETURN_IF_ERROR(ReportSearch(args, *subject.net, options, &planner));
    auto start = std::chrono::steady_clock::now();
    // What a run at the budget does (memory/planning/feasibility.h): the mode's own
    // plan, or a smaller budget's layout where that one leaves no room.
    // Inference is planned as eval runs it, at the budget.
    RunnablePlan runnable;
    if (args.inference) {
      SPILL_ASSIGN_OR_RETURN(runnable.plan, PlanInference(subject.net->view(), options));
    } else {
      SPILL_ASSIGN_OR_RETURN(runnable, PlanRunnable(subject.net->view(), options));
    }
    // Where that does not fit, a run tries leaner builds, and so does plan.
    const Net* chosen = subject.net.get();
    const LeanerBuild* leaner = nullptr;
    int chosen_build = -1;
    const bool may_lean = !args.inference && subject.lengths.empty();
    for (size_t i = 0; may_lean && !runnable.plan.fits && i < subject.leaner.size(); ++i) {
      const Net* built = subject.leaner_nets[i].get();
      MemoryOptions lean = options;
      lean.workspace = subject.leaner[i].workspace;
      SPILL_ASSIGN_OR_RETURN(RunnablePlan tried, PlanRunnable(built->view(), lean));
      if (!tried.plan.fits) continue;
      runnable = std::move(tried);
      chosen = built;
      options = lean;
      leaner = &subject.leaner[i];
      chosen_build = static_cast<int>(i);
    }
    const Net& net = *chosen;
    const MemoryPlan& plan = runnable.plan;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t minimum = 0;
    if (args.minimum && plan.fits) {
      auto found = MinimumBudget(net.view(), options);
      if (found.ok()) minimum = *found;
      // Below it, the leaner builds a run tries may still run.
      for (size_t i = 0; may_lean && leaner == nullptr && i < subject.leaner.size(); ++i) {
        MemoryOptions lean = options;
        lean.workspace = subject.leaner[i].workspace;
        auto less = MinimumBudget(subject.leaner_nets[i]->view(), lean);
        if (less.ok() && *less < minimum) minimum = *less;
      }
    }
    std::unique_ptr<Prediction> prediction;
    if (predictor != nullptr && plan.fits) {
      PlanPredictor* costs = predictor;
      if (chosen_build >= 0) {
        leaner_predictors.resize(subject.leaner.size());
        std::unique_ptr<PlanPredictor>& own = leaner_predictors[chosen_build];
        if (own == nullptr) {
          SPILL_ASSIGN_OR_RETURN(own, MakePredictor(args, subject, net, /*say=*/false));
        }
        costs = own.get();
      }
      SPILL_ASSIGN_OR_RETURN(
          Prediction p,
          costs->Predict(plan, options,
                         net.name() + ", batch " + std::to_string(net.batch()) + ", " + mode +
                             ", " + predictor->profile().name + " (simulated)"));
      prediction = std::make_unique<Prediction>(std::move(p));
      *timeline = prediction->timeline;
    }
    if (page != nullptr) {
      page->AddMode(
          PlannedPageMode(mode, options, plan, prediction ? &prediction->timeline : nullptr));
    }
    if (args.json) {
      json->at("modes").push_back(JsonPlan(mode, plan, net, seconds, minimum, args.steps));
      if (runnable.fallback() && plan.fits) {
        json->at("modes").back()["layout_budget_bytes"] = runnable.layout_budget;
      }
      if (leaner != nullptr) json->at("modes").back()["leaner_build"] = leaner->note;
      if (!planner.is_null()) json->at("modes").back()["planner"] = planner;
      if (prediction)
        json->at("modes").back()["prediction"] = JsonPrediction(*prediction, *predictor);
    } else {
      PrintPlan(args, mode, options, plan, net, seconds, minimum, single);
      if (runnable.fallback() && plan.fits) {
        std::printf("  %s\n", DescribeFallback(runnable).c_str());
      }
      if (leaner != nullptr) std::printf("  %s\n", leaner->note.c_str());
      if (plan.fits) PrintMapping(plan);
      if (plan.fits && !subject.lengths.empty()) {
        SPILL_ASSIGN_OR_RETURN(BucketsPlan buckets,
                               PlanBuckets(*subject.net, options, subject.bounds, subject.lengths,
                                           args.inference ? Phase::kEval : Phase::kTrain));
        std::fputs(DescribeBuckets(buckets).c_str(), stdout);
        if (minimum) {
          SPILL_ASSIGN_OR_RETURN(size_t epoch,
                                 MinimumBudgetForEpoch(*subject.net, options, subject.lengths));
          std::printf(
              "    smallest budget for the epoch: %s (%zu bytes; the longest length "
              "alone: %s)\n",
              Bytes(epoch).c_str(), epoch, Bytes(minimum).c_str());
        }
      }
      if (prediction) {
        std::printf("  predicted on %s: %s\n", predictor->profile().name.c_str(),
                    DescribePrediction(*prediction, net.batch(), &predictor->roomy()).c_str());
      }
    }
    return WriteModeOutputs(options, plan, net);
  }

  // Pool sizing, the event trace and the CSV of a plan that fits.
  Status WriteModeOutputs(const MemoryOptions& options, const MemoryPlan& plan, const Net& net) {
    if (!plan.fits) return Status::Ok();
    if (args.size_pool && FindAllocator(options.allocator)->sizes_pool) {
      SPILL_RETURN_IF_ERROR(
          ReportPoolSizing(args, net, options, args.json ? &json->at("modes").back() : nullptr));
    }
    logs->push_back(plan.log);
    if (!args.trace.empty()) {
      SPILL_RETURN_IF_ERROR(
          WriteTextFile(args.trace, MemoryEventsJson(plan.events, net.schedule()), "--trace"));
    }
    if (!args.csv.empty()) {
      SPILL_RETURN_IF_ERROR(WriteTextFile(
          args.csv, MemoryLogCsv(plan.log, net.schedule(), net.layer_names()), "--csv"));
    }
    return Status::Ok();
  }
};

Status Run(const Args& args) {
  if (args.inference && (args.minimum || !args.device_profile.empty() || !args.html.empty() ||
                         args.size_pool || !args.fragmentation_svg.empty())) {
    return InvalidArgument(
        "--inference plans the forward pass alone; --minimum, --device-profile, --html, "
        "--size-pool and --fragmentation-svg work on training iterations: leave them out");
  }
  if ((!args.timeline.empty() || !args.timeline_svg.empty()) && args.device_profile.empty()) {
    return InvalidArgument(
        "--timeline and --timeline-svg simulate on a device profile: add --device-profile NAME");
  }
  // Planning measures only when asked to: it reads what training measured,
  // or models.
  cpu::SetConvTiming(
      {args.timing == "measure" ? cpu::ConvTimingMode::kMeasure : cpu::ConvTimingMode::kModel,
       args.timing == "model" ? "" : cpu::DefaultConvTimingCache()});
  SPILL_ASSIGN_OR_RETURN(Subject subject, Load(args));
  const Net& net = *subject.net;
  const std::string mode = args.memory.mode();
  // Every mode but the costly ones (they train or solve for minutes):
  // those are planned when named.
  std::vector<std::string> modes;
  for (const MemoryMode& m : MemoryModes()) {
    if (!m.costly) modes.push_back(m.name);
  }
  if (!mode.empty()) modes = {mode};
  if (!args.json) {
    const Shape in = net.input_shape();
    std::printf("%s (%s): batch %ld, input %ldx%ldx%ld, %d layers, %zu steps%s%s%s\n",
                net.name().c_str(), args.config.c_str(), net.batch(), in.c(), in.h(), in.w(),
                net.num_layers(), net.schedule().steps.size(),
                PrecisionNote(net.precision()).c_str(),
                subject.has_solver ? ", with solver state" : "",
                args.inference ? "; inference: the forward steps alone" : "");
  }
  const ModelState state = ModelStateOf(net, subject.memory.params_gathered);
  if (!args.json && args.ranks > 1) {
    std::printf(
        "one of %ld data-parallel ranks%s: parameters %s%s, gradients %s%s, solver state %s\n",
        args.ranks,
        subject.zero == 1   ? " (zero 1: its shard of the solver state)"
        : subject.zero == 2 ? " (zero 2: its shard of the solver state)"
        : subject.zero == 3 ? " (zero 3: its shard of the parameters and the solver state)"
                            : "",
        Bytes(state.parameters).c_str(),
        subject.zero == 3 ? " (each gathered whole only while a step of its layer runs)" : "",
        Bytes(state.gradients).c_str(),
        subject.zero >= 2 ? " (each on the device only while its layer's backward runs)" : "",
        Bytes(state.solver_state).c_str());
  }
  if (!args.json && !args.inference) PrintStochasticDepth(net);
  if (!args.json) PrintConversions(net);
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<PlanPredictor> predictor,
                         MakePredictor(args, subject, *subject.net, /*say=*/true));
  Timeline timeline;
  std::vector<MemoryLog> logs;
  nlohmann::ordered_json json = {{"network", net.name()},
                                 {"batch", net.batch()},
                                 {"precision", PrecisionName(net.precision())},
                                 {"ranks", args.ranks},
                                 {"zero", subject.zero},
                                 {"model_state_bytes",
                                  {{"parameters", state.parameters},
                                   {"gradients", state.gradients},
                                   {"solver_state", state.solver_state}}},
                                 {"gradients_leave_the_device", subject.memory.gradients_leave},
                                 {"parameters_gathered", subject.memory.params_gathered},
                                 {"modes", nlohmann::ordered_json::array()}};
  std::unique_ptr<MemoryPage> page;
  if (!args.html.empty()) {
    page = std::make_unique<MemoryPage>(PageSubject{
        net.name() + ", batch " + std::to_string(net.batch()) + PrecisionNote(net.precision()),
        "plan: one training iteration, planned from shapes (" + args.config + ")", &net.schedule(),
        net.layer_names()});
  }
  ModeRun run{args,  subject, predictor.get(), {},        modes.size() == 1,
              &json, &logs,   &timeline,       page.get()};
  for (const std::string& mode : modes) SPILL_RETURN_IF_ERROR(run.Run(mode));
  if (page) SPILL_RETURN_IF_ERROR(WriteTextFile(args.html, page->Html(), "--html"));
  if (!args.fragmentation_svg.empty()) {
    SPILL_ASSIGN_OR_RETURN(MemoryOptions options,
                           ModeOptions(args, subject, modes.back(), modes.size() > 1));
    SPILL_RETURN_IF_ERROR(WriteFragmentation(args, net, options));
  }
  if (args.json) std::printf("%s\n", json.dump().c_str());
  if (!args.timeline.empty()) {
    SPILL_RETURN_IF_ERROR(WriteTextFile(args.timeline, TimelineTraceJson(timeline), "--timeline"));
  }
  if (!args.timeline_svg.empty()) {
    SPILL_RETURN_IF_ERROR(
        WriteTextFile(args.timeline_svg, TimelineSvg(timeline), "--timeline-svg"));
  }
  if (!args.svg.empty()) {
    const std::string title = net.name() + ", batch " + std::to_string(net.batch());
    SPILL_RETURN_IF_ERROR(WriteTextFile(args.svg, MemoryPlotSvg(logs, title), "--svg"));
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags("plan",
              "Device memory of a training iteration, step by step, from shapes alone: nothing "
              "is computed and no memory is reserved.");
  Args args;
  DeclarePlanFlags(flags, &args);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  return ReportStatus("plan", Run(args));
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("plan", [&] { return spill::Main(argc, argv); });
}
