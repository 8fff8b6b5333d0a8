// The host's conversions between float32 and the 16-bit storage types
// (framework/device/convert.h), checked exhaustively where the domain is
// 16 bits wide and against references computed independently in double
// precision (std::nearbyint rounds ties to even) where it is 32 bits wide;
// and the CPU device's ConvertAsync on its inline and threaded queues.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "framework/device/convert.h"
#include "framework/device/cpu_device.h"

namespace spill {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

uint16_t Bf16(uint32_t float_bits) { return FloatToBf16Bits(BitsFloat(float_bits)); }
uint16_t Half(float f) { return FloatToHalfBits(f); }
bool IsNan16Half(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
bool IsNanBf16(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0; }

// The binary16 value of `h`, from its fields.
double HalfReference(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int fraction = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1F) {
    return fraction == 0 ? sign * HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// `x` rounded to nearest even with `fraction_bits` bits after the leading
// one, exponents no lower than `min_exponent` (below it, gradual underflow)
// and overflow to infinity above `max_finite` - computed in double, where
// every float and every such rounding is exact.
double RoundReference(float x, int fraction_bits, int min_exponent, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const double magnitude = std::fabs(static_cast<double>(x));
  const int exponent = std::max(static_cast<int>(std::floor(std::log2(magnitude))), min_exponent);
  const double ulp = std::ldexp(1.0, exponent - fraction_bits);
  double rounded = std::nearbyint(magnitude / ulp) * ulp;
  if (rounded > max_finite) rounded = HUGE_VAL;
  return std::copysign(rounded, static_cast<double>(x));
}

// Compares including the sign of zero.
void ExpectSameDouble(double expected, double actual, uint32_t input) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << std::hex << "input 0x" << input;
    return;
  }
  EXPECT_EQ(expected, actual) << std::hex << "input 0x" << input;
  EXPECT_EQ(std::signbit(expected), std::signbit(actual)) << std::hex << "input 0x" << input;
}

// ---------------------------------------------------------------------------
// bfloat16

TEST(Bf16Test, EveryPatternWidensToTheFloatWithThoseUpperBits) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(65536);
  ConvertToFloat(all.data(), DType::kBF16, wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(FloatBits(Bf16BitsToFloat(static_cast<uint16_t>(h))), h << 16) << std::hex << h;
    ASSERT_EQ(FloatBits(wide[h]), h << 16) << std::hex << h;
  }
}

TEST(Bf16Test, RoundTripIsTheIdentityOnEveryNonNanValue) {
  std::vector<float> wide;
  std::vector<uint16_t> expected;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (IsNanBf16(static_cast<uint16_t>(h))) continue;
    wide.push_back(BitsFloat(h << 16));
    expected.push_back(static_cast<uint16_t>(h));
  }
  std::vector<uint16_t> narrow(wide.size());
  ConvertFromFloat(wide.data(), narrow.data(), DType::kBF16, wide.size());
  EXPECT_EQ(narrow, expected);
}

TEST(Bf16Test, TiesGoToEvenAndNeighboursOfTiesToTheNearer) {
  EXPECT_EQ(Bf16(0x3F808000), 0x3F80);  // 1 + 2^-8: tie, 0x3F80 even
  EXPECT_EQ(Bf16(0x3F818000), 0x3F82);  // tie, 0x3F81 odd
  EXPECT_EQ(Bf16(0x3F807FFF), 0x3F80);
  EXPECT_EQ(Bf16(0x3F808001), 0x3F81);
  EXPECT_EQ(Bf16(0x3F817FFF), 0x3F81);
  EXPECT_EQ(Bf16(0x3F818001), 0x3F82);
  EXPECT_EQ(Bf16(0xBF808000), 0xBF80);
  EXPECT_EQ(Bf16(0xBF818000), 0xBF82);
  // Every midpoint between finite neighbours, and the floats either side.
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7F80) == 0x7F80) continue;  // infinity and NaN have no upper neighbour
    const uint32_t tie = (h << 16) | 0x8000;
    const uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(Bf16(tie), even) << std::hex << tie;
    ASSERT_EQ(Bf16(tie - 1), h) << std::hex << tie - 1;
    ASSERT_EQ(Bf16(tie + 1), h + 1) << std::hex << tie + 1;
  }
}

