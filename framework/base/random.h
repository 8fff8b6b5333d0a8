// Counter-based random numbers. A value depends only on (seed, index), so
// streams can be split across threads, regenerated after recomputation, and
// reproduced after resuming from a checkpoint without carrying generator
// state around.
#ifndef SPILL_FRAMEWORK_BASE_RANDOM_H_
#define SPILL_FRAMEWORK_BASE_RANDOM_H_

#include <cmath>
#include <cstdint>
#include <string>

namespace spill {

// SplitMix64 finalizer: a high-quality 64-bit mix.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Derives an independent seed for a sub-stream.
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) { return Mix64(seed ^ Mix64(stream + 1)); }

inline uint64_t HashString(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return Mix64(h);
}

// Uniform in [0, 1) with 24 bits, from (seed, index).
inline float UniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(Mix64(seed ^ Mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal from (seed, index), by Box-Muller on two uniforms.
inline double NormalAt(uint64_t seed, uint64_t index) {
  uint64_t bits = Mix64(seed ^ Mix64(index));
  double u1 = (static_cast<double>(bits >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = static_cast<double>(Mix64(bits) >> 11) * (1.0 / 9007199254740992.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_RANDOM_H_
