#include "layers/cpu/batch_norm_blocked.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "layers/cpu/blocked.h"
#include "layers/cpu/typed_elements.h"

namespace spill {
namespace cpu {
namespace {

// out[ch] += partial[image][ch], image by image.
void AddInImageOrder(const Lanes& runs, const double* partial, double* out) {
  for (int64_t n = 0; n < runs.images; ++n) {
    const double* p = partial + n * runs.channels;
    for (int64_t ch = 0; ch < runs.channels; ++ch) out[ch] += p[ch];
  }
}

// Calls body(acc, acc2, width) with `width` lanes of zeroed sums for run r,
// which end in out[] and out2[] (where not null) at the run's slot: in
// registers for the 16 lanes of a blocked run (width then a compile-time
// constant), in out and out2 themselves for the whole pixels of a
// channels-last one.
template <typename Body>
void Accumulate(const Lanes& runs, int64_t r, double* out, double* out2, Body body) {
  out += runs.slot(r);
  if (out2 != nullptr) out2 += runs.slot(r);
  if (runs.width == kChannelBlock) {
    double acc[kChannelBlock] = {}, acc2[kChannelBlock] = {};
    body(acc, acc2, std::integral_constant<int64_t, kChannelBlock>());
    std::copy(acc, acc + kChannelBlock, out);
    if (out2 != nullptr) std::copy(acc2, acc2 + kChannelBlock, out2);
    return;
  }
  std::fill(out, out + runs.width, 0.0);
  if (out2 != nullptr) std::fill(out2, out2 + runs.width, 0.0);
  body(out, out2, runs.width);
}

// Calls body(width) with the run's width: a compile-time constant for the
// 16 lanes of a blocked run, so that its loops unroll as they do in
// registers.
template <typename Body>
void WithWidth(const Lanes& runs, Body body) {
  if (runs.width == kChannelBlock) return body(std::integral_constant<int64_t, kChannelBlock>());
  body(runs.width);
}

}  // namespace

template <typename E>
void BlockedSums(const typename E::T* x, const Shape& shape, Layout layout, double* partial,
                 double* sums) {
  const Lanes runs(shape, layout, /*whole_pixels=*/true);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.start(r);
    Accumulate(runs, r, partial, nullptr, [&](double* acc, double*, auto width) {
      for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
        for (int64_t l = 0; l < width; ++l) acc[l] += E::Load(p[i * runs.stride + l]);
      }
    });
  }
  AddInImageOrder(runs, partial, sums);
}

template <typename E>
void BlockedSquares(const typename E::T* x, const Shape& shape, Layout layout, const double* mean,
                    double* partial, double* squares) {
  const Lanes runs(shape, layout, /*whole_pixels=*/true);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.start(r);
    const double* mu = mean + runs.channel(r);
    Accumulate(runs, r, partial, nullptr, [&](double* acc, double*, auto width) {
      for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
        for (int64_t l = 0; l < width; ++l) {
          const double d = E::Load(p[i * runs.stride + l]) - mu[l];
          acc[l] += d * d;
        }
      }
    });
  }
  AddInImageOrder(runs, partial, squares);
}

template <typename E>
void BlockedNormalize(const typename E::T* x, const Shape& shape, Layout layout, const float* mean,
                      const float* scale, const float* shift, typename E::T* y) {
  const Lanes runs(shape, layout, /*whole_pixels=*/true);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const typename E::T* p = x + runs.start(r);
    typename E::T* q = y + runs.start(r);
    WithWidth(runs, [&](auto width) {
      for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
        for (int64_t l = 0; l < width; ++l) {
          q[i * runs.stride + l] = E::Store(
              (E::Load(p[i * runs.stride + l]) - mean[c + l]) * scale[c + l] + shift[c + l]);
        }
      }
    });
  }
}

template <typename E>
void BlockedGradientSums(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                         Layout layout, const float* mean, double* partial, double* sum_dy,
                         double* sum_dy_xc) {
  const Lanes runs(shape, layout, /*whole_pixels=*/true);
  double* partial_xc = partial + runs.images * runs.channels;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.start(r);
    const typename E::T* g = dy + runs.start(r);
    const float* mu = mean + runs.channel(r);
    Accumulate(runs, r, partial, partial_xc, [&](double* acc, double* acc_xc, auto width) {
      for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
        for (int64_t l = 0; l < width; ++l) {
          const float d = E::Load(g[i * runs.stride + l]);
          acc[l] += d;
          acc_xc[l] += static_cast<double>(d) * (E::Load(p[i * runs.stride + l]) - mu[l]);
        }
      }
    });
  }
  AddInImageOrder(runs, partial, sum_dy);
  AddInImageOrder(runs, partial_xc, sum_dy_xc);
}

template <typename E>
void BlockedInputGradient(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                          Layout layout, const float* mean, const float* k, const float* mean_dy,
                          const float* coef, typename E::T* dx, bool accumulate) {
  const Lanes runs(shape, layout, /*whole_pixels=*/true);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const typename E::T* p = x + runs.start(r);
    const typename E::T* g = dy + runs.start(r);
    typename E::T* q = dx + runs.start(r);
    WithWidth(runs, [&](auto width) {
      for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
        for (int64_t l = 0; l < width; ++l) {
          const int64_t e = i * runs.stride + l;
          const float v = k[c + l] * (E::Load(g[e]) - mean_dy[c + l] -
                                      (E::Load(p[e]) - mean[c + l]) * coef[c + l]);
          q[e] = E::Store(accumulate ? E::Load(q[e]) + v : v);
        }
      }
    });
  }
}

#define SPILL_BLOCKED_BATCH_NORM(E)                                                                \
  template void BlockedSums<E>(const E::T*, const Shape&, Layout, double*, double*);               \
  template void BlockedSquares<E>(const E::T*, const Shape&, Layout, const double*, double*,       \
                                  double*);                                                        \
  template void BlockedNormalize<E>(const E::T*, const Shape&, Layout, const float*, const float*, \
                                    const float*, E::T*);                                          \
  template void BlockedGradientSums<E>(const E::T*, const E::T*, const Shape&, Layout,             \
                                       const float*, double*, double*, double*);                   \
  template void BlockedInputGradient<E>(const E::T*, const E::T*, const Shape&, Layout,            \
                                        const float*, const float*, const float*, const float*,    \
                                        E::T*, bool);
SPILL_BLOCKED_BATCH_NORM(Float32Elements)
SPILL_BLOCKED_BATCH_NORM(Bf16Elements)
SPILL_BLOCKED_BATCH_NORM(HalfElements)
#undef SPILL_BLOCKED_BATCH_NORM

}  // namespace cpu
}  // namespace spill
