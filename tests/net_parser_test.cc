// The YAML network format: blocks, repeats, parameters, includes, and one
// test per class of bad input, each checking that the message names the
// file, the line and the layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "framework/base/units.h"
#include "framework/config/expr.h"
#include "framework/config/yaml_reader.h"
#include "framework/graph/net.h"
#include "layers/input_layer.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

std::string BuildError(const std::string& yaml) {
  auto spec = ParseNetString(yaml, "net.yaml");
  if (!spec.ok()) return spec.status().message();
  auto net = Net::Build(*spec, {2, DeviceType::kCpu});
  if (!net.ok()) return net.status().message();
  return "";
}

const char kHeader[] = "layers:\n  - {name: data, type: input, shape: [1, 8, 8]}\n";

TEST(NetParserTest, LinearChainDefaultsToPreviousLayer) {
  NetSpec spec = testing::MustParse(std::string(kHeader) +
                                    "  - {name: conv, type: convolution, filters: 2, kernel: 3}\n"
                                    "  - {name: relu, type: relu}\n");
  ASSERT_EQ(spec.layers.size(), 3u);
  EXPECT_TRUE(spec.layers[0].inputs.empty());
  EXPECT_EQ(spec.layers[1].inputs, std::vector<std::string>{"data"});
  EXPECT_EQ(spec.layers[2].inputs, std::vector<std::string>{"conv"});
  EXPECT_EQ(spec.layers[2].where.line, 4);
}

TEST(NetParserTest, BlocksRepeatAndChain) {
  NetSpec spec = testing::MustParse("params: {width: 4}\n" +
                                    std::string(testing::kResidualUnitBlock) + R"(layers:
  - {name: data, type: input, shape: [4, 8, 8]}
  - {name: res, block: unit, repeat: 3, args: {filters: $width}}
  - {name: out, type: relu}
)");
  std::vector<std::string> names;
  for (const auto& l : spec.layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"data", "res.1/conv", "res.1/add", "res.2/conv",
                                             "res.2/add", "res.3/conv", "res.3/add", "out"}));
  EXPECT_EQ(spec.layers[3].inputs, std::vector<std::string>{"res.1/add"});
  EXPECT_EQ(spec.layers[4].inputs, (std::vector<std::string>{"res.2/conv", "res.1/add"}));
  EXPECT_EQ(spec.layers[7].inputs, std::vector<std::string>{"res.3/add"});
  EXPECT_EQ(spec.layers[1].params["filters"].as<int>(), 4);
}

TEST(NetParserTest, ExpressionsInterpolationAndIndex) {
  NetSpec spec = testing::MustParse(R"(
params: {base: 8, kind: wide}
blocks:
  wide_unit:
    params: {scale: 1}
    layers:
      - {name: "conv${i}", type: convolution, filters: "${base * scale + i}", kernel: 1}
layers:
  - {name: data, type: input, shape: [2, 4, 4]}
  - {name: u, block: "${kind}_unit", repeat: 2, args: {scale: "${(base - 4) / 2}"}}
)");
  ASSERT_EQ(spec.layers.size(), 3u);
  EXPECT_EQ(spec.layers[1].name, "u.1/conv1");
  EXPECT_EQ(spec.layers[1].params["filters"].as<int>(), 8 * 2 + 1);
  EXPECT_EQ(spec.layers[2].name, "u.2/conv2");
  EXPECT_EQ(spec.layers[2].params["filters"].as<int>(), 18);
}

TEST(NetParserTest, RepeatZeroPassesInputThrough) {
  NetSpec spec = testing::MustParse(R"(
blocks:
  unit: {layers: [{name: r, type: relu}]}
layers:
  - {name: data, type: input, shape: [2, 4, 4]}
  - {name: none, block: unit, repeat: 0}
  - {name: after, type: relu, inputs: [none]}
)");
  ASSERT_EQ(spec.layers.size(), 2u);
  EXPECT_EQ(spec.layers[1].inputs, std::vector<std::string>{"data"});
}

