// direct: loops over the kernel window, with no column matrix.
// Workspace: none, for every op.
//
// The kernels work on blocks of kLanes consecutive positions of a flattened
// plane, one SIMD vector each (GCC vector extensions), and keep their
// accumulators in registers: Forward and BackwardData one vector per filter or
// channel of a block of up to kMaxBlock, BackwardFilter one per (filter,
// channel) pair of a 4x4 block, summed across lanes at the end. Where a block's
// lanes read consecutive floats for a kernel tap, they load them as one vector
// (masked at the borders); otherwise lane by lane.
//
// Determinism: every output element is reduced by one thread in a fixed order.
// Forward parallelizes over (image, filter block) output planes, BackwardData
// over (image, channel block) input planes, and BackwardFilter over (filter
// block, channel block) kernels, never over the batch.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {
namespace {

constexpr int kLanes = 16;     // one AVX-512 vector of floats
constexpr int kMaxBlock = 16;  // accumulator vectors per block
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Mask __attribute__((vector_size(kLanes * sizeof(int32_t))));

Vec LoadVec(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The first `lanes` floats at p; the rest of the vector is zero.
Vec LoadPartial(const float* p, int lanes) {
  if (lanes == kLanes) return LoadVec(p);
  Vec v = {};
  for (int l = 0; l < lanes; ++l) v[l] = p[l];
  return v;
}

// Where the lanes of a block read from a source plane for one kernel tap.
struct Gather {
  enum Kind { kNone, kContiguous, kAffine, kScattered } kind = kNone;
  int64_t base = 0;       // kContiguous, kAffine: lane l reads base + l ...
  Mask mask = {};         // ... kAffine: if its mask is set, else reads 0
  int32_t index[kLanes];  // the source of each lane; -1 reads 0
};

// Classifies per-lane source indices (-1: none).
Gather Classify(const int32_t (&index)[kLanes]) {
  Gather g;
  std::copy(index, index + kLanes, g.index);
  int first = -1;
  bool affine = true, all = true;
  for (int l = 0; l < kLanes; ++l) {
    if (index[l] < 0) {
      all = false;
      continue;
    }
    if (first < 0) first = l;
    affine = affine && index[l] == index[first] + (l - first);
    g.mask[l] = -1;
  }
  if (first < 0) return g;
  g.base = index[first] - first;
  g.kind = !affine ? Gather::kScattered : all ? Gather::kContiguous : Gather::kAffine;
  return g;
}

Vec LoadScattered(const float* plane, const Gather& g) {
  Vec v;
  for (int l = 0; l < kLanes; ++l) v[l] = g.index[l] >= 0 ? plane[g.index[l]] : 0.0f;
  return v;
}

Vec LoadMasked(const float* p, Mask mask) {
  return reinterpret_cast<Vec>(reinterpret_cast<Mask>(LoadVec(p)) & mask);
}

// Forward's view: output positions p0.. of a plane read input (ih, iw) through
// tap (ki, kj).
Gather ForwardGather(const ConvGeometry& g, int64_t p0, int64_t ki, int64_t kj) {
  int32_t index[kLanes];
  int64_t oh = p0 / g.out_width, ow = p0 % g.out_width;
  for (int l = 0; l < kLanes; ++l, ++ow) {
    if (ow == g.out_width) ow = 0, ++oh;
    const int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dilation[0];
    const int64_t iw = ow * g.stride[1] - g.pad[1] + kj * g.dilation[1];
    const bool valid = oh < g.out_height && ih >= 0 && ih < g.height && iw >= 0 && iw < g.width;
    index[l] = valid ? static_cast<int32_t>(ih * g.width + iw) : -1;
  }
  return Classify(index);
}

// BackwardData's view: input positions q0.. of a plane gather the output
// gradient at (oh, ow) that tap (ki, kj) maps onto them.
Gather BackwardGather(const ConvGeometry& g, int64_t q0, int64_t ki, int64_t kj) {
  int32_t index[kLanes];
  int64_t ih = q0 / g.width, iw = q0 % g.width;
  for (int l = 0; l < kLanes; ++l, ++iw) {
    if (iw == g.width) iw = 0, ++ih;
    const int64_t h = ih + g.pad[0] - ki * g.dilation[0];
    const int64_t w = iw + g.pad[1] - kj * g.dilation[1];
    const int64_t oh = h / g.stride[0], ow = w / g.stride[1];
    const bool valid = ih < g.height && h >= 0 && w >= 0 && h % g.stride[0] == 0 &&
                       w % g.stride[1] == 0 && oh < g.out_height && ow < g.out_width;
    index[l] = valid ? static_cast<int32_t>(oh * g.out_width + ow) : -1;
  }
  return Classify(index);
}

template <int kOut, typename LoadFn>
void ReduceWith(const float* in, int64_t in_stride, int64_t count, const float* w, int64_t w_out,
                int64_t w_in, LoadFn load, Vec* acc) {
  for (int64_t r = 0; r < count; ++r) {
    const Vec v = load(in + r * in_stride);
    const float* wr = w + r * w_in;
#pragma GCC unroll 16
    for (int o = 0; o < kOut; ++o) acc[o] += wr[o * w_out] * v;
  }
}

// The floats [begin, end) of a tensor: masked loads may read any of them.
struct Bounds {
  const float* begin;
  const float* end;
  // Whether p[offset], ..., p[offset + count - 1] all lie inside.
  bool Holds(const float* p, int64_t offset, int64_t count) const {
    const int64_t first = (p - begin) + offset;
    return first >= 0 && first + count <= end - begin;
  }
};

// acc[o] += sum over r < count of w[o * w_out + r * w_in] * (plane r seen
// through `gather`), the planes `in_stride` floats apart inside `bounds`.
template <int kOut>
void Reduce(const float* in, int64_t in_stride, int64_t count, const Bounds& bounds, const float* w,
            int64_t w_out, int64_t w_in, const Gather& gather, Vec* acc) {
  const int64_t base = gather.base;
  const Mask mask = gather.mask;
  switch (gather.kind) {
    case Gather::kContiguous:
      ReduceWith<kOut>(
          in, in_stride, count, w, w_out, w_in,
          [base](const float* p) { return LoadVec(p + base); }, acc);
      return;
    case Gather::kAffine:
      // Lanes outside the plane still read inside the tensor (then masked).
      if (bounds.Holds(in, base, (count - 1) * in_stride + kLanes)) {
        ReduceWith<kOut>(
            in, in_stride, count, w, w_out, w_in,
            [base, mask](const float* p) { return LoadMasked(p + base, mask); }, acc);
        return;
      }
      break;
    case Gather::kScattered:
      break;
    case Gather::kNone:
      return;
  }
  ReduceWith<kOut>(
      in, in_stride, count, w, w_out, w_in,
      [&gather](const float* p) { return LoadScattered(p, gather); }, acc);
}

// Forward for filters f0..f0+kOut-1 of image n: y = conv + bias.
template <int kOut>
void ForwardBlock(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                  int64_t n, int64_t f0, float* y) {
  const int64_t cg = g.channels_per_group(), taps = g.kernel[0] * g.kernel[1];
  const int64_t plane = g.out_plane();
  const float* image = x + (n * g.channels + f0 / g.filters_per_group() * cg) * g.in_plane();
  const Bounds x_bounds{x, x + g.batch * g.channels * g.in_plane()};
  for (int64_t p0 = 0; p0 < plane; p0 += kLanes) {
    Vec acc[kOut] = {};
    for (int64_t tap = 0; tap < taps; ++tap) {
      const Gather gather = ForwardGather(g, p0, tap / g.kernel[1], tap % g.kernel[1]);
      Reduce<kOut>(image, g.in_plane(), cg, x_bounds, w + f0 * cg * taps + tap, cg * taps, taps,
                   gather, acc);
    }
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, plane - p0));
    for (int o = 0; o < kOut; ++o) {
      float* out = y + (n * g.filters + f0 + o) * plane + p0;
      const float b = bias ? bias[f0 + o] : 0.0f;
      for (int l = 0; l < lanes; ++l) out[l] = acc[o][l] + b;
    }
  }
}

