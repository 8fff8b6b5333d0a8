// Two small programs for the test of tools/ci/check_isa.py, both built for
// x86-64-v3: without ISA_FIXTURE_AVX512 one function uses AVX2 and FMA only
// (VEX-encoded ymm instructions, which must pass); with it, the function
// uses AVX-512 - zmm registers, and an EVEX-only instruction on ymm
// registers, which must both be found. Only disassembled, never run.
#include <immintrin.h>

#include <cstdio>

#ifdef ISA_FIXTURE_AVX512
__attribute__((target("avx512f,avx512vl"), noinline)) float Mix(const float* x) {
  const __m512 wide = _mm512_loadu_ps(x);
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i mixed = _mm256_ternarylogic_epi32(bits, bits, bits, 0x96);
  return _mm512_reduce_add_ps(wide) + static_cast<float>(_mm256_extract_epi32(mixed, 0));
}
#else
__attribute__((noinline)) float Mix(const float* x) {
  const __m256 a = _mm256_loadu_ps(x);
  const __m256 b = _mm256_fmadd_ps(a, a, a);
  float out[8];
  _mm256_storeu_ps(out, b);
  return out[0] + out[7];
}
#endif

int main(int argc, char**) {
  float x[16];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i * argc);
  std::printf("%f\n", Mix(x));
  return 0;
}
