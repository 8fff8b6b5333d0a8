#include "layers/cpu/conv_algorithm.h"

#include "framework/base/check.h"
#include "framework/base/registry.h"
#include "layers/cpu/blocked.h"
#include "layers/cpu/typed_elements.h"

namespace spill {
namespace cpu {
namespace {

Registry<const ConvAlgorithm*>& Algorithms() {
  static auto* registry =
      new Registry<const ConvAlgorithm*>("convolution algorithm", "convolution algorithms");
  return *registry;
}

}  // namespace

const char* ConvOpName(ConvOp op) {
  switch (op) {
    case ConvOp::kForward:
      return "forward";
    case ConvOp::kBackwardData:
      return "backward_data";
    case ConvOp::kBackwardFilter:
      return "backward_filter";
  }
  return "?";
}

std::vector<const ConvAlgorithm*> ConvAlgorithms() {
  std::vector<const ConvAlgorithm*> algorithms;
  for (const auto& [name, algorithm] : Algorithms().entries()) algorithms.push_back(algorithm);
  return algorithms;
}

const ConvAlgorithm* FindConvAlgorithm(const std::string& name) {
  const ConvAlgorithm* const* algorithm = Algorithms().Find(name);
  return algorithm == nullptr ? nullptr : *algorithm;
}

std::string UnknownConvAlgorithm(const std::string& name) { return Algorithms().Unknown(name); }

bool RegisterConvAlgorithm(const ConvAlgorithm* algorithm) {
  return Algorithms().Add(algorithm->name(), algorithm);
}

void AddConvBias(const ConvGeometry& g, const float* bias, float* y) {
  const int64_t plane = g.out_plane();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t f = 0; f < g.filters; ++f) {
      float* p = y + (n * g.filters + f) * plane;
      const float b = bias[f];
      for (int64_t i = 0; i < plane; ++i) p[i] += b;
    }
  }
}

namespace {

// Each channel's sum adds in the same order in either layout and type: image
// by image, then along the plane. `load` widens one element.
template <typename T, typename Load>
void BiasSums(const ConvGeometry& g, const T* dy, Load load, float* db, double* bias_sums) {
  const int64_t plane = g.out_plane();
  if (g.output_layout != Layout::kPlain) {
    const Lanes lanes(Shape(g.batch, g.filters, g.out_height, g.out_width), g.output_layout);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < lanes.blocks; ++b) {
      const int64_t c = b * kChannelBlock;
      double sum[kChannelBlock];
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        sum[l] = bias_sums != nullptr ? bias_sums[c + l] : 0.0;
      }
      for (int64_t n = 0; n < g.batch; ++n) {
        const T* p = dy + lanes.start(n * lanes.blocks + b);
        for (int64_t i = 0; i < plane; ++i) {
          for (int64_t l = 0; l < kChannelBlock; ++l) sum[l] += load(p[i * lanes.stride + l]);
        }
      }
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        if (bias_sums != nullptr) bias_sums[c + l] = sum[l];
        db[c + l] = static_cast<float>(sum[l]);
      }
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t f = 0; f < g.filters; ++f) {
    double sum = bias_sums != nullptr ? bias_sums[f] : 0.0;
    for (int64_t n = 0; n < g.batch; ++n) {
      const T* p = dy + (n * g.filters + f) * plane;
      for (int64_t i = 0; i < plane; ++i) sum += load(p[i]);
    }
    if (bias_sums != nullptr) bias_sums[f] = sum;
    db[f] = static_cast<float>(sum);
  }
}

}  // namespace

void ConvBiasGradient(const ConvGeometry& g, const void* dy, float* db, double* bias_sums) {
  WithElements(g.output_dtype, [&](auto e) {
    using E = decltype(e);
    BiasSums(g, static_cast<const typename E::T*>(dy), E::Load, db, bias_sums);
  });
}

}  // namespace cpu
}  // namespace spill
