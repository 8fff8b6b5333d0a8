// bench_conv: times every registered CPU convolution algorithm on each op for
// the convolutions of ResNet-18 with a CIFAR stem at batch 64, and prints
// milliseconds per op and workspace MiB, then each algorithm's total over one
// training step of the network's convolutions.
//
//   bazel run //tools/bench:bench_conv [-- --reps N --batch N --algorithms a,b --layers TEXT]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "layers/cpu/conv_algorithm.h"
#include "tools/common/cli.h"

namespace spill {
namespace cpu {
namespace {

struct Layer {
  const char* name;
  int64_t channels, size, filters, kernel, stride, count;  // count: uses in ResNet-18
  bool needs_dx;  // false for the stem, whose input needs no gradient
};

// ResNet-18, CIFAR stem (3x3 conv, no max pool), 32x32 input.
const Layer kLayers[] = {
    {"stem 3->64 3x3 32x32", 3, 32, 64, 3, 1, 1, false},
    {"64->64 3x3 32x32", 64, 32, 64, 3, 1, 4, true},
    {"64->128 3x3 s2 32->16", 64, 32, 128, 3, 2, 1, true},
    {"128->128 3x3 16x16", 128, 16, 128, 3, 1, 3, true},
    {"64->128 1x1 s2 32->16", 64, 32, 128, 1, 2, 1, true},
    {"128->256 3x3 s2 16->8", 128, 16, 256, 3, 2, 1, true},
    {"256->256 3x3 8x8", 256, 8, 256, 3, 1, 3, true},
    {"128->256 1x1 s2 16->8", 128, 16, 256, 1, 2, 1, true},
    {"256->512 3x3 s2 8->4", 256, 8, 512, 3, 2, 1, true},
    {"512->512 3x3 4x4", 512, 4, 512, 3, 1, 3, true},
    {"256->512 1x1 s2 8->4", 256, 8, 512, 1, 2, 1, true},
};

ConvGeometry MakeGeometry(const Layer& l, int64_t batch) {
  ConvGeometry g;
  g.batch = batch;
  g.channels = l.channels;
  g.height = g.width = l.size;
  g.filters = l.filters;
  g.kernel = {l.kernel, l.kernel};
  g.stride = {l.stride, l.stride};
  g.pad = {l.kernel / 2, l.kernel / 2};
  g.dilation = {1, 1};
  g.out_height = g.out_width = (l.size + 2 * (l.kernel / 2) - l.kernel) / l.stride + 1;
  return g;
}

// Floats aligned like the framework's memory pool hands them out (1 KiB):
// oneDNN's kernels slow down a lot on buffers that split cache lines.
class Aligned {
 public:
  explicit Aligned(int64_t n = 0)
      : data_(static_cast<float*>(std::aligned_alloc(kAlign, Bytes(n)))), size_(n) {}
  ~Aligned() { std::free(data_); }
  Aligned(Aligned&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  Aligned& operator=(Aligned&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  float* data() { return data_; }
  int64_t size() const { return size_; }

 private:
  static constexpr size_t kAlign = 1024;
  static size_t Bytes(int64_t n) {
    return (std::max<int64_t>(n, 1) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  }
  float* data_;
  int64_t size_;
};

struct Buffers {
  Aligned x, w, y, dy, dx, dw, workspace;
};

Buffers MakeBuffers(const ConvGeometry& g, size_t workspace_bytes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](int64_t n) {
    Aligned v(n);
    for (int64_t i = 0; i < n; ++i) v.data()[i] = dist(rng);
    return v;
  };
  Buffers b;
  b.x = random(g.batch * g.channels * g.in_plane());
  b.w = random(g.filters * g.col_rows());
  b.dy = random(g.batch * g.filters * g.out_plane());
  b.y = random(b.dy.size());
  b.dx = random(b.x.size());
  b.dw = random(b.w.size());
  b.workspace = random((workspace_bytes + sizeof(float) - 1) / sizeof(float));
  return b;
}

void RunOp(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op, Buffers& b) {
  void* ws = b.workspace.size() == 0 ? nullptr : b.workspace.data();
  switch (op) {
    case ConvOp::kForward:
      a.Forward(g, b.x.data(), b.w.data(), nullptr, b.y.data(), ws);
      break;
    case ConvOp::kBackwardData:
      a.BackwardData(g, b.dy.data(), b.w.data(), b.dx.data(), false, ws);
      break;
    case ConvOp::kBackwardFilter:
      a.BackwardFilter(g, b.x.data(), b.dy.data(), b.dw.data(), nullptr, false, nullptr, ws);
      break;
  }
}

// The fastest of `reps` timed runs after one warm-up run, in milliseconds: the
// minimum is what the algorithm costs when nothing else wants the cores.
double TimeOp(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op, Buffers& b, int reps) {
  RunOp(a, g, op, b);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    RunOp(a, g, op, b);
    const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - start;
    best = r == 0 ? d.count() : std::min(best, d.count());
  }
  return best;
}

struct Options {
  int64_t reps = 5;
  int64_t batch = 64;
  std::vector<std::string> algorithms;  // empty: all
  std::string layers;                   // only layers whose name contains this
};

void Declare(Flags& f, Options* o) {
  f.Int("--reps", &o->reps, "timed runs per operation; the fastest counts (default 5)", 1, 1000);
  f.Int("--batch", &o->batch, "batch size (default 64)", 1, 4096);
  f.app()
      .add_option("--algorithms", o->algorithms, "only these algorithms (default: all)")
      ->delimiter(',')
      ->type_name("A,B");
  f.String("--layers", &o->layers, "only the layers whose name contains TEXT")->type_name("TEXT");
}

std::vector<const ConvAlgorithm*> Selected(const Options& o) {
  std::vector<const ConvAlgorithm*> out;
  for (const ConvAlgorithm* a : ConvAlgorithms()) {
    if (o.algorithms.empty() ||
        std::find(o.algorithms.begin(), o.algorithms.end(), a->name()) != o.algorithms.end()) {
      out.push_back(a);
    }
  }
  return out;
}

double MiB(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Prints one row per algorithm for a layer; adds its step time to `totals`.
void BenchLayer(const Layer& l, const Options& o, const std::vector<const ConvAlgorithm*>& algs,
                std::map<std::string, double>* totals) {
  const ConvGeometry g = MakeGeometry(l, o.batch);
  const double gflop = 2.0 * g.batch * g.filters * g.out_plane() * g.col_rows() * 1e-9;
  std::printf("%s (x%lld, %.2f GFLOP per op)\n", l.name, static_cast<long long>(l.count), gflop);
  for (const ConvAlgorithm* a : algs) {
    if (!a->Supports(g)) {
      std::printf("  %-14s unsupported\n", a->name().c_str());
      continue;
    }
    size_t bytes[kNumConvOps];
    for (int op = 0; op < kNumConvOps; ++op) bytes[op] = a->WorkspaceBytes(g, ConvOp(op));
    Buffers b = MakeBuffers(g, *std::max_element(bytes, bytes + kNumConvOps));
    double ms[kNumConvOps];
    for (int op = 0; op < kNumConvOps; ++op)
      ms[op] = TimeOp(*a, g, ConvOp(op), b, static_cast<int>(o.reps));
    const double step = ms[0] + (l.needs_dx ? ms[1] : 0.0) + ms[2];
    (*totals)[a->name()] += l.count * step;
    std::printf("  %-14s %9.2f %9.2f %9.2f %8.1f %8.1f %8.1f %9.1f\n", a->name().c_str(), ms[0],
                ms[1], ms[2], MiB(bytes[0]), MiB(bytes[1]), MiB(bytes[2]), gflop / ms[0] * 1e3);
  }
}

int Main(int argc, char** argv) {
  Flags flags("bench_conv",
              "Times every CPU convolution algorithm on the convolutions of ResNet-18 with a "
              "CIFAR stem.");
  Options o;
  Declare(flags, &o);
  const int stop = flags.Parse(argc, argv);
  if (stop >= 0) return stop;
  const std::vector<const ConvAlgorithm*> algs = Selected(o);
  std::printf("batch %lld, %d threads, best of %lld runs\n", static_cast<long long>(o.batch),
              omp_get_max_threads(), static_cast<long long>(o.reps));
  std::printf("  %-14s %9s %9s %9s %8s %8s %8s %9s\n", "algorithm", "fwd ms", "bwd_d ms",
              "bwd_f ms", "fwd MiB", "bwd_d MiB", "bwd_f MiB", "fwd GF/s");
  std::map<std::string, double> totals;
  for (const Layer& l : kLayers) {
    if (std::string(l.name).find(o.layers) != std::string::npos) BenchLayer(l, o, algs, &totals);
  }
  std::printf("\nall ResNet-18 convolutions of one training step (fwd + bwd_d + bwd_f):\n");
  for (const ConvAlgorithm* a : algs) {
    const double ms = totals[a->name()];
    std::printf("  %-14s %9.1f ms  (%.1f images/s for the convolutions alone)\n", a->name().c_str(),
                ms, o.batch / ms * 1e3);
  }
  return 0;
}

}  // namespace
}  // namespace cpu
}  // namespace spill

int main(int argc, char** argv) {
  return spill::RunTool("bench_conv", [&] { return spill::cpu::Main(argc, argv); });
}
