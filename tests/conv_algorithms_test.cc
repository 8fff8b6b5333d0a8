// Every registered CPU convolution algorithm against im2col_image (itself
// checked against plain loops in double precision), for each op and a set of
// geometries: results, bitwise determinism, and running within exactly
// WorkspaceBytes bytes of workspace with no output element left unwritten;
// and the filter gradient over slices of the batch (memory.chunk).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_layouts.h"

namespace spill {
namespace cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kTolerance = 1e-4;  // relative to the largest reference magnitude
// For algorithms that compute in bfloat16 (8 significant bits: each operand
// rounds by up to 2^-9 of itself).
constexpr double kBf16Tolerance = 2e-2;
constexpr unsigned char kCanary = 0xA5;

struct Case {
  const char* name;
  ConvGeometry g;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ConvGeometry Geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t f,
                      std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                      std::array<int64_t, 2> pad, std::array<int64_t, 2> dilation = {1, 1},
                      int64_t groups = 1) {
  ConvGeometry g;
  g.batch = n;
  g.channels = c;
  g.height = h;
  g.width = w;
  g.filters = f;
  g.kernel = kernel;
  g.stride = stride;
  g.pad = pad;
  g.dilation = dilation;
  g.groups = groups;
  const int64_t extent_h = dilation[0] * (kernel[0] - 1) + 1;
  const int64_t extent_w = dilation[1] * (kernel[1] - 1) + 1;
  g.out_height = (h + 2 * pad[0] - extent_h) / stride[0] + 1;
  g.out_width = (w + 2 * pad[1] - extent_w) / stride[1] + 1;
  return g;
}

std::vector<Case> Cases() {
  return {
      {"plain3x3", Geometry(2, 4, 8, 8, 6, {3, 3}, {1, 1}, {1, 1})},
      {"stride2", Geometry(2, 4, 9, 8, 6, {3, 3}, {2, 2}, {1, 1})},
      {"pointwise", Geometry(3, 8, 5, 5, 4, {1, 1}, {1, 1}, {0, 0})},
      {"pointwise_stride2", Geometry(3, 8, 6, 7, 4, {1, 1}, {2, 2}, {0, 0})},
      {"groups2", Geometry(2, 6, 7, 7, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2)},
      {"depthwise", Geometry(2, 4, 6, 6, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 4)},
      {"dilation2", Geometry(2, 3, 9, 9, 5, {3, 3}, {1, 1}, {2, 2}, {2, 2})},
      {"kernel1x7", Geometry(2, 4, 6, 10, 3, {1, 7}, {1, 1}, {0, 3})},
      {"stem7x7_stride2", Geometry(2, 3, 16, 16, 8, {7, 7}, {2, 2}, {3, 3})},
      {"batch1", Geometry(1, 4, 8, 8, 6, {3, 3}, {1, 1}, {1, 1})},
      {"batch5", Geometry(5, 4, 8, 8, 6, {3, 3}, {1, 1}, {1, 1})},
      // More than one chunk of im2col_chunk, and a last chunk of one image.
      {"batch11", Geometry(11, 3, 6, 6, 4, {3, 3}, {1, 1}, {1, 1})},
      {"batch9_pointwise", Geometry(9, 4, 5, 5, 6, {1, 1}, {1, 1}, {0, 0})},
      {"tiny1x1", Geometry(3, 5, 1, 1, 4, {3, 3}, {1, 1}, {1, 1})},
      {"tiny1x1_pointwise", Geometry(2, 8, 1, 1, 4, {1, 1}, {1, 1}, {0, 0})},
      // Channel counts that make oneDNN pick blocked (and padded) formats.
      {"wide", Geometry(2, 32, 8, 8, 48, {3, 3}, {1, 1}, {1, 1})},
      {"wide_padded_stride2", Geometry(2, 20, 9, 9, 24, {3, 3}, {2, 2}, {1, 1})},
      {"wide_groups2", Geometry(2, 32, 6, 6, 64, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2)},
      // MobileNet's depthwise convolutions: strided, odd sizes, planes
      // smaller than the kernel, and wider or dilated kernels.
      {"depthwise_stride2", Geometry(3, 5, 9, 8, 5, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 5)},
      {"depthwise_tiny", Geometry(4, 24, 2, 2, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 24)},
      {"depthwise_tiny1x1", Geometry(3, 20, 1, 1, 20, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 20)},
      {"depthwise_tiny_stride2", Geometry(3, 16, 2, 2, 16, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 16)},
      {"depthwise_5x5_dilation2", Geometry(2, 6, 11, 9, 6, {5, 5}, {1, 2}, {4, 3}, {2, 2}, 6)},
      {"depthwise_wide", Geometry(2, 48, 14, 14, 48, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 48)},
  };
}

std::vector<std::string> AlgorithmNames() {
  std::vector<std::string> names;
  for (const ConvAlgorithm* a : ConvAlgorithms()) names.push_back(a->name());
  return names;
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Exactly `bytes` of workspace, 1 KiB aligned like the framework's pool, ending
// within 1 KiB of an inaccessible page; the bytes in between are a canary. The
// workspace itself is filled with NaN before every use.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const size_t page = sysconf(_SC_PAGESIZE);
    const size_t usable = (bytes + 1023) / 1024 * 1024;
    body_ = (usable + page - 1) / page * page;
    mapped_ =
        mmap(nullptr, body_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped_ == MAP_FAILED) {
      ADD_FAILURE() << "mmap of " << body_ + page << " bytes failed";
      mapped_ = nullptr;
      return;
    }
    EXPECT_EQ(mprotect(static_cast<char*>(mapped_) + body_, page, PROT_NONE), 0);
    data_ = static_cast<char*>(mapped_) + body_ - usable;
    std::memset(data_ + bytes, kCanary, usable - bytes);
  }
  ~GuardedBuffer() {
    if (mapped_ != nullptr) munmap(mapped_, body_ + sysconf(_SC_PAGESIZE));
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  // nullptr when empty, as the contract allows.
  void* Fresh() {
    if (data_ != nullptr) std::memset(data_, 0xFF, bytes_);  // NaN floats
    return data_;
  }
  bool CanaryIntact() const {
    if (data_ == nullptr) return true;
    const unsigned char* begin = reinterpret_cast<unsigned char*>(data_) + bytes_;
    const unsigned char* end = static_cast<unsigned char*>(mapped_) + body_;
    return std::all_of(begin, end, [](unsigned char c) { return c == kCanary; });
  }

 private:
  size_t bytes_;
  size_t body_ = 0;
  void* mapped_ = nullptr;
  char* data_ = nullptr;
};

// Plain loops in double: the check on im2col_image.
struct Naive {
  const ConvGeometry& g;

