// space_to_depth (layers/space_to_depth_layer.h): forward and backward
// against a plain loop over Swin's patch merging order, the gradient as the
// exact inverse permutation and the adjoint of forward, 16-bit storage
// through the executor's float32 copies, and errors that name the layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/random.h"
#include "framework/device/convert.h"
#include "framework/device/cpu_device.h"
#include "framework/graph/conversions.h"
#include "framework/graph/net.h"
#include "tests/testing/layer_harness.h"

namespace spill {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::LayerHarness;

// For each output element, the index of the input element it holds: output
// channel (dx * b + dy) * C + c at (i, j) is input channel c at
// (i * b + dy, j * b + dx), written out as torchvision's PatchMerging reads
// it (x0 = x[0::2, 0::2], x1 = x[1::2, 0::2], x2 = x[0::2, 1::2], ...).
std::vector<int64_t> ReferenceSources(const Shape& in, int64_t b) {
  const int64_t c = in.c(), h = in.h(), w = in.w(), oh = h / b, ow = w / b;
  std::vector<int64_t> source(in.numel());
  for (int64_t n = 0; n < in.n(); ++n) {
    for (int64_t dx = 0; dx < b; ++dx) {
      for (int64_t dy = 0; dy < b; ++dy) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t out_channel = (dx * b + dy) * c + ch;
          for (int64_t i = 0; i < oh; ++i) {
            for (int64_t j = 0; j < ow; ++j) {
              const int64_t out = ((n * b * b * c + out_channel) * oh + i) * ow + j;
              source[out] = ((n * c + ch) * h + i * b + dy) * w + j * b + dx;
            }
          }
        }
      }
    }
  }
  return source;
}

std::string Entry(int64_t block) {
  return "{type: space_to_depth, block_size: " + std::to_string(block) + "}";
}

struct Geometry {
  Shape input;
  int64_t block;
};

class SpaceToDepthTest : public ::testing::TestWithParam<Geometry> {};

TEST_P(SpaceToDepthTest, ForwardMatchesTheReferenceLoop) {
  const Geometry& g = GetParam();
  LayerHarness h(Entry(g.block), {g.input});
  const Shape& in = g.input;
  ASSERT_EQ(h.output_shapes()[0],
            Shape(in.n(), g.block * g.block * in.c(), in.h() / g.block, in.w() / g.block));
  h.Randomize(3);
  h.Forward();
  const std::vector<int64_t> source = ReferenceSources(in, g.block);
  for (size_t e = 0; e < source.size(); ++e) {
    ASSERT_EQ(h.outputs[0][e], h.inputs[0][source[e]]) << "output " << e;
  }
}

// Every input position receives exactly one output element, overwritten
// (whatever was there before: NaN here).
TEST_P(SpaceToDepthTest, BackwardIsTheInversePermutation) {
  const Geometry& g = GetParam();
  LayerHarness h(Entry(g.block), {g.input});
  h.Randomize(5);
  h.Forward();
  for (size_t e = 0; e < h.output_grads[0].size(); ++e) {
    h.output_grads[0][e] = UniformAt(9, e) - 0.5f;
  }
  std::fill(h.input_grads[0].begin(), h.input_grads[0].end(), NAN);
  h.Backward();
  const std::vector<int64_t> source = ReferenceSources(g.input, g.block);
  std::vector<float> want(source.size(), NAN);
  for (size_t e = 0; e < source.size(); ++e) want[source[e]] = h.output_grads[0][e];
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(want[i])) << "input " << i << " receives no output";
    ASSERT_EQ(h.input_grads[0][i], want[i]) << "input " << i;
  }
}

// sum(y * g) == sum(x * backward(g)): backward is forward's adjoint.
TEST_P(SpaceToDepthTest, BackwardIsTheAdjointOfForward) {
  const Geometry& g = GetParam();
  LayerHarness h(Entry(g.block), {g.input});
  h.Randomize(7);
  h.Forward();
  for (size_t e = 0; e < h.output_grads[0].size(); ++e) {
    h.output_grads[0][e] = UniformAt(13, e) - 0.5f;
  }
  h.Backward();
  double forward = 0, backward = 0;
  for (size_t e = 0; e < h.outputs[0].size(); ++e) {
    forward += static_cast<double>(h.outputs[0][e]) * h.output_grads[0][e];
    backward += static_cast<double>(h.inputs[0][e]) * h.input_grads[0][e];
  }
  EXPECT_NEAR(forward, backward, 1e-12 * h.outputs[0].size());
}

INSTANTIATE_TEST_SUITE_P(Blocks, SpaceToDepthTest,
                         ::testing::Values(Geometry{Shape(2, 3, 4, 6), 2},
                                           Geometry{Shape(2, 3, 6, 9), 3},
                                           Geometry{Shape(1, 2, 3, 5), 1}),
                         [](const ::testing::TestParamInfo<Geometry>& info) {
                           return "block" + std::to_string(info.param.block);
                         });

// torchvision's PatchMerging of one channel's [[1, 2], [3, 4]]:
// x0 = 1, x1 = 3 (the next row), x2 = 2 (the next column), x3 = 4.
TEST(SpaceToDepthOrderTest, IsSwinsPatchMergingNotPixelUnshuffle) {
  LayerHarness h("{type: space_to_depth}", {Shape(1, 1, 2, 2)});
  h.inputs[0] = {1, 2, 3, 4};
  h.Forward();
  EXPECT_EQ(h.output_shapes()[0], Shape(1, 4, 1, 1));
  EXPECT_EQ(h.outputs[0], (std::vector<float>{1, 3, 2, 4}));
}