// BackwardData for channels c0..c0+kOut-1 of image n: dx = or += the gradient.
template <int kOut>
void BackwardDataBlock(const ConvGeometry& g, const float* dy, const float* w, int64_t n,
                       int64_t c0, bool accumulate, float* dx) {
  const int64_t cg = g.channels_per_group(), fg = g.filters_per_group();
  const int64_t taps = g.kernel[0] * g.kernel[1], plane = g.in_plane();
  const int64_t f_first = c0 / cg * fg;
  const float* grad = dy + (n * g.filters + f_first) * g.out_plane();
  const float* weights = w + (f_first * cg + c0 % cg) * taps;
  const Bounds dy_bounds{dy, dy + g.batch * g.filters * g.out_plane()};
  for (int64_t q0 = 0; q0 < plane; q0 += kLanes) {
    Vec acc[kOut] = {};
    for (int64_t tap = 0; tap < taps; ++tap) {
      const Gather gather = BackwardGather(g, q0, tap / g.kernel[1], tap % g.kernel[1]);
      Reduce<kOut>(grad, g.out_plane(), fg, dy_bounds, weights + tap, taps, cg * taps, gather, acc);
    }
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, plane - q0));
    for (int o = 0; o < kOut; ++o) {
      float* out = dx + (n * g.channels + c0 + o) * plane + q0;
      for (int l = 0; l < lanes; ++l) out[l] = acc[o][l] + (accumulate ? out[l] : 0.0f);
    }
  }
}