TEST(NetParserTest, OverridesReplaceModelParameters) {
  auto spec = LoadNetFile("models/resnet18.yaml", {{"classes", YAML::Node(10)}});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->layers.back().name, "head/loss");
  bool found = false;
  for (const auto& l : spec->layers) {
    if (l.name == "head/fc") {
      EXPECT_EQ(l.params["outputs"].as<int>(), 10);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(NetParserTest, IncludesResolveRelativeToTheFile) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "spill_include_test";
  fs::create_directories(dir / "lib");
  std::ofstream(dir / "lib" / "blocks.yaml") << "blocks:\n  twice:\n    layers:\n      - {name: a, "
                                                "type: relu}\n      - {name: b, type: relu}\n";
  std::ofstream(dir / "net.yaml") << "include: [lib/blocks.yaml]\nlayers:\n"
                                     "  - {name: data, type: input, shape: [1, 2, 2]}\n"
                                     "  - {name: t, block: twice}\n";
  auto spec = LoadNetFile((dir / "net.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->layers.size(), 3u);
  EXPECT_EQ(spec->layers[2].where.file, (dir / "lib" / "blocks.yaml").lexically_normal().string());
}

TEST(NetParserTest, DeepResNetIsAFewLinesForThousandsOfUnits) {
  auto spec = LoadNetFile("models/resnet_deep.yaml", {{"n1", YAML::Node(6)},
                                                      {"n2", YAML::Node(32)},
                                                      {"n3", YAML::Node(2456)},
                                                      {"n4", YAML::Node(6)}});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  // 2,500 bottleneck units of 10 layers, 4 projections of 2, stem, head, data.
  EXPECT_EQ(spec->layers.size(), 2500u * 10 + 4 * 2 + 4 + 3 + 1);
}

// --- one test per class of bad input -------------------------------------

TEST(NetErrorsTest, UnknownKeyListsKnownKeys) {
  std::string error = BuildError(std::string(kHeader) +
                                 "  - {name: conv1, type: convolution, filters: 2, kernal: 3}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("layer 'conv1' (convolution)"));
  EXPECT_THAT(error, HasSubstr("kernel: is required"));
  error = BuildError(std::string(kHeader) +
                     "  - {name: conv1, type: convolution, filters: 2, kernel: 3, strid: 2}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("unknown key 'strid'"));
  EXPECT_THAT(error, HasSubstr("stride"));
  EXPECT_THAT(error, HasSubstr("dilation"));
}

TEST(NetErrorsTest, UnknownTypeListsKnownTypes) {
  std::string error = BuildError(std::string(kHeader) + "  - {name: act, type: relu7}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("layer 'act'"));
  EXPECT_THAT(error, HasSubstr("unknown layer type 'relu7'"));
  EXPECT_THAT(error, HasSubstr("known types: "));
  EXPECT_THAT(error, HasSubstr("relu"));
  EXPECT_THAT(error, HasSubstr("softmax_loss"));
}

TEST(NetErrorsTest, MissingInputSuggestsAName) {
  std::string error =
      BuildError(std::string(kHeader) +
                 "  - {name: pool5, type: max_pool, kernel: 2}\n"
                 "  - {name: fc, type: fully_connected, outputs: 2, inputs: [pool6]}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:4"));
  EXPECT_THAT(error, HasSubstr("layer 'fc' reads 'pool6', which is not defined"));
  EXPECT_THAT(error, HasSubstr("did you mean 'pool5'"));
}

TEST(NetErrorsTest, CycleIsNamed) {
  std::string error = BuildError(std::string(kHeader) +
                                 "  - {name: a, type: add, inputs: [data, c]}\n"
                                 "  - {name: b, type: relu, inputs: [a]}\n"
                                 "  - {name: c, type: relu, inputs: [b]}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:"));
  EXPECT_THAT(error, HasSubstr("cycle"));
  EXPECT_THAT(error, HasSubstr("a -> b -> c -> a"));
}

TEST(NetErrorsTest, ShapeMismatchNamesLayerAndShapes) {
  std::string error = BuildError(std::string(kHeader) +
                                 "  - {name: conv, type: convolution, filters: 3, kernel: 3}\n"
                                 "  - {name: sum, type: add, inputs: [conv, data]}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:4"));
  EXPECT_THAT(error, HasSubstr("layer 'sum' (add)"));
  EXPECT_THAT(error, HasSubstr("input shapes differ"));
  EXPECT_THAT(error, HasSubstr("conv is 2x3x6x6"));
  EXPECT_THAT(error, HasSubstr("data is 2x1x8x8"));
}

TEST(NetErrorsTest, KernelLargerThanInput) {
  std::string error = BuildError(std::string(kHeader) +
                                 "  - {name: big, type: convolution, filters: 3, kernel: 9}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("does not fit"));
}

TEST(NetErrorsTest, BadValueNamesKeyAndExpectation) {
  std::string error =
      BuildError(std::string(kHeader) + "  - {name: d, type: dropout, ratio: lots}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("ratio: must be a number in [0, 1) (got 'lots')"));
  error = BuildError(std::string(kHeader) + "  - {name: d, type: dropout, ratio: 1.5}\n");
  EXPECT_THAT(error, HasSubstr("ratio: must be a number in [0, 1) (got '1.5')"));
}

TEST(NetErrorsTest, WrongNumberOfInputs) {
  std::string error =
      BuildError(std::string(kHeader) + "  - {name: r, type: relu, inputs: [data, data]}\n");
  EXPECT_THAT(error, HasSubstr("net.yaml:3"));
  EXPECT_THAT(error, HasSubstr("takes 1 input, got 2"));
}

TEST(NetErrorsTest, ErrorInsideBlockNamesTheInstance) {
  std::string error = BuildError(R"(
blocks:
  unit:
    layers:
      - {name: conv, type: convolution, filters: 2, kernel: 3, padd: 1}
layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: u, block: unit, repeat: 2}
)");
  EXPECT_THAT(error, HasSubstr("net.yaml:5"));
  EXPECT_THAT(error, HasSubstr("block 'unit' instantiated as 'u.1' at net.yaml:8"));
  EXPECT_THAT(error, HasSubstr("layer 'u.1/conv'"));
  EXPECT_THAT(error, HasSubstr("unknown key 'padd'"));
}

TEST(NetErrorsTest, BlockProblems) {
  std::string base =
      "blocks:\n  unit:\n    params: {filters: null}\n    layers:\n"
      "      - {name: c, type: convolution, filters: $filters, kernel: 1}\n"
      "layers:\n  - {name: data, type: input, shape: [1, 4, 4]}\n";
  EXPECT_THAT(BuildError(base + "  - {name: u, block: unti}\n"),
              HasSubstr("net.yaml:8: 'u' uses unknown block 'unti'; defined blocks: unit"));
  EXPECT_THAT(BuildError(base + "  - {name: u, block: unit}\n"),
              HasSubstr("block 'unit' needs the argument 'filters'"));
  EXPECT_THAT(BuildError(base + "  - {name: u, block: unit, args: {filters: 2, width: 3}}\n"),
              HasSubstr("block 'unit' has no parameter 'width'"));
  EXPECT_THAT(BuildError(base + "  - {name: u, block: unit, args: {filters: 2}, repeet: 2}\n"),
              HasSubstr("unknown key 'repeet' in a block instance"));
}

TEST(NetErrorsTest, ExpressionsAndParameters) {
  EXPECT_THAT(
      BuildError(std::string(kHeader) +
                 "  - {name: c, type: convolution, filters: \"${width * 2}\", kernel: 1}\n"),
      HasSubstr("unknown parameter 'width'"));
  EXPECT_THAT(BuildError("params: {w: 2}\n" + std::string(kHeader) +
                         "  - {name: c, type: convolution, filters: \"${w * }\", kernel: 1}\n"),
              HasSubstr("net.yaml:4"));
  auto spec = ParseNetString(
      "params: {classes: 10}\nlayers:\n  - {name: d, type: input, shape: [1, 2, 2]}\n", "net.yaml",
      {{"clases", YAML::Node(3)}});
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("unknown model parameter 'clases'"));
  EXPECT_THAT(spec.status().message(), HasSubstr("has: classes"));
}

TEST(NetErrorsTest, FileProblems) {
  EXPECT_THAT(BuildError("layers: [\n  {name: a, type: relu\n"), HasSubstr("net.yaml:"));
  EXPECT_THAT(BuildError("layer:\n  - {name: a, type: relu}\n"),
              HasSubstr("net.yaml:1: unknown key 'layer' in a network file"));
  EXPECT_THAT(BuildError("layers:\n  - {name: r, type: relu}\n"), HasSubstr("no input layer"));
  auto missing = LoadNetFile("models/no_such_model.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("models/no_such_model.yaml"));
  EXPECT_THAT(BuildError(std::string(kHeader) + "  - {name: data, type: relu}\n"),
              HasSubstr("already used at net.yaml:2"));
}

TEST(ExprTest, Arithmetic) {
  Variables vars = {{"a", YAML::Node(7)}, {"b", YAML::Node(2)}, {"f", YAML::Node(0.5)}};
  EXPECT_EQ(*EvaluateExpression("a * b + 1", vars), "15");
  EXPECT_EQ(*EvaluateExpression("(a + b) / 2", vars), "4");
  EXPECT_EQ(*EvaluateExpression("a % b - -3", vars), "4");
  EXPECT_EQ(*EvaluateExpression("a * f", vars), "3.5");
  EXPECT_FALSE(EvaluateExpression("a / 0", vars).ok());
  EXPECT_FALSE(EvaluateExpression("a +", vars).ok());
}

TEST(ExprTest, CheckedAtTheEdgesOf64Bits) {
  Variables vars = {{"max", YAML::Node("9223372036854775807")}};
  EXPECT_EQ(*EvaluateExpression("-max - 1", vars), "-9223372036854775808");
  EXPECT_EQ(*EvaluateExpression("(-max - 1) / 1", vars), "-9223372036854775808");
  EXPECT_EQ(*EvaluateExpression("7 / -2", vars), "-3");  // C semantics
  EXPECT_EQ(*EvaluateExpression("7 % -2", vars), "1");
  for (const char* overflow : {"max + 1", "-max - 2", "max * 2", "(-max - 1) / -1",
                               "(-max - 1) % -1", "-(-max - 1)", "99999999999999999999"}) {
    auto result = EvaluateExpression(overflow, vars);
    ASSERT_FALSE(result.ok()) << overflow;
    EXPECT_THAT(result.status().message(),
                ::testing::AnyOf(HasSubstr("integer overflow"), HasSubstr("bad number")))
        << overflow;
  }
  EXPECT_THAT(EvaluateExpression("1e308 * 10", vars).status().message(),
              HasSubstr("not a finite number"));
  EXPECT_THAT(EvaluateExpression(std::string(65, '(') + "1" + std::string(65, ')'), vars)
                  .status()
                  .message(),
              HasSubstr("nested deeper than 64 levels"));
  EXPECT_EQ(*EvaluateExpression(std::string(64, '(') + "1" + std::string(64, ')'), vars), "1");
}

// --- the strict reader's conversions and messages ---------------------------

TEST(YamlReaderTest, ScalarsConvertOneWay) {
  EXPECT_EQ(*ParseInt64("-42"), -42);
  EXPECT_EQ(*ParseInt64("+7"), 7);
  for (const char* bad : {"", "1.0", "0x10", "1_000", " 1", "1 ", "9223372036854775808", "-"}) {
    EXPECT_FALSE(ParseInt64(bad).ok()) << bad;
  }
  EXPECT_EQ(*ParseFiniteDouble("5e-4"), 5e-4);
  for (const char* bad : {"nan", ".inf", "inf", "1e999", "1.5x", ""}) {
    EXPECT_FALSE(ParseFiniteDouble(bad).ok()) << bad;
  }
  EXPECT_TRUE(*ParseBool("Yes"));
  EXPECT_FALSE(*ParseBool("FALSE"));
  for (const char* bad : {"on", "off", "1", "0", "y", "tru"})
    EXPECT_FALSE(ParseBool(bad).ok()) << bad;
}

TEST(YamlReaderTest, MapsCheckTypesRangesAndKeys) {
  auto root = LoadYamlText("a: 3\nb: [4, 5]\nc: 2GiB\nd: {e: 0.5}\nf: x\n", "t.yaml");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  YamlOrigin origin;
  origin.file = "t.yaml";
  YamlMap map(*root, origin, "");
  EXPECT_EQ(map.Int("a", 0, 0, 10), 3);
  EXPECT_EQ(map.Pair("b", {1, 1}, 1, 9), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(map.Bytes("c", 0, 1, size_t{4} << 30), size_t{2} << 30);
  YamlMap d = map.Section("d");
  EXPECT_EQ(d.Float("e", 0, Bounds::AboveTo(0, 1)), 0.5);
  EXPECT_EQ(d.Float("missing", 0.25, Bounds::Closed(0, 1)), 0.25);
  EXPECT_TRUE(d.Finish().ok());
  EXPECT_THAT(map.Finish().message(), HasSubstr("t.yaml:5: unknown key 'f'; expected one of: a"));
  YamlMap again(*root, origin, "top");
  EXPECT_EQ(again.Int("a", 1, 4, 10), 1);  // out of range: the fallback, and an error
  EXPECT_THAT(again.Finish().message(),
              HasSubstr("t.yaml:1: top.a: must be an integer in [4, 10] (got '3')"));
  EXPECT_THAT(LoadYamlText("a: 1\na: 2\n", "t.yaml").status().message(),
              HasSubstr("t.yaml:2: duplicate key 'a' (first at line 1)"));
  EXPECT_THAT(LoadYamlText("? [1]\n: 2\n", "t.yaml").status().message(),
              HasSubstr("a key must be a plain name"));
}

}  // namespace
}  // namespace spill