  template <typename Fn>
  void ForEachTap(Fn fn) const {
    const int64_t cg = g.channels_per_group(), fg = g.filters_per_group();
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t f = 0; f < g.filters; ++f)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
            for (int64_t kj = 0; kj < g.kernel[1]; ++kj)
              for (int64_t oh = 0; oh < g.out_height; ++oh)
                for (int64_t ow = 0; ow < g.out_width; ++ow) {
                  const int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dilation[0];
                  const int64_t iw = ow * g.stride[1] - g.pad[1] + kj * g.dilation[1];
                  if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) continue;
                  const int64_t xi =
                      ((n * g.channels + f / fg * cg + c) * g.height + ih) * g.width + iw;
                  const int64_t wi = ((f * cg + c) * g.kernel[0] + ki) * g.kernel[1] + kj;
                  const int64_t yi = ((n * g.filters + f) * g.out_height + oh) * g.out_width + ow;
                  fn(xi, wi, yi);
                }
  }
};

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// "" when `got` matches `want` within the tolerance and holds no NaN.
std::string Compare(const std::vector<float>& got, const std::vector<float>& want,
                    double relative = kTolerance) {
  const double tolerance = relative * std::max(MaxAbs(want), 1e-3);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::fabs(static_cast<double>(got[i]) - want[i]) > tolerance) {
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]) + " (tolerance " + std::to_string(tolerance) + ")";
    }
  }
  return "";
}

// Inputs of one geometry.
struct Problem {
  explicit Problem(const ConvGeometry& geometry)
      : g(geometry),
        x(Random(g.batch * g.channels * g.in_plane(), 1)),
        w(Random(g.filters * g.col_rows(), 2)),
        bias(Random(g.filters, 3)),
        dy(Random(g.batch * g.filters * g.out_plane(), 4)),
        dx_before(Random(x.size(), 5)) {}

