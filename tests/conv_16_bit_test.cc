// Convolutions on tensors stored in 16 bits (layers/cpu/conv_layouts.h). The
// float32 algorithms compute on widened copies in their workspace and round
// their results as the executor rounds (framework/graph/conversions.h):
// their bits are those of float32 tensors holding the same values, rounded.
// dnnl_bf16 and gemm_bf16 take the 16-bit tensors as they are and compute
// in bfloat16 arithmetic: within bfloat16 rounding of float32.
// oneDNN's bf16 matrix product (layers/cpu/matmul_dnnl.h) is checked here too.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "framework/base/random.h"
#include "framework/device/convert.h"
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/conv_layouts.h"
#include "layers/cpu/matmul_dnnl.h"

namespace spill {
namespace cpu {
namespace {

struct Case {
  const char* name;
  ConvGeometry g;
};

// Whether the processor has AMX tiles for bfloat16 (Linux: /proc/cpuinfo).
bool HasAmx() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string word;
  while (cpuinfo >> word) {
    if (word == "amx_bf16") return true;
  }
  return false;
}

ConvGeometry Geometry(int64_t c, int64_t hw, int64_t f, int64_t k, int64_t stride, Layout layout) {
  ConvGeometry g;
  g.batch = 3;
  g.channels = c;
  g.height = g.width = hw;
  g.filters = f;
  g.kernel = {k, k};
  g.stride = {stride, stride};
  g.pad = {k / 2, k / 2};
  g.dilation = {1, 1};
  g.out_height = g.out_width = (hw + 2 * (k / 2) - k) / stride + 1;
  g.input_layout = g.output_layout = layout;
  return g;
}

ConvGeometry Grouped(ConvGeometry g, int64_t groups) {
  g.groups = groups;
  return g;
}

std::vector<Case> Cases() {
  return {{"plain_3x3", Geometry(32, 8, 32, 3, 1, Layout::kPlain)},
          {"blocked_3x3", Geometry(32, 8, 32, 3, 1, Layout::kBlocked16)},
          {"blocked_3x3_stride2", Geometry(16, 9, 32, 3, 2, Layout::kBlocked16)},
          {"channels_last_3x3", Geometry(32, 8, 32, 3, 1, Layout::kChannelsLast)},
          {"channels_last_1x1_stride2", Geometry(32, 9, 48, 1, 2, Layout::kChannelsLast)},
          {"plain_1x1", Geometry(32, 6, 48, 1, 1, Layout::kPlain)},
          {"narrow_plain_3x3", Geometry(3, 7, 8, 3, 1, Layout::kPlain)},
          // Groups narrower than a 16-channel block, on a 1x1 image.
          {"grouped_3x3_stride2_1x1_image", Grouped(Geometry(24, 1, 24, 3, 2, Layout::kPlain), 3)}};
}

ConvGeometry WithDtypes(ConvGeometry g, DType input, DType output) {
  g.input_dtype = input;
  g.output_dtype = output;
  return g;
}

// One tensor's values, stored in 16 bits and as the float32 they widen to.
struct Values {
  Values(int64_t n, uint64_t seed) : half(n), wide(n) {
    for (int64_t i = 0; i < n; ++i) {
      half[i] = FloatToBf16Bits(2 * UniformAt(seed, i) - 1);
      wide[i] = Bf16BitsToFloat(half[i]);
    }
  }
  std::vector<uint16_t> half;
  std::vector<float> wide;
};

struct Operands {
  explicit Operands(const ConvGeometry& g)
      : x(g.batch * g.channels * g.in_plane(), 1),
        dy(g.batch * g.filters * g.out_plane(), 2),
        dx_before(x.wide.size(), 3),
        w(g.filters * g.col_rows()),
        bias(g.filters) {
    for (size_t i = 0; i < w.size(); ++i) w[i] = UniformAt(4, i) - 0.5f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = UniformAt(5, i) - 0.5f;
  }
  Values x, dy, dx_before;
  std::vector<float> w, bias;
};

// What one algorithm computes: y (with the bias), dx (added into
// dx_before), dw and db, each widened to float32.
struct Results {
  std::vector<float> y, dx, dw, db;
};

template <typename T>
std::vector<float> Widen(const std::vector<T>& v, DType dtype) {
  std::vector<float> out(v.size() * sizeof(T) / DTypeSize(dtype));
  ConvertToFloat(v.data(), dtype, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

// Runs `a` on `g`'s dtypes: 16-bit operands from `o.*.half`, float32 ones
// from `o.*.wide`, each op with exactly its declared workspace, whose bytes
// all hold `fill` before the call.
Results RunAll(const ConvAlgorithm& a, const ConvGeometry& g, const Operands& o, char fill = 0) {
  auto pick = [](const Values& v, DType dtype) {
    return dtype == DType::kF32 ? static_cast<const void*>(v.wide.data())
                                : static_cast<const void*>(v.half.data());
  };
  std::vector<char> y(o.dy.wide.size() * DTypeSize(g.output_dtype));
  std::vector<char> dx(o.x.wide.size() * DTypeSize(g.input_dtype));
  std::memcpy(dx.data(), pick(o.dx_before, g.input_dtype), dx.size());
  Results r;
  r.dw.assign(o.w.size(), 0);
  r.db.assign(o.bias.size(), 0);
  for (ConvOp op : {ConvOp::kForward, ConvOp::kBackwardData, ConvOp::kBackwardFilter}) {
    std::vector<char> workspace(ConvWorkspaceBytes(a, g, op), fill);
    switch (op) {
      case ConvOp::kForward:
        ConvForward(a, g, pick(o.x, g.input_dtype), o.w.data(), o.bias.data(), y.data(),
                    workspace.data());
        break;
      case ConvOp::kBackwardData:
        ConvBackwardData(a, g, pick(o.dy, g.output_dtype), o.w.data(), dx.data(), true,
                         workspace.data());
        break;
      case ConvOp::kBackwardFilter:
        ConvBackwardFilter(a, g, pick(o.x, g.input_dtype), pick(o.dy, g.output_dtype), r.dw.data(),
                           r.db.data(), false, nullptr, workspace.data());
        break;
    }
  }
  r.y = Widen(y, g.output_dtype);
  r.dx = Widen(dx, g.input_dtype);
  return r;
}

// `got` within `relative` x the largest magnitude of `want` of it.
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double relative,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 1e-3;
  for (float v : want) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), relative * largest)
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

class Conv16BitTest : public ::testing::TestWithParam<Case> {};

// The bits of float32 tensors holding the same values, rounded to 16 bits
// where they are stored in 16 bits; the copies cost workspace, unless the
// operands were copied anyway (blocked ones, for a plain algorithm).
TEST_P(Conv16BitTest, Float32AlgorithmsRoundTheirFloat32Results) {
  const ConvGeometry g32 = GetParam().g;
  const ConvGeometry g16 = WithDtypes(g32, DType::kBF16, DType::kBF16);
  const Operands o(g32);
  for (const char* name : {"im2col_image", "direct", "dnnl"}) {
    SCOPED_TRACE(name);
    const ConvAlgorithm* a = FindConvAlgorithm(name);
    ASSERT_NE(a, nullptr);
    if (!a->Supports(g32)) continue;
    const Results wide = RunAll(*a, g32, o), half = RunAll(*a, g16, o);
    for (size_t i = 0; i < wide.y.size(); ++i) {
      ASSERT_EQ(FloatBits(half.y[i]), FloatBits(Bf16BitsToFloat(FloatToBf16Bits(wide.y[i])))) << i;
    }
    for (size_t i = 0; i < wide.dx.size(); ++i) {
      ASSERT_EQ(FloatBits(half.dx[i]), FloatBits(Bf16BitsToFloat(FloatToBf16Bits(wide.dx[i]))))
          << i;
    }
    EXPECT_EQ(std::memcmp(half.dw.data(), wide.dw.data(), wide.dw.size() * 4), 0);
    EXPECT_EQ(std::memcmp(half.db.data(), wide.db.data(), wide.db.size() * 4), 0);
    // Blocked and channels-last operands of plain algorithms are copied
    // either way: the copy widens as it moves.
    const bool copied_anyway = g32.input_layout != Layout::kPlain && !a->computes_blocked();
    for (ConvOp op : {ConvOp::kForward, ConvOp::kBackwardData, ConvOp::kBackwardFilter}) {
      if (copied_anyway) {
        EXPECT_EQ(ConvWorkspaceBytes(*a, g16, op), ConvWorkspaceBytes(*a, g32, op));
      } else {
        EXPECT_GT(ConvWorkspaceBytes(*a, g16, op), ConvWorkspaceBytes(*a, g32, op));
      }
    }
  }
}

// bfloat16 arithmetic (dnnl_bf16, gemm_bf16) agrees with float32's within
// its rounding, on 16-bit tensors and on a float32 input (the image a
// network's first convolution reads); it is deterministic, and dnnl_bf16
// needs no float32 copies of the activations.
TEST_P(Conv16BitTest, Bf16ArithmeticAgreesWithinItsRounding) {
  const ConvGeometry g32 = GetParam().g;
  for (const char* name : {"dnnl_bf16", "gemm_bf16"}) {
    SCOPED_TRACE(name);
    const ConvAlgorithm* bf16 = FindConvAlgorithm(name);
    ASSERT_NE(bf16, nullptr);
    if (!Bf16Arithmetic()) {
      EXPECT_FALSE(bf16->Supports(g32)) << "offered without bfloat16 instructions";
      continue;
    }
    if (g32.groups != 1 && std::string(name) == "gemm_bf16") {
      EXPECT_FALSE(bf16->Supports(g32)) << "groups are dnnl_bf16's";
      continue;
    }
    const Operands o(g32);
    const Results want = RunAll(*FindConvAlgorithm("im2col_image"), g32, o);
    for (DType input : {DType::kBF16, DType::kF32}) {
      SCOPED_TRACE(DTypeName(input));
      const ConvGeometry g = WithDtypes(g32, input, DType::kBF16);
      ASSERT_TRUE(bf16->Supports(g));
      const Results got = RunAll(*bf16, g, o);
      ExpectNear(got.y, want.y, 2e-2, "forward");
      ExpectNear(got.dx, want.dx, 2e-2, "backward data, accumulated");
      ExpectNear(got.dw, want.dw, 2e-2, "backward filter");
      ExpectNear(got.db, want.db, 1e-6, "bias gradient (float32 sums)");
      // The same bits again, whatever the workspace held before.
      const Results again = RunAll(*bf16, g, o, 0x3f);
      ExpectNear(again.dw, want.dw, 2e-2, "backward filter, on a used workspace");
      EXPECT_EQ(std::memcmp(again.y.data(), got.y.data(), got.y.size() * 4), 0);
      EXPECT_EQ(std::memcmp(again.dx.data(), got.dx.data(), got.dx.size() * 4), 0);
      EXPECT_EQ(std::memcmp(again.dw.data(), got.dw.data(), got.dw.size() * 4), 0);
      EXPECT_EQ(std::memcmp(again.db.data(), got.db.data(), got.db.size() * 4), 0);
      // dnnl_bf16's forward and backward data need no float32 copies of
      // 16-bit tensors (the filter gradient's scratch is larger in bfloat16,
      // in float32 sums). On a processor with AMX, oneDNN's bfloat16 kernels
      // keep tile buffers in their scratch that outweigh the copies at these
      // small sizes.
      if (std::string(name) != "dnnl_bf16" || input == DType::kF32 || HasAmx()) continue;
      const ConvAlgorithm& dnnl = *FindConvAlgorithm("dnnl");
      for (ConvOp op : {ConvOp::kForward, ConvOp::kBackwardData}) {
        EXPECT_LT(ConvWorkspaceBytes(*bf16, g, op), ConvWorkspaceBytes(dnnl, g, op))
            << ConvOpName(op);
      }
    }
  }
  if (!Bf16Arithmetic()) GTEST_SKIP() << "this processor has no AVX-512 BF16";
}

INSTANTIATE_TEST_SUITE_P(Geometries, Conv16BitTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

// Only the 16-bit arithmetic takes 16-bit operands; float32 is everyone's.
TEST(Conv16BitTest, WhatEachAlgorithmTakes) {
  for (const ConvAlgorithm* a : ConvAlgorithms()) {
    EXPECT_TRUE(a->takes(DType::kF32)) << a->name();
    EXPECT_EQ(a->takes(DType::kBF16), a->computes_16_bit()) << a->name();
    EXPECT_FALSE(a->takes(DType::kF16)) << a->name();
    EXPECT_EQ(a->computes_16_bit(), a->name() == "dnnl_bf16" || a->name() == "gemm_bf16")
        << a->name();
  }
}

// oneDNN's bf16 matrix product (the "cpu" profile's bf16 rate): small
// integers are exact in bfloat16 and in their float32 sums, so the product
// is the float32 one to the bit.
TEST(MatmulBf16Test, MultipliesBfloat16Operands) {
  if (!Bf16Arithmetic()) GTEST_SKIP() << "this processor has no AVX-512 BF16";
  const int64_t m = 5, n = 7, k = 33;
  std::vector<float> a(m * k), b(k * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 7) - 3;
  for (int64_t i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 5) - 2;
  auto upper = [](const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i], sizeof(bits));
      out[i] = static_cast<uint16_t>(bits >> 16);  // exact: small integers
    }
    return out;
  };
  std::vector<float> c(m * n, -1);
  MatmulBf16(m, n, k, upper(a).data(), upper(b).data(), c.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[p * n + j];
      EXPECT_EQ(c[i * n + j], want) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace spill
