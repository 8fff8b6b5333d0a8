#include "layers/cpu/batch_norm_blocked.h"

#include <cstdint>

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

void BlockedSums(const float* x, const Shape& shape, double* partial, double* sums) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const float* p = x + runs.offset(r);
    double acc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += p[i * kLanes + l];
    }
    for (int64_t l = 0; l < kLanes; ++l) partial[runs.slot(r) + l] = acc[l];
  }
  AddInImageOrder(runs, partial, sums);
}

void BlockedSquares(const float* x, const Shape& shape, const double* mean, double* partial,
                    double* squares) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const float* p = x + runs.offset(r);
    const double* mu = mean + runs.channel(r);
    double acc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const double d = p[i * kLanes + l] - mu[l];
        acc[l] += d * d;
      }
    }
    for (int64_t l = 0; l < kLanes; ++l) partial[runs.slot(r) + l] = acc[l];
  }
  AddInImageOrder(runs, partial, squares);
}

void BlockedNormalize(const float* x, const Shape& shape, const float* mean, const float* scale,
                      const float* shift, float* y) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const float* p = x + runs.offset(r);
    float* q = y + runs.offset(r);
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        q[i * kLanes + l] = (p[i * kLanes + l] - mean[c + l]) * scale[c + l] + shift[c + l];
      }
    }
  }
}

void BlockedGradientSums(const float* x, const float* dy, const Shape& shape, const float* mean,
                         double* partial, double* sum_dy, double* sum_dy_xc) {
  const Runs runs(shape);
  double* partial_xc = partial + runs.images * runs.channels;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const float* p = x + runs.offset(r);
    const float* g = dy + runs.offset(r);
    const float* mu = mean + runs.channel(r);
    double acc[kLanes] = {}, acc_xc[kLanes] = {};
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const float d = g[i * kLanes + l];
        acc[l] += d;
        acc_xc[l] += static_cast<double>(d) * (p[i * kLanes + l] - mu[l]);
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

void BlockedInputGradient(const float* x, const float* dy, const Shape& shape, const float* mean,
                          const float* k, const float* mean_dy, const float* coef, float* dx,
                          bool accumulate) {
  const Runs runs(shape);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < runs.count(); ++r) {
    const int64_t c = runs.channel(r);
    const float* p = x + runs.offset(r);
    const float* g = dy + runs.offset(r);
    float* q = dx + runs.offset(r);
    for (int64_t i = 0; i < runs.plane; ++i) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t e = i * kLanes + l;
        const float v = k[c + l] * (g[e] - mean_dy[c + l] - (p[e] - mean[c + l]) * coef[c + l]);
        q[e] = accumulate ? q[e] + v : v;
      }
    }
  }
}

}  // namespace cpu
}  // namespace spill
