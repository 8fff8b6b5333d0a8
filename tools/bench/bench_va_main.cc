// bench_va: what virtual addressing costs on the CPU device, per chunk size.
//
// For each chunk size it prints
//   * one chunk mapped (and its page tables made) then unmapped, on its own:
//     microseconds per cycle, averaged;
//   * the training iterations of a network under the window scheduler with
//     the va allocator, run by the memory runtime on the CPU device with
//     real mappings and real copies but no computation: chunks mapped and
//     unmapped, and the time in those calls, in the first iteration (from
//     nothing) and per iteration after it (the range cache warm);
//   * the footprint and the internal fragmentation (Eq. 1's largest m_a - m_r,
//     and its sum over the live requests at the footprint's peak bound).
//
//   bazel-bin/tools/bench/bench_va [--config models/resnet50.yaml] [--batch 16] [--size 224]
//                            [--device-memory 1GiB] [--iterations 4]
//                            [--chunks 64KiB,256KiB,2MiB,8MiB,40MiB]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "framework/base/units.h"
#include "framework/config/net_spec.h"
#include "framework/device/cpu_device.h"
#include "framework/graph/net.h"
#include "layers/cpu/conv_timer.h"
#include "memory/allocators/va_allocator.h"
#include "memory/runtime/runtime.h"
#include "tools/common/cli.h"

