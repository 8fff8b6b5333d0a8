#include "framework/device/convert.h"

#include <algorithm>
#include <cstring>

#include "framework/base/check.h"

namespace spill {
namespace {

// Below this many elements one thread converts: starting a parallel region
// costs more than converting 64K elements. Above it, threads take chunks
// large enough to amortise scheduling and small enough to balance the cores.
constexpr int64_t kParallelElements = int64_t{1} << 16;
constexpr int64_t kChunkElements = int64_t{1} << 14;

// The element loops. Each body is a branch-free helper from convert.h, so the
// compiler vectorizes them with whatever vector width the build targets; the
// results do not depend on it (integer arithmetic, and one exact float
// product).
void FloatToBf16(const float* src, uint16_t* dst, int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) dst[i] = FloatToBf16Bits(src[i]);
}

void FloatToHalf(const float* src, uint16_t* dst, int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) dst[i] = FloatToHalfBits(src[i]);
}

void Bf16ToFloat(const uint16_t* src, float* dst, int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) dst[i] = Bf16BitsToFloat(src[i]);
}

void HalfToFloat(const uint16_t* src, float* dst, int64_t count) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) dst[i] = HalfBitsToFloat(src[i]);
}

// Runs `loop(src + begin, dst + begin, n)` over [0, count), in parallel
// chunks when the count is large. Elements are independent, so any split
// gives the same bytes.
template <typename In, typename Out>
void RunChunked(void (*loop)(const In*, Out*, int64_t), const In* src, Out* dst, int64_t count) {
  if (count < kParallelElements) {
    loop(src, dst, count);
    return;
  }
  const int64_t chunks = (count + kChunkElements - 1) / kChunkElements;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunkElements;
    loop(src + begin, dst + begin, std::min(kChunkElements, count - begin));
  }
}

}  // namespace

void ConvertFromFloat(const float* src, void* dst, DType to, int64_t count) {
  if (count <= 0) return;
  switch (to) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case DType::kBF16:
      RunChunked(FloatToBf16, src, static_cast<uint16_t*>(dst), count);
      return;
    case DType::kF16:
      RunChunked(FloatToHalf, src, static_cast<uint16_t*>(dst), count);
      return;
  }
  SPILL_CHECK(false) << "unknown dtype " << static_cast<int>(to);
}

void ConvertToFloat(const void* src, DType from, float* dst, int64_t count) {
  if (count <= 0) return;
  switch (from) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case DType::kBF16:
      RunChunked(Bf16ToFloat, static_cast<const uint16_t*>(src), dst, count);
      return;
    case DType::kF16:
      RunChunked(HalfToFloat, static_cast<const uint16_t*>(src), dst, count);
      return;
  }
  SPILL_CHECK(false) << "unknown dtype " << static_cast<int>(from);
}

void Convert(const void* src, DType from, void* dst, DType to, int64_t count) {
  if (from == to) {
    if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count) * DTypeSize(from));
  } else if (from == DType::kF32) {
    ConvertFromFloat(static_cast<const float*>(src), dst, to, count);
  } else {
    // Between the two 16-bit types would round twice; nothing needs it.
    SPILL_CHECK(to == DType::kF32) << "no conversion from " << DTypeName(from) << " to "
                                   << DTypeName(to) << " (one side must be fp32)";
    ConvertToFloat(src, from, static_cast<float*>(dst), count);
  }
}

}  // namespace spill
