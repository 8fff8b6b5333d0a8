// bench_alloc: the allocators compared on the model zoo, from plans alone.
//
// For each network (liveness, no compaction, the dynamic workspace policy
// with modelled timings) it prints
//   * max load: the most bytes live at once, a bound for any placement;
//   * the footprint - the device memory a budget must cover - under first
//     fit, best fit and the static (DSA) allocator, and each one's
//     fragmentation overhead (footprint - max load);
//   * the cost of one allocation or free under each allocator: the
//     iteration's allocation trace replayed through the allocator seam many
//     times, timed with a steady clock (static: served from its profile, the
//     solve done once before timing, and reported separately).
//
//   bazel-bin/tools/bench/bench_alloc             AlexNet b200, ResNet-50 b32, Inception-v4 b32,
//                                           DenseNet-121 b32
#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/base/units.h"
#include "framework/config/net_spec.h"
#include "framework/graph/net.h"
#include "memory/allocators/allocator.h"
#include "memory/allocators/dsa_solver.h"
#include "memory/planning/planner.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

constexpr int kReplays = 50;  // iterations of the trace per timing

struct Case {
  const char* name;
  const char* file;
  int64_t batch;
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Replays the iteration's alloc/free events through `allocator` `kReplays`
// times; returns seconds per request (allocations and frees).
StatusOr<double> Replay(DeviceAllocator& allocator, const std::vector<MemoryEvent>& events,
                        size_t persistent) {
  AllocRequest weights;
  weights.bytes = persistent;
  weights.category = MemoryCategory::kParameters;
  if (persistent > 0) SPILL_RETURN_IF_ERROR(allocator.Allocate(weights).status());
  int64_t requests = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kReplays; ++r) {
    SPILL_RETURN_IF_ERROR(allocator.BeginIteration(Phase::kTrain));
    std::unordered_map<AllocationId, AllocationId> live;  // planned block -> replayed block
    for (const MemoryEvent& e : events) {
      if (e.type == MemoryEventType::kAlloc) {
        AllocRequest request;
        request.bytes = e.bytes;
        request.category = e.category;
        request.tensor = e.tensor;
        request.step = e.step;
        SPILL_ASSIGN_OR_RETURN(Allocation a, allocator.Allocate(request));
        live[e.block] = a.id;
        ++requests;
      } else if (e.type == MemoryEventType::kFree) {
        auto it = live.find(e.block);
        if (it == live.end()) continue;
        allocator.Free(it->second);
        live.erase(it);
        ++requests;
      }
    }
    for (const auto& [planned, id] : live) allocator.Free(id);
    allocator.EndIteration();
  }
  return Seconds(start) / std::max<int64_t>(requests, 1);
}

Status Run(const Case& c) {
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(c.file));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {c.batch, DeviceType::kCpu}));
  const NetworkView view = net->view();
  MemoryOptions options;
  options.device_budget = kUnlimitedBudget;
  options.compact = false;
  options.record_events = true;
  std::printf("%s b%ld\n", c.name, static_cast<long>(c.batch));
  MemoryPlan reference;
  for (const char* allocator : {"first_fit", "best_fit", "static"}) {
    options.allocator = allocator;
    const auto start = std::chrono::steady_clock::now();
    SPILL_ASSIGN_OR_RETURN(MemoryPlan plan, Plan(view, options));
    const double plan_seconds = Seconds(start);
    if (std::string(allocator) == "first_fit") {
      reference = plan;
      size_t requests = 0;
      for (const MemoryEvent& e : plan.events) {
        requests += e.type == MemoryEventType::kAlloc || e.type == MemoryEventType::kFree;
      }
      std::printf("  max load %s (persistent %s); %zu allocations and frees per iteration\n",
                  FormatBytes(static_cast<double>(plan.peak)).c_str(),
                  FormatBytes(static_cast<double>(plan.persistent)).c_str(), requests);
    }
    // Time the allocator alone on the same trace.
    AllocatorContext context;
    context.capacity = kUnlimitedBudget;
    const AllocationProfile profile =
        ProfileFromEvents(reference.events, Phase::kTrain, kUnlimitedBudget);
    context.profiler = [&profile](Phase, size_t, ProfilePlans) -> StatusOr<AllocationProfile> {
      return profile;
    };
    SPILL_ASSIGN_OR_RETURN(auto bench, CreateAllocator(allocator, context));
    SPILL_ASSIGN_OR_RETURN(double per_request, Replay(*bench, reference.events, plan.persistent));
    std::printf("  %-9s footprint %12s  fragmentation %10s (%5.2f%%)  %7.0f ns per request",
                allocator, FormatBytes(static_cast<double>(plan.footprint)).c_str(),
                FormatBytes(static_cast<double>(plan.fragmentation())).c_str(),
                100.0 * plan.fragmentation() / plan.peak, per_request * 1e9);
    if (std::string(allocator) == "static") {
      std::vector<DsaBlock> blocks;
      for (const ProfiledRequest& r : profile.requests) {
        blocks.push_back({r.bytes, r.alloc_time, r.free_time});
      }
      const auto solve_start = std::chrono::steady_clock::now();
      SolveDsaBestFit(blocks);
      std::printf("  (solve %.1f ms once, plan %.1f ms)", Seconds(solve_start) * 1e3,
                  plan_seconds * 1e3);
    }
    std::printf("\n");
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags("bench_alloc",
              "The allocators compared on the model zoo (run from the repository root): "
              "footprint and cost per request.");
  if (const int code = flags.Parse(argc, argv); code >= 0) return code;
  const std::vector<Case> cases = {{"AlexNet", "models/alexnet.yaml", 200},
                                   {"ResNet-50", "models/resnet50.yaml", 32},
                                   {"Inception-v4", "models/inception_v4.yaml", 32},
                                   {"DenseNet-121", "models/densenet121.yaml", 32}};
  for (const Case& c : cases) {
    Status status = Run(c);
    if (!status.ok()) {
      std::fprintf(stderr, "bench_alloc: %s: %s\n", c.file, status.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_alloc", [&] { return spill::Main(argc, argv); });
}