  ConvGeometry g;
  std::vector<float> x, w, bias, dy, dx_before;
};

// The outputs of every op variant.
struct Results {
  std::vector<float> y_bias, y, dx, dx_accumulated, dw_db, db, dw;

  bool operator==(const Results& o) const {
    const std::vector<const std::vector<float>*> a = {&y_bias, &y,  &dx, &dx_accumulated,
                                                      &dw_db,  &db, &dw};
    const std::vector<const std::vector<float>*> b = {&o.y_bias, &o.y,  &o.dx, &o.dx_accumulated,
                                                      &o.dw_db,  &o.db, &o.dw};
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i]->size() != b[i]->size() ||
          std::memcmp(a[i]->data(), b[i]->data(), a[i]->size() * sizeof(float)) != 0) {
        return false;
      }
    }
    return true;
  }
};

// Runs every op of `a` on `p`, each with exactly its declared workspace and
// with overwritten outputs first filled with NaN.
Results RunAll(const ConvAlgorithm& a, const Problem& p) {
  const ConvGeometry& g = p.g;
  GuardedBuffer fwd(a.WorkspaceBytes(g, ConvOp::kForward));
  GuardedBuffer bwd_data(a.WorkspaceBytes(g, ConvOp::kBackwardData));
  GuardedBuffer bwd_filter(a.WorkspaceBytes(g, ConvOp::kBackwardFilter));
  Results r;
  r.y_bias.assign(p.dy.size(), kNaN);
  a.Forward(g, p.x.data(), p.w.data(), p.bias.data(), r.y_bias.data(), fwd.Fresh());
  r.y.assign(p.dy.size(), kNaN);
  a.Forward(g, p.x.data(), p.w.data(), nullptr, r.y.data(), fwd.Fresh());
  r.dx.assign(p.x.size(), kNaN);
  a.BackwardData(g, p.dy.data(), p.w.data(), r.dx.data(), false, bwd_data.Fresh());
  r.dx_accumulated = p.dx_before;
  a.BackwardData(g, p.dy.data(), p.w.data(), r.dx_accumulated.data(), true, bwd_data.Fresh());
  r.dw_db.assign(p.w.size(), kNaN);
  r.db.assign(p.bias.size(), kNaN);
  a.BackwardFilter(g, p.x.data(), p.dy.data(), r.dw_db.data(), r.db.data(), false, nullptr,
                   bwd_filter.Fresh());
  r.dw.assign(p.w.size(), kNaN);
  a.BackwardFilter(g, p.x.data(), p.dy.data(), r.dw.data(), nullptr, false, nullptr,
                   bwd_filter.Fresh());
  EXPECT_TRUE(fwd.CanaryIntact()) << "forward wrote past its workspace";
  EXPECT_TRUE(bwd_data.CanaryIntact()) << "backward data wrote past its workspace";
  EXPECT_TRUE(bwd_filter.CanaryIntact()) << "backward filter wrote past its workspace";
  return r;
}

const ConvAlgorithm& Reference() {
  const ConvAlgorithm* a = FindConvAlgorithm("im2col_image");
  EXPECT_NE(a, nullptr);
  return *a;
}

TEST(ConvAlgorithmsTest, AllAreRegistered) {
  for (const char* name : {"im2col_image", "im2col_batch", "im2col_chunk", "direct", "depthwise",
                           "dnnl", "dnnl_winograd", "dnnl_bf16", "gemm_bf16"}) {
    EXPECT_NE(FindConvAlgorithm(name), nullptr) << name;
  }
}

// depthwise takes one filter per channel and nothing else: a grouped
// convolution with several channels or filters per group is left to the
// general algorithms.
TEST(ConvAlgorithmsTest, DepthwiseTakesOneFilterPerChannelOnly) {
  const ConvAlgorithm* a = FindConvAlgorithm("depthwise");
  ASSERT_NE(a, nullptr);
  for (const Case& c : Cases()) {
    const ConvGeometry& g = c.g;
    EXPECT_EQ(a->Supports(g), g.groups == g.channels && g.filters == g.channels) << c.name;
  }
  // Two filters per channel (a depth multiplier of 2).
  EXPECT_FALSE(a->Supports(Geometry(2, 4, 6, 6, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 4)));
}

class ConvCaseTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConvCaseTest, ReferenceMatchesPlainLoops) {
  const Problem p(GetParam().g);
  const Results r = RunAll(Reference(), p);
  std::vector<double> y(p.dy.size()), dx(p.x.size()), dw(p.w.size()), db(p.bias.size());
  Naive{p.g}.ForEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += static_cast<double>(p.x[xi]) * p.w[wi];
    dx[xi] += static_cast<double>(p.dy[yi]) * p.w[wi];
    dw[wi] += static_cast<double>(p.dy[yi]) * p.x[xi];
  });
  const int64_t plane = p.g.out_plane();
  std::vector<float> y_bias(y.size()), dx_accumulated(dx.size());
  for (size_t i = 0; i < y.size(); ++i) {
    y_bias[i] = static_cast<float>(y[i] + p.bias[i / plane % p.g.filters]);
    db[i / plane % p.g.filters] += p.dy[i];
  }
  for (size_t i = 0; i < dx.size(); ++i)
    dx_accumulated[i] = static_cast<float>(dx[i] + p.dx_before[i]);
  auto to_float = [](const std::vector<double>& v) {
    return std::vector<float>(v.begin(), v.end());
  };
  EXPECT_EQ(Compare(r.y, to_float(y)), "");
  EXPECT_EQ(Compare(r.y_bias, y_bias), "");
  EXPECT_EQ(Compare(r.dx, to_float(dx)), "");
  EXPECT_EQ(Compare(r.dx_accumulated, dx_accumulated), "");
  EXPECT_EQ(Compare(r.dw, to_float(dw)), "");
  EXPECT_EQ(Compare(r.dw_db, to_float(dw)), "");
  EXPECT_EQ(Compare(r.db, to_float(db)), "");
}

