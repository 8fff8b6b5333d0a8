#include "layers/cpu/conv_timer.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "framework/base/files.h"
#include "framework/base/logging.h"
#include "framework/base/random.h"
#include "framework/base/units.h"
#include "framework/device/convert.h"
#include "layers/cpu/conv_layouts.h"

namespace spill {
namespace cpu {
namespace {

constexpr int kTimedRuns = 3;
constexpr size_t kBufferAlignment = 4096;
// An algorithm whose first (warm-up) run takes this many times the fastest
// time measured for the same operation is not timed further: its first run
// is its time. Keeps timing from an empty cache short, and cannot change a
// choice (even its best run would lose).
constexpr double kHopelessFactor = 4;
// Winograd pays for its transforms only on wide layers.
constexpr int64_t kWinogradMinChannels = 32;

// Rough sustained rates on two AVX-512 cores (tools/bench/bench_conv), in
// FLOP/s of the direct method.
double ModelRate(const std::string& algorithm, const ConvGeometry& g, ConvOp op) {
  if (algorithm == "dnnl") return 190e9;
  if (algorithm == "dnnl_bf16") return 380e9;
  if (algorithm == "gemm_bf16") return 300e9;
  if (algorithm == "dnnl_winograd") {
    return g.channels_per_group() >= kWinogradMinChannels ? 280e9 : 20e9;
  }
  if (algorithm == "im2col_image") return 100e9;
  if (algorithm == "im2col_chunk") return 70e9;
  if (algorithm == "im2col_batch") return 55e9;
  if (algorithm == "direct") return op == ConvOp::kBackwardFilter ? 20e9 : 45e9;
  return 20e9;
}

// The operation and geometry, without the algorithm.
std::string Problem(const ConvGeometry& g, ConvOp op) {
  std::ostringstream key;
  key << ConvOpName(op) << " " << g.batch << "x" << g.channels << "x" << g.height << "x" << g.width
      << " f" << g.filters << " k" << g.kernel[0] << "x" << g.kernel[1] << " s" << g.stride[0]
      << "x" << g.stride[1] << " p" << g.pad[0] << "x" << g.pad[1] << " d" << g.dilation[0] << "x"
      << g.dilation[1] << " g" << g.groups;
  // Plain operands have no suffix, so that caches written before layouts
  // existed still read.
  if (g.input_layout != Layout::kPlain || g.output_layout != Layout::kPlain) {
    key << " " << LayoutName(g.input_layout) << ">" << LayoutName(g.output_layout);
  }
  // Likewise float32 operands.
  if (g.input_dtype != DType::kF32 || g.output_dtype != DType::kF32) {
    key << " " << DTypeName(g.input_dtype) << ">" << DTypeName(g.output_dtype);
  }
  return key.str();
}

// "<algorithm> <operation>": the cache file's key.
std::string Key(const std::string& algorithm, const ConvGeometry& g, ConvOp op) {
  return algorithm + " " + Problem(g, op);
}

struct Cache {
  std::mutex mutex;
  ConvTimingSettings settings;
  std::map<std::string, double> seconds;
  std::map<std::string, double> fastest;  // per Problem, over this process's measurements
  bool loaded = false;
};

Cache& TheCache() {
  static Cache* cache = new Cache();
  return *cache;
}

constexpr size_t kMaxCacheFileBytes = 64 << 20;

// Reads the cache file. Lines that do not hold a key and a non-negative time
// are skipped; a cache path that is not a regular file (a folder, a FIFO) or
// cannot be read is not used at all, for reading or for writing.
void LoadFile(Cache& cache) {
  cache.loaded = true;
  const std::string path = cache.settings.cache_file;
  if (path.empty()) return;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return;  // written on the first measurement
  auto text = ReadFileToString(path, kMaxCacheFileBytes, "convolution timing cache");
  if (!text.ok()) {
    SPILL_LOG_WARNING(kLayers) << text.status().message() << "; timing without a cache file";
    cache.settings.cache_file.clear();
    return;
  }
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    size_t tab = line.rfind('\t');
    if (tab == std::string::npos) continue;
    auto seconds = ParseFiniteDouble(line.substr(tab + 1));
    if (seconds.ok() && *seconds >= 0) cache.seconds[line.substr(0, tab)] = *seconds;
  }
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : data(static_cast<float*>(std::aligned_alloc(
            kBufferAlignment, (bytes + kBufferAlignment) / kBufferAlignment * kBufferAlignment))) {}
  ~AlignedBuffer() { std::free(data); }
  float* data;
};

// `count` values in [-0.5, 0.5) from random stream `seed`, stored as `dtype`
// at `to` (a buffer of at least `count` floats).
void Fill(uint64_t seed, size_t count, DType dtype, float* to) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = UniformAt(seed, i) - 0.5f;
  ConvertFromFloat(values.data(), to, dtype, static_cast<int64_t>(count));
}

// The fastest of kTimedRuns runs after a warm-up run, or the warm-up run's
// time when that already exceeds kHopelessFactor times `fastest` (the best
// time of another algorithm on the same operation; 0: none yet).
double Measure(const ConvAlgorithm& a, const ConvGeometry& g, ConvOp op, double fastest) {
  const size_t x = g.batch * g.channels * g.in_plane(), y = g.batch * g.filters * g.out_plane();
  const size_t w = g.filters * g.channels_per_group() * g.kernel[0] * g.kernel[1];
  AlignedBuffer in(x * 4), out(y * 4), weights(w * 4), bias(g.filters * 4),
      workspace(ConvWorkspaceBytes(a, g, op) + 4);
  Fill(1, x, g.input_dtype, in.data);
  Fill(2, y, g.output_dtype, out.data);
  Fill(3, w, DType::kF32, weights.data);
  double best = 1e30;
  for (int run = 0; run <= kTimedRuns; ++run) {
    auto start = std::chrono::steady_clock::now();
    switch (op) {
      case ConvOp::kForward:
        ConvForward(a, g, in.data, weights.data, bias.data, out.data, workspace.data);
        break;
      case ConvOp::kBackwardData:
        ConvBackwardData(a, g, out.data, weights.data, in.data, false, workspace.data);
        break;
      case ConvOp::kBackwardFilter:
        ConvBackwardFilter(a, g, in.data, out.data, weights.data, bias.data, false, nullptr,
                           workspace.data);
        break;
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run == 0 && fastest > 0 && seconds > kHopelessFactor * fastest) return seconds;
    if (run > 0) best = std::min(best, seconds);  // the first run warms up
  }
  return best;
}

}  // namespace