TEST(Bf16Test, SpecialValues) {
  EXPECT_EQ(FloatToBf16Bits(kInf), 0x7F80);
  EXPECT_EQ(FloatToBf16Bits(-kInf), 0xFF80);
  EXPECT_EQ(FloatToBf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16Bits(0.0f), 0x0000);
  // NaNs stay NaN (and quiet), even those whose payload lies only in the
  // dropped bits or that would carry into the sign.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7F80FFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0xFF800001u,
                       0xFFC00000u}) {
    const uint16_t h = Bf16(nan);
    EXPECT_TRUE(IsNanBf16(h)) << std::hex << nan << " -> " << h;
    EXPECT_TRUE(h & 0x0040) << std::hex << nan << " -> " << h;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
  // Near FLT_MAX (0x7F7FFFFF): above the midpoint between 0x7F7F and the
  // value after it, and at it (0x7F7F is odd), rounding overflows to infinity.
  EXPECT_EQ(FloatToBf16Bits(FLT_MAX), 0x7F80);
  EXPECT_EQ(FloatToBf16Bits(-FLT_MAX), 0xFF80);
  EXPECT_EQ(Bf16(0x7F7F8000), 0x7F80);
  EXPECT_EQ(Bf16(0x7F7F7FFF), 0x7F7F);
  // float32 subnormals keep their upper bits, rounded as normals are.
  EXPECT_EQ(Bf16(0x00000001), 0x0000);
  EXPECT_EQ(Bf16(0x00018000), 0x0002);
  EXPECT_EQ(Bf16(0x007FFFFF), 0x0080);  // rounds up into the smallest normal
  EXPECT_EQ(Bf16(0x80010000), 0x8001);
}

TEST(Bf16Test, RandomFloatsRoundAsTheReferenceSays) {
  std::mt19937 random(7);
  for (int i = 0; i < 1 << 21; ++i) {
    const uint32_t bits = random();
    const float x = BitsFloat(bits);
    const double expected = RoundReference(x, 7, -126, BitsFloat(0x7F7F0000));
    ExpectSameDouble(expected, Bf16BitsToFloat(FloatToBf16Bits(x)), bits);
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// IEEE binary16

TEST(HalfTest, EveryPatternWidensExactly) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(65536);
  ConvertToFloat(all.data(), DType::kF16, wide.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const double expected = HalfReference(half);
    ExpectSameDouble(expected, HalfBitsToFloat(half), h);
    ExpectSameDouble(expected, wide[h], h);
    if (IsNan16Half(half)) {
      EXPECT_EQ(std::signbit(wide[h]), (h & 0x8000) != 0) << std::hex << h;
    }
    if (HasFailure()) return;
  }
  EXPECT_EQ(HalfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfBitsToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfBitsToFloat(0x7C00), kInf);
  EXPECT_EQ(HalfBitsToFloat(0xFC00), -kInf);
}

TEST(HalfTest, EveryNonNanPatternNarrowsBackToItself) {
  std::vector<float> wide;
  std::vector<uint16_t> expected;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (IsNan16Half(static_cast<uint16_t>(h))) continue;
    wide.push_back(HalfBitsToFloat(static_cast<uint16_t>(h)));
    expected.push_back(static_cast<uint16_t>(h));
  }
  std::vector<uint16_t> narrow(wide.size());
  ConvertFromFloat(wide.data(), narrow.data(), DType::kF16, wide.size());
  EXPECT_EQ(narrow, expected);
}

