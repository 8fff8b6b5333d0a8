// Every model in models/ parses, infers its shapes and runs one forward and
// backward pass at batch 2 (at a small input size to keep the test quick).
#include <gtest/gtest.h>

#include <cmath>

#include "framework/graph/net.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

struct ModelCase {
  const char* file;
  int size;
  const char* stem;  // nullptr for models without a stem parameter
};

class ModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelTest, RunsForwardAndBackwardAtBatchTwo) {
  const ModelCase& c = GetParam();
  ParamOverrides overrides = {{"classes", YAML::Node(10)}, {"size", YAML::Node(c.size)}};
  if (c.stem) overrides["stem"] = YAML::Node(c.stem);
  auto spec = LoadNetFile(std::string("models/") + c.file, overrides);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  testing::SyntheticRun run;
  run.steps = 1;
  auto trace = testing::TrainSynthetic(*spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->losses.size(), 1u);
  EXPECT_TRUE(std::isfinite(trace->losses[0])) << c.file;
  EXPECT_GT(trace->losses[0], 0.0);
  double grad_norm = 0;
  for (const auto& g : trace->grads) {
    for (float v : g) {
      ASSERT_TRUE(std::isfinite(v)) << c.file;
      grad_norm += v * v;
    }
  }
  EXPECT_GT(grad_norm, 0.0) << c.file;
}

INSTANTIATE_TEST_SUITE_P(
    Models, ModelTest,
    ::testing::Values(
        ModelCase{"lenet.yaml", 28, nullptr}, ModelCase{"alexnet.yaml", 67, nullptr},
        ModelCase{"vgg16.yaml", 32, nullptr}, ModelCase{"resnet18.yaml", 32, "cifar"},
        ModelCase{"resnet18.yaml", 32, "imagenet"}, ModelCase{"resnet34.yaml", 32, "imagenet"},
        ModelCase{"resnet50.yaml", 32, "imagenet"}, ModelCase{"resnet101.yaml", 32, "imagenet"},
        ModelCase{"resnet152.yaml", 32, "imagenet"}, ModelCase{"resnet152.yaml", 16, "cifar"},
        ModelCase{"resnet_deep.yaml", 32, "imagenet"}, ModelCase{"inception_v4.yaml", 75, nullptr},
        ModelCase{"densenet121.yaml", 32, nullptr}, ModelCase{"resnet32_cifar.yaml", 32, nullptr},
        ModelCase{"mobilenet_v2.yaml", 32, nullptr},
        ModelCase{"mobilenet_v3_small.yaml", 32, nullptr},
        ModelCase{"efficientnet_b0.yaml", 32, nullptr},
        ModelCase{"shufflenet_v2.yaml", 32, nullptr}, ModelCase{"regnet_y_400mf.yaml", 32, nullptr},
        ModelCase{"convnext_tiny.yaml", 32, nullptr}, ModelCase{"unet.yaml", 32, nullptr},
        ModelCase{"unet_like.yaml", 32, nullptr}, ModelCase{"vit.yaml", 28, nullptr},
        ModelCase{"swin.yaml", 28, nullptr}),
    [](const ::testing::TestParamInfo<ModelCase>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      if (info.param.stem) name += std::string("_") + info.param.stem;
      return name;
    });

// The published layer counts and parameter totals pin the architectures.
TEST(ModelShapesTest, ParameterCountsMatchTheReferenceImplementations) {
  struct Expected {
    const char* file;
    int64_t params;  // trainable, as torchvision counts them
  };
  // torchvision: resnet18 11,689,512; resnet50 25,557,032; vgg16 138,357,544;
  // densenet121 7,978,856; mobilenet_v2 3,504,872; mobilenet_v3_small
  // 2,542,856; efficientnet_b0 5,288,548; shufflenet_v2_x1_0 2,278,604;
  // regnet_y_400mf 4,344,144; convnext_tiny 28,589,128. The CIFAR ResNet-32 of He et al. has 0.46 M
  // (463,018 with biases and identity shortcuts); its two 1x1 projection
  // shortcuts here add 544 + 2,112.
  const Expected cases[] = {{"resnet18.yaml", 11689512},
                            {"resnet50.yaml", 25557032},
                            {"vgg16.yaml", 138357544},
                            {"densenet121.yaml", 7978856},
                            {"resnet32_cifar.yaml", 463018 + 544 + 2112},
                            {"mobilenet_v2.yaml", 3504872},
                            {"mobilenet_v3_small.yaml", 2542856},
                            {"efficientnet_b0.yaml", 5288548},
                            {"shufflenet_v2.yaml", 2278604},
                            {"regnet_y_400mf.yaml", 4344144},
                            {"convnext_tiny.yaml", 28589128}};
  for (const auto& c : cases) {
    auto spec = LoadNetFile(std::string("models/") + c.file);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto net = Net::Build(*spec, {1, DeviceType::kCpu});
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    int64_t total = 0;
    for (int id = 0; id < (*net)->num_layers(); ++id) {
      for (const auto& p : (*net)->decl(id).params) {
        if (p.trainable) total += p.shape.numel();
      }
    }
    EXPECT_EQ(total, c.params) << c.file;
  }
}

}  // namespace
}  // namespace spill