// Where the lanes of a block of output positions p0.. read the input before
// the kernel tap's offset: (ih, iw) per lane and their ranges. Lanes past the
// plane get a row far outside the input.
struct Block {
  int64_t p0 = 0;
  int lanes = 0;  // positions of the block inside the plane
  Mask ih, iw;
  int64_t ih_min, ih_max, iw_min, iw_max;
  bool affine = false;  // lane l < lanes reads base + l
  int64_t base = 0;
};

Block MakeBlock(const ConvGeometry& g, int64_t p0) {
  Block b;
  b.p0 = p0;
  b.lanes = static_cast<int>(std::min<int64_t>(kLanes, g.out_plane() - p0));
  int64_t oh = p0 / g.out_width, ow = p0 % g.out_width;
  b.affine = true;
  b.base = (oh * g.stride[0] - g.pad[0]) * g.width + ow * g.stride[1] - g.pad[1];
  for (int l = 0; l < kLanes; ++l, ++ow) {
    if (ow == g.out_width) ow = 0, ++oh;
    const bool in_plane = l < b.lanes;
    b.ih[l] = in_plane ? static_cast<int32_t>(oh * g.stride[0] - g.pad[0]) : -(1 << 30);
    b.iw[l] = static_cast<int32_t>(ow * g.stride[1] - g.pad[1]);
    b.affine = b.affine && (!in_plane || b.ih[l] * g.width + b.iw[l] == b.base + l);
  }
  b.ih_min = *std::min_element(&b.ih[0], &b.ih[0] + b.lanes);
  b.ih_max = *std::max_element(&b.ih[0], &b.ih[0] + b.lanes);
  b.iw_min = *std::min_element(&b.iw[0], &b.iw[0] + b.lanes);
  b.iw_max = *std::max_element(&b.iw[0], &b.iw[0] + b.lanes);
  return b;
}

// The lanes of a block that read inside the input through a tap at offset
// (dh, dw).
Mask ValidLanes(const ConvGeometry& g, const Block& b, int64_t dh, int64_t dw) {
  const int32_t h = static_cast<int32_t>(dh), w = static_cast<int32_t>(dw);
  return (b.ih + h >= 0) & (b.ih + h < static_cast<int32_t>(g.height)) & (b.iw + w >= 0) &
         (b.iw + w < static_cast<int32_t>(g.width));
}

// The input plane as the block sees it through a tap at offset (dh, dw), lane
// by lane.
Vec LoadLanes(const ConvGeometry& g, const Block& b, const float* plane, int64_t dh, int64_t dw,
              Mask valid) {
  Vec v = {};
  for (int l = 0; l < b.lanes; ++l) {
    if (valid[l]) v[l] = plane[(b.ih[l] + dh) * g.width + b.iw[l] + dw];
  }
  return v;
}