void SetConvTiming(const ConvTimingSettings& settings) {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  // The same settings again keep what was measured, so that every network
  // of a process - a run and its resumption - chooses the same algorithms.
  if (settings.mode == cache.settings.mode && settings.cache_file == cache.settings.cache_file)
    return;
  cache.settings = settings;
  cache.seconds.clear();
  cache.fastest.clear();
  cache.loaded = false;
}

const ConvTimingSettings& ConvTiming() { return TheCache().settings; }

double ConvFlops(const ConvGeometry& g) {
  return 2.0 * g.batch * g.filters * g.out_plane() * g.col_rows();
}

double ConvSeconds(const ConvAlgorithm& algorithm, const ConvGeometry& g, ConvOp op) {
  Cache& cache = TheCache();
  const std::string key = Key(algorithm.name(), g, op);
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!cache.loaded) LoadFile(cache);
    auto it = cache.seconds.find(key);
    if (it != cache.seconds.end()) return it->second;
    if (cache.settings.mode == ConvTimingMode::kModel)
      return ConvFlops(g) / ModelRate(algorithm.name(), g, op);
  }
  const std::string problem = Problem(g, op);
  double fastest = 0;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.fastest.find(problem);
    if (it != cache.fastest.end()) fastest = it->second;
  }
  const double seconds = Measure(algorithm, g, op, fastest);
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.seconds[key] = seconds;
  double& best = cache.fastest[problem];
  best = best > 0 ? std::min(best, seconds) : seconds;
  if (!cache.settings.cache_file.empty()) {
    // Every digit, so that a later process reads exactly the time this one
    // chose by, and chooses the same.
    std::ofstream(cache.settings.cache_file, std::ios::app)
        << key << "\t" << std::setprecision(std::numeric_limits<double>::max_digits10) << seconds
        << "\n";
  }
  return seconds;
}

std::string DefaultConvTimingCache() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path dir = xdg && *xdg     ? fs::path(xdg) / "spill"
                 : home && *home ? fs::path(home) / ".cache" / "spill"
                                 : fs::path();
  if (dir.empty()) return "";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec ? "" : (dir / "cpu_conv_timings.tsv").string();
}

}  // namespace cpu
}  // namespace spill