namespace spill {
namespace {

constexpr int kCycles = 200;  // map/unmap cycles timed per chunk size
constexpr size_t kCycleSlots = 16;

struct Args {
  std::string model = "models/resnet50.yaml";
  int64_t batch = 16;
  int64_t size = 224;
  size_t budget = kGiB;
  int iterations = 4;
  std::vector<size_t> chunks = {64 * kKiB, 256 * kKiB, 2 * kMiB, 8 * kMiB, 40 * kMiB};
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Microseconds to map one chunk (populating its page tables) and unmap it.
StatusOr<double> MapCycle(CpuDevice& device, size_t chunk) {
  SPILL_ASSIGN_OR_RETURN(auto vm,
                         device.CreateVirtualMemory(chunk, kCycleSlots, kCycleSlots * chunk));
  for (size_t c = 0; c < kCycleSlots; ++c) {  // the pages exist from here on
    SPILL_RETURN_IF_ERROR(vm->Map(c * chunk, c));
    std::memset(vm->base() + c * chunk, 1, chunk);
    SPILL_RETURN_IF_ERROR(vm->Unmap(c * chunk, chunk));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCycles; ++i) {
    const size_t slot = i % kCycleSlots, c = (i * 7) % kCycleSlots;
    SPILL_RETURN_IF_ERROR(vm->Map(slot * chunk, c));
    SPILL_RETURN_IF_ERROR(vm->Unmap(slot * chunk, chunk));
  }
  return Seconds(start) / kCycles * 1e6;
}

class NoCompute : public StepRunner {
 public:
  Status Recompute(int) override { return Status::Ok(); }
};

// Runs `iterations` training iterations of the memory runtime alone on
// `device` and prints the mapping counts and times.
Status RunIterations(const Net& net, CpuDevice& device, size_t chunk, const Args& args) {
  MemoryOptions options;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode("window", &options));
  options.allocator = "va";
  SPILL_RETURN_IF_ERROR(options.settings.Set("va_chunk", std::to_string(chunk)));
  options.device_budget = args.budget;
  options.host_budget = 64 * kGiB;
  SPILL_ASSIGN_OR_RETURN(auto runtime, MemoryRuntime::Create(net.view(), options, &device));
  const auto& va = dynamic_cast<const VirtualAddressAllocator&>(runtime->allocator());
  NoCompute runner;
  VaStats first, last = va.va_stats();
  double seconds = 0;
  for (int i = 0; i < args.iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    SPILL_RETURN_IF_ERROR(runtime->BeginIteration(Phase::kTrain));
    for (const Step& step : net.schedule().steps) {
      SPILL_RETURN_IF_ERROR(runtime->PrepareStep(step, runner));
      runtime->FinishStep(step);
    }
    SPILL_RETURN_IF_ERROR(runtime->EndIteration());
    device.SynchronizeCopies();
    if (i > 0) seconds += Seconds(start);
    if (i == 0) first = va.va_stats();
  }
  const VaStats& s = va.va_stats();
  const int later = std::max(args.iterations - 1, 1);
  std::printf(
      "  first iteration: %6ld maps %6ld unmaps %8.2f ms | then per iteration: %7.1f maps %7.1f "
      "unmaps %8.2f ms of %8.1f ms | footprint %s, max m_a - m_r %s, exact reuses %ld\n",
      static_cast<long>(first.maps - last.maps), static_cast<long>(first.unmaps - last.unmaps),
      (first.map_seconds - last.map_seconds) * 1e3,
      static_cast<double>(s.maps - first.maps) / later,
      static_cast<double>(s.unmaps - first.unmaps) / later,
      (s.map_seconds - first.map_seconds) * 1e3 / later, seconds * 1e3 / later,
      FormatBytes(static_cast<double>(va.PeakFootprint())).c_str(),
      (std::to_string(s.max_internal / kKiB) + " KiB").c_str(), static_cast<long>(s.exact_reuses));
  return Status::Ok();
}

// The flags; returns -1 when the benchmark goes on, else the exit code.
int ParseFlags(int argc, char** argv, Args* a) {
  Flags flags("bench_va",
              "Virtual addressing on the CPU device: the window scheduler with the va allocator "
              "over a few iterations, per chunk size: maps, unmaps and their cost.");
  flags.InputFile("--config", &a->model, "network (YAML)");
  flags.Int("--batch", &a->batch, "batch size", 1, 1 << 20);
  flags.Int("--size", &a->size, "image size", 1, 1 << 16);
  flags.Bytes("--device-memory", &a->budget, "device budget", 1, size_t{1} << 50);
  int64_t iterations = a->iterations;
  flags.Int("--iterations", &iterations, "iterations per chunk size", 1, 1000000);
  flags.BytesList("--chunks", &a->chunks, "chunk sizes to compare", 1, size_t{1} << 40);
  const int code = flags.Parse(argc, argv);
  a->iterations = static_cast<int>(iterations);
  return code;
}

int Main(int argc, char** argv) {
  Args parsed;
  if (const int code = ParseFlags(argc, argv, &parsed); code >= 0) return code;
  const Args* args = &parsed;
  cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  auto spec = LoadNetFile(args->model, {{"size", YAML::Load(std::to_string(args->size))}});
  if (!spec.ok()) {
    std::fprintf(stderr, "bench_va: %s\n", spec.status().message().c_str());
    return 1;
  }
  auto net = Net::Build(*spec, {args->batch, DeviceType::kCpu});
  if (!net.ok()) {
    std::fprintf(stderr, "bench_va: %s\n", net.status().message().c_str());
    return 1;
  }
  std::printf("%s %ldx%ld, batch %ld, window scheduler + va under %s, %d iterations\n",
              spec->name.c_str(), static_cast<long>(args->size), static_cast<long>(args->size),
              static_cast<long>(args->batch),
              FormatBytes(static_cast<double>(args->budget)).c_str(), args->iterations);
  CpuDevice device;
  for (size_t chunk : args->chunks) {
    auto cycle = MapCycle(device, chunk);
    if (!cycle.ok()) {
      std::fprintf(stderr, "bench_va: %s\n", cycle.status().message().c_str());
      return 1;
    }
    std::printf("chunk %s: map + unmap %.1f us\n", FormatBytes(static_cast<double>(chunk)).c_str(),
                *cycle);
    Status run = RunIterations(**net, device, chunk, *args);
    if (!run.ok()) {
      std::fprintf(stderr, "bench_va: %s\n", run.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_va", [&] { return spill::Main(argc, argv); });
}