// Plane blocks that BackwardFilter sets up at a time (a few KiB on the stack).
constexpr int kChunkBlocks = 16;

// One kernel tap of BackwardFilter over a chunk of plane blocks: acc[f][c] +=
// dy(filter f) * x(channel c) seen through the tap, over the batch.
template <int kF, int kC>
void BackwardFilterTap(const ConvGeometry& g, const float* x, const float* dy, int64_t f0,
                       int64_t channel, const Block* blocks, int count, int64_t dh, int64_t dw,
                       Vec (&acc)[kF][kC]) {
  const int64_t plane = g.out_plane();
  const Bounds x_bounds{x, x + g.batch * g.channels * g.in_plane()};
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* in = x + (n * g.channels + channel) * g.in_plane();
    const float* grad = dy + (n * g.filters + f0) * plane;
    for (int i = 0; i < count; ++i) {
      const Block& b = blocks[i];
      if (b.ih_max + dh < 0 || b.ih_min + dh >= g.height || b.iw_max + dw < 0 ||
          b.iw_min + dw >= g.width) {
        continue;  // no lane reads the input
      }
      const bool inside = b.affine && b.lanes == kLanes && b.ih_min + dh >= 0 &&
                          b.ih_max + dh < g.height && b.iw_min + dw >= 0 && b.iw_max + dw < g.width;
      const int64_t offset = b.base + dh * g.width + dw;  // lane 0's source, if affine
      Vec xv[kC], dyv[kF];
      if (inside) {
        for (int c = 0; c < kC; ++c) xv[c] = LoadVec(in + c * g.in_plane() + offset);
      } else if (b.affine && x_bounds.Holds(in, offset, (kC - 1) * g.in_plane() + kLanes)) {
        const Mask valid = ValidLanes(g, b, dh, dw);  // the rest read x elsewhere
        for (int c = 0; c < kC; ++c) xv[c] = LoadMasked(in + c * g.in_plane() + offset, valid);
      } else {
        const Mask valid = ValidLanes(g, b, dh, dw);
        for (int c = 0; c < kC; ++c) xv[c] = LoadLanes(g, b, in + c * g.in_plane(), dh, dw, valid);
      }
      for (int f = 0; f < kF; ++f) dyv[f] = LoadPartial(grad + f * plane + b.p0, b.lanes);
#pragma GCC unroll 4
      for (int f = 0; f < kF; ++f) {
#pragma GCC unroll 4
        for (int c = 0; c < kC; ++c) acc[f][c] += dyv[f] * xv[c];
      }
    }
  }
}

// BackwardFilter for filters f0..f0+kF-1 and channels c0..c0+kC-1 (of their
// group): dw = the sum over chunks of the plane, taps, the batch and the
// chunk's blocks, in that fixed order. A chunk of the batch's x and dy stays in
// cache across the taps, and the accumulators in registers.
template <int kF, int kC>
void BackwardFilterBlock(const ConvGeometry& g, const float* x, const float* dy, int64_t f0,
                         int64_t c0, bool accumulate, float* dw) {
  const int64_t cg = g.channels_per_group(), taps = g.kernel[0] * g.kernel[1];
  const int64_t channel = f0 / g.filters_per_group() * cg + c0;
  for (int f = 0; f < kF && !accumulate; ++f) {
    std::fill_n(dw + ((f0 + f) * cg + c0) * taps, kC * taps, 0.0f);
  }
  for (int64_t p = 0; p < g.out_plane(); p += kChunkBlocks * kLanes) {
    Block blocks[kChunkBlocks];
    int count = 0;
    for (; count < kChunkBlocks && p + count * kLanes < g.out_plane(); ++count) {
      blocks[count] = MakeBlock(g, p + count * kLanes);
    }
    for (int64_t tap = 0; tap < taps; ++tap) {
      Vec acc[kF][kC] = {};
      BackwardFilterTap<kF, kC>(g, x, dy, f0, channel, blocks, count,
                                tap / g.kernel[1] * g.dilation[0],
                                tap % g.kernel[1] * g.dilation[1], acc);
      for (int f = 0; f < kF; ++f) {
        for (int c = 0; c < kC; ++c) {
          float sum = 0.0f;
          for (int l = 0; l < kLanes; ++l) sum += acc[f][c][l];
          dw[((f0 + f) * cg + c0 + c) * taps + tap] += sum;
        }
      }
    }
  }
}

