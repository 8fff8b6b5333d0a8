// Conversions between float32 and the 16-bit storage types (DType in
// tensor.h), on the host.
//
// Narrowing rounds to nearest, ties to even, as the GPU's conversions
// (__float2bfloat16_rn, __float2half_rn) do, so a tensor converted on either
// device has the same bits (NaN payloads aside). Everything here is integer
// arithmetic on the bit patterns, in portable C++ (no intrinsics), apart from
// one exact product of normal floats: nothing depends on the CPU's features
// or on the flush-to-zero and denormals-are-zero modes, so results are
// identical on every x86-64 machine. The helpers are branch-free, so that
// loops over them vectorize.
#ifndef SPILL_FRAMEWORK_DEVICE_CONVERT_H_
#define SPILL_FRAMEWORK_DEVICE_CONVERT_H_

#include <cstdint>
#include <cstring>

#include "framework/device/tensor.h"

namespace spill {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// bfloat16 is the upper half of a float32: rounding adds just under half of
// the dropped part (0x7FFF), plus one when the kept part is odd, so that an
// exact half carries only from an odd value - ties to even. A carry out of
// the fraction bumps the exponent, up to infinity past the largest finite
// value. NaN is kept apart (the carry could turn it into infinity) and made
// quiet; float32's subnormals round like normal numbers.
inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t u = FloatBits(f);
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x0040u : rounded);
}

inline float Bf16BitsToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

// float32 -> IEEE binary16, rounded to nearest even.
//   normal      |f| >= 2^-14: rebias the exponent (127 -> 15) and round the
//               13 dropped fraction bits as for bfloat16; a carry may reach
//               the next binade, or infinity (from 65520 on, the midpoint
//               between 65504 and the next value binary16 lacks).
//   overflow    |f| >= 65520, and infinity: infinity.
//   subnormal   |f| < 2^-14: the result is |f| / 2^-24 rounded to an
//               integer: the float's 24-bit significand shifted right by
//               126 - exponent (at most 31: smaller values are 0, as are
//               float32 subnormals), rounded as above: add just under half
//               of what is shifted out, plus the lowest kept bit. A carry to
//               0x400 is the smallest normal, correctly encoded.
//   NaN         quiet NaN keeping the payload's upper bits.
inline uint16_t FloatToHalfBits(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;

  const uint32_t rebiased = a - 0x38000000u;  // (127 - 15) << 23
  const uint32_t normal = (rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13;

  const uint32_t exponent = a >> 23;
  // Only used when exponent <= 112, so 14 or more; kept within [14, 31]
  // for the others too (126 - exponent wraps above 126, and a shift by 32
  // or more is undefined even where its result is not selected).
  uint32_t shift = 126u - exponent;
  shift = shift > 31u ? 31u : shift;
  shift = shift < 14u ? 14u : shift;
  const uint32_t significand = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t subnormal =
      (significand + (1u << (shift - 1u)) - 1u + ((significand >> shift) & 1u)) >> shift;

  const uint32_t nan = 0x7E00u | ((a >> 13) & 0x3FFu);
  uint32_t bits = a < 0x38800000u ? subnormal : normal;
  bits = a >= 0x477FF000u ? 0x7C00u : bits;
  bits = a > 0x7F800000u ? nan : bits;
  return static_cast<uint16_t>(sign | bits);
}

// IEEE binary16 -> float32, exactly. Normal numbers rebias the exponent;
// subnormals (and zero) are their fraction times 2^-24, a product of an
// integer below 1024 and a power of two that float32 holds exactly in normal
// numbers (so no denormal mode touches it); infinity stays infinite and NaN
// stays NaN, made quiet, with its payload.
inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t fraction = h & 0x3FFu;
  const uint32_t normal = ((exponent + 112u) << 23) | (fraction << 13);
  const uint32_t special = 0x7F800000u | (fraction << 13) | (fraction != 0 ? 0x400000u : 0u);
  const uint32_t subnormal = FloatBits(static_cast<float>(static_cast<int32_t>(fraction)) *
                                       BitsFloat(0x33800000u));  // 2^-24
  // Masks rather than selects: with selects the compiler computes the
  // product only where it is used, and a branch around a float operation
  // does not vectorize.
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(exponent == 0);
  const uint32_t is_special = 0u - static_cast<uint32_t>(exponent == 0x1Fu);
  const uint32_t is_normal = ~(is_subnormal | is_special);
  const uint32_t bits = (subnormal & is_subnormal) | (special & is_special) | (normal & is_normal);
  return BitsFloat(sign | bits);
}

// Rounds `count` floats to `to` (round to nearest, ties to even). NaN stays
// NaN (quiet), +-inf stays +-inf; fp16: values beyond the largest finite fp16
// (65504, after rounding) become +-inf, and fp16 subnormals are produced
// exactly (gradual underflow, RNE); bf16 keeps float32's subnormals' upper
// bits (RNE as for normals). `to` == kF32 copies.
void ConvertFromFloat(const float* src, void* dst, DType to, int64_t count);
// Widens `count` elements of `from` to float (exact, including fp16
// subnormals, inf and NaN). `from` == kF32 copies.
void ConvertToFloat(const void* src, DType from, float* dst, int64_t count);
// Either of the above, or a plain copy when from == to; one of `from`, `to`
// must be kF32 or both equal. The buffers must not overlap.
void Convert(const void* src, DType from, void* dst, DType to, int64_t count);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_CONVERT_H_