// The layer computes on float32 (Layer::computes_16_bit is false): the
// executor hands it float32 copies of 16-bit tensors and rounds what it
// writes. A permutation of 16-bit values comes back bit for bit, forward
// and backward, overwriting or adding.
void CheckSixteenBit(DType dtype) {
  const Shape in(2, 3, 4, 6);
  LayerHarness h(Entry(2), {in});
  const Layer& layer = h.layer();
  ASSERT_FALSE(layer.computes_16_bit(Pass::kForward));
  const Shape out = h.output_shapes()[0];
  auto bits = [&](float v) {
    return dtype == DType::kBF16 ? FloatToBf16Bits(v) : FloatToHalfBits(v);
  };
  auto widen = [&](uint16_t v) {
    return dtype == DType::kBF16 ? Bf16BitsToFloat(v) : HalfBitsToFloat(v);
  };
  std::vector<uint16_t> x(in.numel()), y(out.numel()), dy(out.numel()), dx(in.numel());
  for (size_t i = 0; i < x.size(); ++i) x[i] = bits(4 * UniformAt(21, i) - 2);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = bits(4 * UniformAt(22, i) - 2);
  auto tensor = [&](std::vector<uint16_t>& v, const Shape& s) {
    return Tensor(s, v.data(), dtype, Layout::kPlain);
  };
  CpuDevice device;
  std::vector<char> workspace(4 * ConversionCopyBytes(in.numel()));
  auto run = [&](auto&& fill_args, auto&& call) {
    Conversions copies(&device, {workspace.data(), workspace.size()});
    fill_args(copies);
    copies.ConvertIn();
    call();
    copies.WriteBack();
    device.compute_queue().Synchronize();
  };
  ForwardArgs f;
  run(
      [&](Conversions& c) {
        f.inputs = {c.Float(tensor(x, in), true, false)};
        f.outputs = {c.Float(tensor(y, out), false, true)};
      },
      [&] { layer.Forward(f); });
  const std::vector<int64_t> source = ReferenceSources(in, 2);
  for (size_t e = 0; e < source.size(); ++e) ASSERT_EQ(y[e], x[source[e]]) << "output " << e;
  for (bool accumulate : {false, true}) {
    const std::vector<uint16_t> before = dx;
    BackwardArgs b;
    run(
        [&](Conversions& c) {
          b.output_grads = {c.Float(tensor(dy, out), true, false)};
          b.input_grads = {c.Float(tensor(dx, in), accumulate, true)};
          b.accumulate = {accumulate};
        },
        [&] { layer.Backward(b); });
    for (size_t e = 0; e < source.size(); ++e) {
      const int64_t i = source[e];
      const uint16_t want = accumulate ? bits(widen(before[i]) + widen(dy[e])) : dy[e];
      ASSERT_EQ(dx[i], want) << "input " << i << (accumulate ? " (adding)" : "");
    }
  }
}

TEST(SpaceToDepthSixteenBitTest, Bf16IsAPermutationOfTheBits) { CheckSixteenBit(DType::kBF16); }
TEST(SpaceToDepthSixteenBitTest, HalfIsAPermutationOfTheBits) { CheckSixteenBit(DType::kF16); }

// Misuses are errors naming the file, the layer and what is wrong.
std::string BuildError(const std::string& input_shape, const std::string& layers) {
  auto spec = ParseNetString(
      "layers:\n  - {name: data, type: input, shape: " + input_shape + "}\n" + layers, "net.yaml");
  if (!spec.ok()) return spec.status().ToString();
  auto net = Net::Build(*spec, {2, DeviceType::kCpu});
  return net.ok() ? "" : net.status().ToString();
}

TEST(SpaceToDepthErrorsTest, MisusesNameTheLayer) {
  EXPECT_EQ(BuildError("[3, 6, 9]",
                       "  - {name: merge, type: space_to_depth, block_size: 3}\n"
                       "  - {name: fc, type: fully_connected, outputs: 2}\n"
                       "  - {name: loss, type: softmax_loss}\n"),
            "");
  EXPECT_THAT(BuildError("[3, 5, 6]", "  - {name: merge, type: space_to_depth}\n"),
              AllOf(HasSubstr("layer 'merge' (space_to_depth)"),
                    HasSubstr("height 5 and width 6 must both be multiples of block_size (2)")));
  EXPECT_THAT(BuildError("[3, 6, 8]", "  - {name: merge, type: space_to_depth, block_size: 3}\n"),
              AllOf(HasSubstr("layer 'merge' (space_to_depth)"),
                    HasSubstr("height 6 and width 8 must both be multiples of block_size (3)")));
  for (const char* block : {"0", "-2"}) {
    EXPECT_THAT(BuildError("[3, 4, 4]", std::string("  - {name: merge, type: space_to_depth, "
                                                    "block_size: ") +
                                            block + "}\n"),
                AllOf(HasSubstr("net.yaml:3: layer 'merge' (space_to_depth)"),
                      HasSubstr("block_size: must be an integer in [1, ")))
        << block;
  }
  EXPECT_THAT(BuildError("[3, 4, 4]", "  - {name: merge, type: space_to_depth, size: 2}\n"),
              AllOf(HasSubstr("layer 'merge' (space_to_depth)"),
                    HasSubstr("unknown key 'size'; space_to_depth layers take: block_size")));
  EXPECT_THAT(BuildError("[3, 4, 4]",
                         "  - {name: merge, type: space_to_depth, "
                         "inputs: [data, data]}\n"),
              AllOf(HasSubstr("layer 'merge' (space_to_depth)"), HasSubstr("takes 1 input")));
}

}  // namespace
}  // namespace spill