TEST(HalfTest, MidpointsGoToTheEvenNeighbourAndTheirNeighboursToTheNearer) {
  for (uint32_t h = 0; h < 0x7BFF; ++h) {  // finite, with a finite successor
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t low = static_cast<uint16_t>(h | sign);
      const uint16_t high = static_cast<uint16_t>((h + 1) | sign);
      // The midpoint needs 12 significant bits: exact in float.
      const float mid = static_cast<float>((HalfReference(low) + HalfReference(high)) / 2);
      const uint16_t even = (h & 1) ? high : low;
      const float toward_zero = std::nextafter(mid, 0.0f);
      const float away = std::nextafter(mid, sign ? -kInf : kInf);
      ASSERT_EQ(Half(mid), even) << std::hex << low;
      ASSERT_EQ(Half(toward_zero), low) << std::hex << low;
      ASSERT_EQ(Half(away), high) << std::hex << low;
    }
  }
}

TEST(HalfTest, Overflow) {
  EXPECT_EQ(Half(65504.0f), 0x7BFF);
  EXPECT_EQ(Half(65519.0f), 0x7BFF);
  EXPECT_EQ(Half(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(Half(65520.0f), 0x7C00);  // the midpoint to the next, nonexistent value
  EXPECT_EQ(Half(-65520.0f), 0xFC00);
  EXPECT_EQ(Half(65536.0f), 0x7C00);
  EXPECT_EQ(Half(1e10f), 0x7C00);
  EXPECT_EQ(Half(FLT_MAX), 0x7C00);
  EXPECT_EQ(Half(-FLT_MAX), 0xFC00);
  EXPECT_EQ(Half(kInf), 0x7C00);
  EXPECT_EQ(Half(-kInf), 0xFC00);
}

TEST(HalfTest, GradualUnderflow) {
  const float smallest = std::ldexp(1.0f, -24);
  EXPECT_EQ(Half(smallest), 0x0001);
  EXPECT_EQ(Half(smallest / 2), 0x0000);  // tie between 0 and 2^-24: to even, 0
  EXPECT_EQ(Half(-smallest / 2), 0x8000);
  EXPECT_EQ(Half(std::nextafter(smallest / 2, 1.0f)), 0x0001);
  EXPECT_EQ(Half(0.75f * smallest), 0x0001);
  EXPECT_EQ(Half(0.25f * smallest), 0x0000);
  EXPECT_EQ(Half(1.5f * smallest), 0x0002);     // tie, to even
  EXPECT_EQ(Half(2.5f * smallest), 0x0002);     // tie, to even
  EXPECT_EQ(Half(1023.5f * smallest), 0x0400);  // the largest subnormal's tie: smallest normal
  EXPECT_EQ(Half(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(Half(-0.0f), 0x8000);
  EXPECT_EQ(Half(0.0f), 0x0000);
  EXPECT_EQ(Half(BitsFloat(0x00000001)), 0x0000);  // float32 subnormals vanish
  EXPECT_EQ(Half(BitsFloat(0x807FFFFF)), 0x8000);
}

TEST(HalfTest, NanStaysNan) {
  for (uint32_t nan :
       {0x7FC00000u, 0x7F800001u, 0x7F801FFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0xFF800001u}) {
    const uint16_t h = Half(BitsFloat(nan));
    EXPECT_TRUE(IsNan16Half(h)) << std::hex << nan << " -> " << h;
    EXPECT_TRUE(h & 0x0200) << std::hex << nan << " -> " << h;  // quiet
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(0x7C01)));  // a signalling NaN widens to a NaN
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(0xFE00)));
}

TEST(HalfTest, RandomFloatsRoundAsTheReferenceSays) {
  std::mt19937 random(11);
  for (int i = 0; i < 1 << 21; ++i) {
    uint32_t bits = random();
    // Half of them with exponents around binary16's range (2^-26 .. 2^17),
    // where all the interesting cases are.
    if (i & 1) bits = (bits & 0x807FFFFFu) | ((101u + (bits >> 23) % 44u) << 23);
    const float x = BitsFloat(bits);
    const double expected = RoundReference(x, 10, -14, 65504.0);
    ExpectSameDouble(expected, HalfBitsToFloat(FloatToHalfBits(x)), bits);
    if (HasFailure()) return;
  }
}

// ---------------------------------------------------------------------------
// Arrays: the parallel path gives what the element helpers give.

std::vector<float> RandomFloats(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits = random();
    // Mostly values of ordinary size, with every kind of bit pattern mixed in.
    if (i % 4 != 0) bits = (bits & 0x807FFFFFu) | ((100u + (bits >> 23) % 50u) << 23);
    values[i] = BitsFloat(bits);
  }
  return values;
}

