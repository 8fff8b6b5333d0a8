#include "layers/cpu/batch_norm_blocked.h"

#include <cstdint>

#include "layers/cpu/typed_elements.h"

namespace spill {
namespace cpu {
namespace {

constexpr int64_t kLanes = kChannelBlock;

// The (image, block) runs of a tensor: run r = image r / blocks, block
// r % blocks, starting at element r * plane * kLanes, channels from
// (r % blocks) * kLanes.
struct Runs {
  explicit Runs(const Shape& s)
      : images(s.n()), blocks(s.c() / kLanes), channels(s.c()), plane(s.h() * s.w()) {}
  int64_t count() const { return images * blocks; }
  int64_t offset(int64_t r) const { return r * plane * kLanes; }
  int64_t channel(int64_t r) const { return (r % blocks) * kLanes; }
  // partial[] index of run r's first lane: image-major, channel-minor.
  int64_t slot(int64_t r) const { return (r / blocks) * channels + channel(r); }
  int64_t images, blocks, channels, plane;
};

// out[ch] += partial[image][ch], image by image.
void AddInImageOrder(const Runs& runs, const double* partial, double* out) {
  for (int64_t n = 0; n < runs.images; ++n) {
    const double* p = partial + n * runs.channels;
    for (int64_t ch = 0; ch < runs.channels; ++ch) out[ch] += p[ch];
  }
}

}  // namespace

template <typename E>
void BlockedSums(const typename E::T* x, const Shape& shape, double* partial, double* sums) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.offset(r);
    double acc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += E::Load(p[i * kLanes + l]);
    }
    for (int64_t l = 0; l < kLanes; ++l) partial[runs.slot(r) + l] = acc[l];
  }
  AddInImageOrder(runs, partial, sums);
}

template <typename E>
void BlockedSquares(const typename E::T* x, const Shape& shape, const double* mean, double* partial,
                    double* squares) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.offset(r);
    const double* mu = mean + runs.channel(r);
    double acc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const double d = E::Load(p[i * kLanes + l]) - mu[l];
        acc[l] += d * d;
      }
    }
    for (int64_t l = 0; l < kLanes; ++l) partial[runs.slot(r) + l] = acc[l];
  }
  AddInImageOrder(runs, partial, squares);
}

template <typename E>
void BlockedNormalize(const typename E::T* x, const Shape& shape, const float* mean,
                      const float* scale, const float* shift, typename E::T* y) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const typename E::T* p = x + runs.offset(r);
    typename E::T* q = y + runs.offset(r);
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        q[i * kLanes + l] =
            E::Store((E::Load(p[i * kLanes + l]) - mean[c + l]) * scale[c + l] + shift[c + l]);
      }
    }
  }
}

template <typename E>
void BlockedGradientSums(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                         const float* mean, double* partial, double* sum_dy, double* sum_dy_xc) {
  const Runs runs(shape);
  double* partial_xc = partial + runs.images * runs.channels;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const typename E::T* p = x + runs.offset(r);
    const typename E::T* g = dy + runs.offset(r);
    const float* mu = mean + runs.channel(r);
    double acc[kLanes] = {}, acc_xc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const float d = E::Load(g[i * kLanes + l]);
        acc[l] += d;
        acc_xc[l] += static_cast<double>(d) * (E::Load(p[i * kLanes + l]) - mu[l]);
      }
    }
    for (int64_t l = 0; l < kLanes; ++l) {
      partial[runs.slot(r) + l] = acc[l];
      partial_xc[runs.slot(r) + l] = acc_xc[l];
    }
  }
  AddInImageOrder(runs, partial, sum_dy);
  AddInImageOrder(runs, partial_xc, sum_dy_xc);
}

template <typename E>
void BlockedInputGradient(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                          const float* mean, const float* k, const float* mean_dy,
                          const float* coef, typename E::T* dx, bool accumulate) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const typename E::T* p = x + runs.offset(r);
    const typename E::T* g = dy + runs.offset(r);
    typename E::T* q = dx + runs.offset(r);
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t e = i * kLanes + l;
        const float v = k[c + l] * (E::Load(g[e]) - mean_dy[c + l] -
                                    (E::Load(p[e]) - mean[c + l]) * coef[c + l]);
        q[e] = E::Store(accumulate ? E::Load(q[e]) + v : v);
      }
    }
  }
}

#define SPILL_BLOCKED_BATCH_NORM(E)                                                            \
  template void BlockedSums<E>(const E::T*, const Shape&, double*, double*);                   \
  template void BlockedSquares<E>(const E::T*, const Shape&, const double*, double*, double*); \
  template void BlockedNormalize<E>(const E::T*, const Shape&, const float*, const float*,     \
                                    const float*, E::T*);                                      \
  template void BlockedGradientSums<E>(const E::T*, const E::T*, const Shape&, const float*,   \
                                       double*, double*, double*);                             \
  template void BlockedInputGradient<E>(const E::T*, const E::T*, const Shape&, const float*,  \
                                        const float*, const float*, const float*, E::T*, bool);
SPILL_BLOCKED_BATCH_NORM(Float32Elements)
SPILL_BLOCKED_BATCH_NORM(Bf16Elements)
SPILL_BLOCKED_BATCH_NORM(HalfElements)
#undef SPILL_BLOCKED_BATCH_NORM

}  // namespace cpu
}  // namespace spill
