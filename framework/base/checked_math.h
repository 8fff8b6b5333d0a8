// Overflow-checked integer arithmetic for sizes that come from user input
// (shapes, repeat counts, byte sizes, expression results). Every function
// returns false instead of wrapping, so callers can turn an overflow into an
// error that names the field rather than computing with a wrapped value.
#ifndef SPILL_FRAMEWORK_BASE_CHECKED_MATH_H_
#define SPILL_FRAMEWORK_BASE_CHECKED_MATH_H_

#include <cstdint>
#include <initializer_list>

namespace spill {

template <typename T>
bool CheckedAdd(T a, T b, T* out) {
  return !__builtin_add_overflow(a, b, out);
}

template <typename T>
bool CheckedSub(T a, T b, T* out) {
  return !__builtin_sub_overflow(a, b, out);
}

template <typename T>
bool CheckedMul(T a, T b, T* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// The product of `factors`, or false when it overflows or any factor is
// negative.
inline bool CheckedProduct(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f < 0 || !CheckedMul(product, f, &product)) return false;
  }
  *out = product;
  return true;
}

}  // namespace spill

#endif  // SPILL_FRAMEWORK_BASE_CHECKED_MATH_H_