TEST(ConvertTest, LargeArraysMatchTheElementHelpers) {
  // Several million elements, not a whole number of chunks: the OpenMP path.
  constexpr int64_t kCount = (int64_t{5} << 20) + 3;
  const std::vector<float> src = RandomFloats(kCount, 3);
  std::vector<uint16_t> bf16(kCount), half(kCount);
  Convert(src.data(), DType::kF32, bf16.data(), DType::kBF16, kCount);
  ConvertFromFloat(src.data(), half.data(), DType::kF16, kCount);
  std::vector<float> from_bf16(kCount), from_half(kCount);
  Convert(bf16.data(), DType::kBF16, from_bf16.data(), DType::kF32, kCount);
  ConvertToFloat(half.data(), DType::kF16, from_half.data(), kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(bf16[i], FloatToBf16Bits(src[i])) << i;
    ASSERT_EQ(half[i], FloatToHalfBits(src[i])) << i;
    ASSERT_EQ(FloatBits(from_bf16[i]), FloatBits(Bf16BitsToFloat(bf16[i]))) << i;
    ASSERT_EQ(FloatBits(from_half[i]), FloatBits(HalfBitsToFloat(half[i]))) << i;
  }
}

TEST(ConvertTest, SameTypeCopies) {
  const std::vector<float> src = RandomFloats(1000, 5);
  std::vector<float> dst(1000);
  Convert(src.data(), DType::kF32, dst.data(), DType::kF32, 1000);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), 1000 * sizeof(float)), 0);
  std::vector<uint16_t> half(1000), copy(1000);
  ConvertFromFloat(src.data(), half.data(), DType::kF16, 1000);
  Convert(half.data(), DType::kF16, copy.data(), DType::kF16, 1000);
  EXPECT_EQ(half, copy);
}

// ---------------------------------------------------------------------------
// CpuDevice::ConvertAsync

TEST(CpuDeviceConvertTest, ComputeAndCopyQueuesGiveConvertsBytes) {
  constexpr int64_t kCount = (int64_t{1} << 18) + 5;
  const std::vector<float> src = RandomFloats(kCount, 9);
  CpuDevice device;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<uint16_t> expected(kCount);
    Convert(src.data(), DType::kF32, expected.data(), dtype, kCount);
    std::vector<float> expected_wide(kCount);
    Convert(expected.data(), dtype, expected_wide.data(), DType::kF32, kCount);

    std::vector<uint16_t> narrow(kCount);
    std::vector<float> wide(kCount);
    device.ConvertAsync(narrow.data(), dtype, src.data(), DType::kF32, kCount,
                        device.compute_queue());
    device.ConvertAsync(wide.data(), DType::kF32, narrow.data(), dtype, kCount,
                        device.compute_queue());
    EXPECT_EQ(narrow, expected);
    EXPECT_EQ(std::memcmp(wide.data(), expected_wide.data(), kCount * sizeof(float)), 0);

    // On a copy queue, in order: a copy in, the narrowing, the widening.
    Queue& queue = device.host_to_device_queue();
    std::vector<float> staged(kCount);
    std::vector<uint16_t> narrow_async(kCount);
    std::vector<float> wide_async(kCount);
    device.CopyAsync(staged.data(), src.data(), kCount * sizeof(float), CopyKind::kHostToDevice,
                     queue);
    device.ConvertAsync(narrow_async.data(), dtype, staged.data(), DType::kF32, kCount, queue);
    device.ConvertAsync(wide_async.data(), DType::kF32, narrow_async.data(), dtype, kCount, queue);
    queue.Synchronize();
    EXPECT_EQ(narrow_async, expected);
    EXPECT_EQ(std::memcmp(wide_async.data(), expected_wide.data(), kCount * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace spill