TEST_P(ConvCaseTest, WorkspacesAreOrdered) {
  const ConvGeometry& g = GetParam().g;
  for (int op = 0; op < kNumConvOps; ++op) {
    const ConvOp o = static_cast<ConvOp>(op);
    SCOPED_TRACE(ConvOpName(o));
    EXPECT_EQ(FindConvAlgorithm("direct")->WorkspaceBytes(g, o), 0u);
    EXPECT_GE(FindConvAlgorithm("im2col_batch")->WorkspaceBytes(g, o),
              FindConvAlgorithm("im2col_chunk")->WorkspaceBytes(g, o));
    EXPECT_GE(FindConvAlgorithm("im2col_chunk")->WorkspaceBytes(g, o),
              FindConvAlgorithm("im2col_image")->WorkspaceBytes(g, o));
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvCaseTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Winograd's kernels exist for 3x3 kernels at stride 1 only, and only on
// processors with AVX-512 (oneDNN has none for AVX2), depthwise for one
// filter per channel only; every other algorithm computes every geometry.
// bfloat16 arithmetic needs AVX-512 BF16.
bool MustSupport(const ConvAlgorithm& a, const ConvGeometry& g) {
  if (a.name() == "depthwise") return g.groups == g.channels && g.filters == g.channels;
  if (a.name() == "dnnl_bf16") return Bf16Arithmetic();
  if (a.name() == "gemm_bf16") return Bf16Arithmetic() && g.groups == 1;
  if (a.name() != "dnnl_winograd") return true;
  if (!__builtin_cpu_supports("avx512f")) return false;
  return g.kernel == std::array<int64_t, 2>{3, 3} && g.stride == std::array<int64_t, 2>{1, 1} &&
         g.dilation == std::array<int64_t, 2>{1, 1} && g.groups == 1;
}

class ConvAlgorithmTest : public ::testing::TestWithParam<std::tuple<std::string, Case>> {
 protected:
  // Whether the test applies: the algorithm supports the geometry, as it must.
  bool Applies(const ConvAlgorithm& a, const ConvGeometry& g) {
    EXPECT_TRUE(a.Supports(g) || !MustSupport(a, g))
        << a.name() << " does not support this geometry";
    return a.Supports(g);
  }
};

TEST_P(ConvAlgorithmTest, MatchesReferenceDeterministicallyWithinWorkspace) {
  const ConvAlgorithm* a = FindConvAlgorithm(std::get<0>(GetParam()));
  ASSERT_NE(a, nullptr);
  const Problem p(std::get<1>(GetParam()).g);
  if (!Applies(*a, p.g)) return;
  const Results want = RunAll(Reference(), p);
  const Results got = RunAll(*a, p);
  const double tol = a->computes_16_bit() ? kBf16Tolerance : kTolerance;
  EXPECT_EQ(Compare(got.y_bias, want.y_bias, tol), "") << "forward with bias";
  EXPECT_EQ(Compare(got.y, want.y, tol), "") << "forward";
  EXPECT_EQ(Compare(got.dx, want.dx, tol), "") << "backward data";
  EXPECT_EQ(Compare(got.dx_accumulated, want.dx_accumulated, tol), "")
      << "backward data, accumulate";
  EXPECT_EQ(Compare(got.dw_db, want.dw_db, tol), "") << "backward filter with db";
  EXPECT_EQ(Compare(got.db, want.db), "") << "db (float32 sums of dy, in every algorithm)";
  EXPECT_EQ(Compare(got.dw, want.dw, tol), "") << "backward filter";
  EXPECT_TRUE(RunAll(*a, p) == got) << "a second run gave different bits";
}

// The filter and bias gradients computed over slices of the batch (the first
// slice overwrites, the later ones add; the bias sums carry in double), as a
// step run with memory.chunk computes them: within rounding of the float64
// loops for every algorithm, and bit for bit the whole batch's for
// im2col_image, whose reduction runs image by image.
TEST_P(ConvAlgorithmTest, SlicedFilterGradientMatchesDoubleReference) {
  const ConvAlgorithm* a = FindConvAlgorithm(std::get<0>(GetParam()));
  ASSERT_NE(a, nullptr);
  const Problem p(std::get<1>(GetParam()).g);
  if (!Applies(*a, p.g)) return;
  std::vector<double> dw(p.w.size()), db(p.bias.size());
  Naive{p.g}.ForEachTap([&](int64_t xi, int64_t wi, int64_t yi) {
    dw[wi] += static_cast<double>(p.dy[yi]) * p.x[xi];
  });
  for (size_t i = 0; i < p.dy.size(); ++i) db[i / p.g.out_plane() % p.g.filters] += p.dy[i];
  const Results whole = RunAll(*a, p);
  for (int64_t slice : {int64_t{1}, int64_t{2}}) {
    SCOPED_TRACE("slices of " + std::to_string(slice));
    std::vector<float> got_dw(p.w.size(), kNaN), got_db(p.bias.size(), kNaN);
    std::vector<double> sums(p.bias.size(), 0.0);
    for (int64_t begin = 0; begin < p.g.batch; begin += slice) {
      ConvGeometry g = p.g;
      g.batch = std::min(slice, p.g.batch - begin);
      ASSERT_TRUE(a->Supports(g));
      GuardedBuffer workspace(a->WorkspaceBytes(g, ConvOp::kBackwardFilter));
      a->BackwardFilter(g, p.x.data() + begin * g.channels * g.in_plane(),
                        p.dy.data() + begin * g.filters * g.out_plane(), got_dw.data(),
                        got_db.data(), begin > 0, sums.data(), workspace.Fresh());
    }
    EXPECT_EQ(Compare(got_dw, std::vector<float>(dw.begin(), dw.end()),
                      a->computes_16_bit() ? kBf16Tolerance : kTolerance),
              "")
        << "dw";
    EXPECT_EQ(Compare(got_db, std::vector<float>(db.begin(), db.end())), "") << "db";
    EXPECT_EQ(std::memcmp(got_db.data(), whole.db.data(), got_db.size() * sizeof(float)), 0)
        << "the carried double sums give the whole batch's bias gradient";
    if (a->name() == "im2col_image") {
      EXPECT_EQ(std::memcmp(got_dw.data(), whole.dw_db.data(), got_dw.size() * sizeof(float)), 0)
          << "image by image: the whole batch's bits";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ConvAlgorithmTest,
                         ::testing::Combine(::testing::ValuesIn(AlgorithmNames()),
                                            ::testing::ValuesIn(Cases())),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, Case>>& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param).name;
                         });

}  // namespace
}  // namespace cpu
}  // namespace spill