// Splits [begin, end) into blocks of kMax (16 or 4) and smaller powers of two,
// and runs run(size, start) on each, size a std::integral_constant.
template <int kMax, typename Run>
void ForBlocks(int64_t begin, int64_t end, Run run) {
  while (begin < end) {
    const int64_t left = end - begin;
    if constexpr (kMax >= 16) {
      if (left >= 16) {
        run(std::integral_constant<int, 16>(), begin);
        begin += 16;
        continue;
      }
      if (left >= 8) {
        run(std::integral_constant<int, 8>(), begin);
        begin += 8;
        continue;
      }
    }
    if (left >= 4) {
      run(std::integral_constant<int, 4>(), begin);
      begin += 4;
    } else if (left >= 2) {
      run(std::integral_constant<int, 2>(), begin);
      begin += 2;
    } else {
      run(std::integral_constant<int, 1>(), begin);
      begin += 1;
    }
  }
}

// Blocks of at most `block` in a group of `per_group`.
int64_t BlocksPerGroup(int64_t per_group, int64_t block) { return (per_group + block - 1) / block; }

// Filter and channel blocks of BackwardFilter.
constexpr int kFilterBlock = 4;

class Direct : public ConvAlgorithm {
 public:
  std::string name() const override { return "direct"; }

  size_t WorkspaceBytes(const ConvGeometry&, ConvOp) const override { return 0; }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void*) const override {
    const int64_t fg = g.filters_per_group(), blocks = BlocksPerGroup(fg, kMaxBlock);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t b = 0; b < g.groups * blocks; ++b) {
        const int64_t begin = b / blocks * fg + b % blocks * kMaxBlock;
        const int64_t end = std::min(begin + kMaxBlock, (b / blocks + 1) * fg);
        ForBlocks<kMaxBlock>(begin, end, [&](auto size, int64_t f0) {
          ForwardBlock<decltype(size)::value>(g, x, w, bias, n, f0, y);
        });
      }
    }
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void*) const override {
    const int64_t cg = g.channels_per_group(), blocks = BlocksPerGroup(cg, kMaxBlock);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t b = 0; b < g.groups * blocks; ++b) {
        const int64_t begin = b / blocks * cg + b % blocks * kMaxBlock;
        const int64_t end = std::min(begin + kMaxBlock, (b / blocks + 1) * cg);
        ForBlocks<kMaxBlock>(begin, end, [&](auto size, int64_t c0) {
          BackwardDataBlock<decltype(size)::value>(g, dy, w, n, c0, accumulate, dx);
        });
      }
    }
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void*) const override {
    const int64_t fg = g.filters_per_group(), cg = g.channels_per_group();
    const int64_t f_blocks = BlocksPerGroup(fg, kFilterBlock);
    const int64_t c_blocks = BlocksPerGroup(cg, kFilterBlock);
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t fb = 0; fb < g.groups * f_blocks; ++fb) {
      for (int64_t cb = 0; cb < c_blocks; ++cb) {
        const int64_t f_begin = fb / f_blocks * fg + fb % f_blocks * kFilterBlock;
        const int64_t f_end = std::min(f_begin + kFilterBlock, (fb / f_blocks + 1) * fg);
        const int64_t c_begin = cb * kFilterBlock;
        const int64_t c_end = std::min(c_begin + kFilterBlock, cg);
        ForBlocks<kFilterBlock>(f_begin, f_end, [&](auto f_size, int64_t f0) {
          ForBlocks<kFilterBlock>(c_begin, c_end, [&](auto c_size, int64_t c0) {
            BackwardFilterBlock<decltype(f_size)::value, decltype(c_size)::value>(g, x, dy, f0, c0,
                                                                                  accumulate, dw);
          });
        });
      }
    }
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(Direct);

}  // namespace cpu
}  // namespace spill
