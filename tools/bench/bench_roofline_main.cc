// bench_roofline: the two roofs of this machine that training runs under -
// the float32 FMA peak and the memory bandwidth - measured, not looked up.
//
//   FMA peak     one thread per core (OpenMP's thread count), each running
//                independent chains of 16-lane multiply-adds held in
//                registers: no memory traffic, enough chains to hide the
//                FMA latency on both FMA ports
//   bandwidth    streaming over buffers of a few sizes, every thread on its
//                own part: read (sum), write (fill) and copy, in bytes moved
//                per second; the 16 MiB buffer is the size of one ResNet-18
//                activation at batch 64 (it fits the last-level cache of
//                large servers), the 1 GiB one measures main memory
//
// Each figure is the best of several runs: what the machine gives when
// nothing else wants it. tools/bench/roofline.sh divides what each layer type
// achieves (bench_train --profile) by these.
//
//   bazel run //tools/bench:bench_roofline [-- --seconds S]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tools/common/cli.h"

namespace spill {
namespace {

// 16 floats: one AVX-512 register (two AVX2 ones) under GCC's vector
// extensions, so the loop needs no intrinsics.
typedef float Lanes __attribute__((vector_size(64)));
constexpr int kLanes = 16;
// Independent multiply-add chains per thread: at least latency (4 cycles)
// x FMA ports (2) of them keep every port busy.
constexpr int kChains = 16;
constexpr int kRepeats = 5;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `iterations` rounds of kChains multiply-adds of kLanes lanes; returns a
// value the compiler cannot drop.
__attribute__((noinline)) float FmaChains(int64_t iterations) {
  Lanes acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = Lanes{} + 0.001f * static_cast<float>(k);
  const Lanes scale = Lanes{} + 0.999999f, shift = Lanes{} + 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * scale + shift;
  }
  Lanes sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum += acc[k];
  float total = 0;
  for (int l = 0; l < kLanes; ++l) total += sum[l];
  return total;
}

// FLOP/s of all threads together: the best of kRepeats runs of about
// `seconds` each.
double FmaPeak(double seconds, int* threads) {
  int64_t iterations = 1 << 16;
  double best = 0;
  for (int r = 0; r < kRepeats;) {
    float sink = 0;
    const double start = Now();
#pragma omp parallel reduction(+ : sink)
    {
      sink += FmaChains(iterations);
#pragma omp single
      *threads = omp_get_num_threads();
    }
    const double elapsed = Now() - start;
    if (sink == 12345.0f) std::puts("");  // keeps the work
    if (elapsed < seconds / 4) {          // too short to time: grow
      iterations *= 2;
      continue;
    }
    best = std::max(best, 2.0 * kLanes * kChains * iterations * *threads / elapsed);
    ++r;
  }
  return best;
}

enum class Stream { kRead, kWrite, kCopy };

// Bytes moved per second over `bytes` of buffer: the best of kRepeats
// rounds of about `seconds` each.
double Bandwidth(Stream kind, size_t bytes, double seconds) {
  const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  float* pa = a.data();
  float* pb = b.data();
  const double moved = static_cast<double>(bytes) * (kind == Stream::kCopy ? 2 : 1);
  double best = 0, sink = 0;
  for (int r = 0; r < kRepeats; ++r) {
    int64_t passes = 0;
    const double start = Now();
    double elapsed = 0;
    do {
      double sum = 0;
      switch (kind) {
        case Stream::kRead:
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
          for (int64_t i = 0; i < n; ++i) sum += pa[i];
          break;
        case Stream::kWrite:
#pragma omp parallel for simd schedule(static)
          for (int64_t i = 0; i < n; ++i) pa[i] = static_cast<float>(passes);
          break;
        case Stream::kCopy:
#pragma omp parallel for simd schedule(static)
          for (int64_t i = 0; i < n; ++i) pb[i] = pa[i];
          break;
      }
      sink += sum;
      ++passes;
      elapsed = Now() - start;
    } while (elapsed < seconds);
    best = std::max(best, moved * passes / elapsed);
  }
  if (sink == 12345.0) std::puts("");
  return best;
}

int Main(int argc, char** argv) {
  Flags flags("bench_roofline",
              "Measures this machine's float32 FMA peak (registers only, one thread per core) "
              "and its memory bandwidth.");
  double seconds = 0.2;
  flags.Float("--seconds", &seconds, "length of each timed run (default 0.2)", 0.001, 60);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  int threads = 0;
  const double peak = FmaPeak(seconds, &threads);
  std::printf("fma_peak %.1f GFLOP/s (%d threads, %d chains of %d-lane multiply-adds each)\n",
              peak * 1e-9, threads, kChains, kLanes);
  constexpr size_t kMiB = size_t{1} << 20;
  for (size_t size : {kMiB, 16 * kMiB, 1024 * kMiB}) {
    const double read = Bandwidth(Stream::kRead, size, seconds);
    const double write = Bandwidth(Stream::kWrite, size, seconds);
    const double copy = Bandwidth(Stream::kCopy, size, seconds);
    std::printf("bandwidth %zu MiB: read %.1f GB/s, write %.1f GB/s, copy %.1f GB/s\n", size / kMiB,
                read * 1e-9, write * 1e-9, copy * 1e-9);
  }
  return 0;
}

}  // namespace
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_roofline", [&] { return spill::Main(argc, argv); });
}
