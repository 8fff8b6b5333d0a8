// eval, predict and train --init as a user runs them: a tiny network trained
// on generated idx files, then its checkpoint evaluated (the test accuracy
// train reported, exactly, under two memory modes), scored image by image
// (probabilities that sum to one, top-1 hits equal to eval's count), and
// fine-tuned into a network with more classes (all but the classifier
// loaded); class names from a labels file; the network exported to ONNX and
// imported back evaluates alike. Bad inputs end with an error naming the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <thread>

#include "framework/io/npz.h"
#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr int kLimitSeconds = 60;
constexpr int kTestImages = 20;  // not a multiple of the batch: the last one is padded

using Result = testing::ToolResult;
using testing::ReadAll;

Result RunTool(const std::vector<std::string>& args, bool with_stderr = true) {
  return testing::RunTool(args, kLimitSeconds, with_stderr);
}

// Images whose pixels depend on the label, so the network learns something.
void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count) {
  testing::WriteIdx(dir, prefix, count, [](uint32_t i, uint32_t p) {
    return static_cast<uint8_t>((i * 31 + p * (i % 7 + 1)) % 256);
  });
}

// A tiny network with BatchNorm (its running statistics must be restored).
std::string WriteConfig(const std::string& dir, const std::string& name, int classes, double lr) {
  const std::string path = dir + "/" + name + ".yaml";
  std::ofstream(path) << "model:\n  layers:\n"
                      << "    - {name: data, type: input, shape: [1, 28, 28]}\n"
                      << "    - {name: conv, type: convolution, filters: 2, kernel: 3, stride: 4}\n"
                      << "    - {name: bn, type: batch_norm}\n"
                      << "    - {name: fc, type: fully_connected, outputs: " << classes << "}\n"
                      << "    - {name: loss, type: softmax_loss}\n"
                      << "data: {dataset: fashion_mnist, path: " << dir << "/data, batch: 16}\n"
                      << "solver: {type: sgd, lr: " << lr << "}\n"
                      << "memory: {conv_timing: model}\n"
                      << "run: {epochs: 3, output: " << dir << "/" << name << "}\n";
  return path;
}

class EvalPredictTest : public ::testing::Test {
 protected:
  // One trained checkpoint for every test.
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/spill_eval_predict");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_ + "/data");
    WriteIdx(*dir_ + "/data", "train", 64);
    WriteIdx(*dir_ + "/data", "t10k", kTestImages);
    const std::string config = WriteConfig(*dir_, "run", 10, 0.05);
    const Result r = RunTool(
        {"tools/train", "--config", config, "--no-progress", "--report", *dir_ + "/report.json"});
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string Config() { return *dir_ + "/run.yaml"; }
  static std::string Checkpoint() { return *dir_ + "/run/checkpoint.npz"; }
  static Json Eval(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"tools/eval",   "--config",   Config(),
                                     "--checkpoint", Checkpoint(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = RunTool(args, /*with_stderr=*/false);
    EXPECT_EQ(r.code, 0) << r.output;
    return Json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  }

  static std::string* dir_;
};

std::string* EvalPredictTest::dir_ = nullptr;

TEST_F(EvalPredictTest, EvalReproducesTrainsTestAccuracyUnderTwoMemoryModes) {
  const Json report = Json::parse(ReadAll(*dir_ + "/report.json"));
  const double accuracy = report["test_accuracy"], loss = report["test_loss"];
  ASSERT_GT(accuracy, 0.1);  // it learned something, so a wrong restore shows
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{}, {"--memory", "superneurons", "--device-memory", "1MiB"}}) {
    const Json eval = Eval(mode);
    ASSERT_TRUE(eval.is_object());
    EXPECT_EQ(eval["test_accuracy"].get<double>(), accuracy);
    EXPECT_EQ(eval["test_loss"].get<double>(), loss);
    EXPECT_EQ(eval["images"].get<int>(), kTestImages);
  }
  EXPECT_EQ(Eval({"--memory", "superneurons"})["memory_mode"], "superneurons");
}

TEST_F(EvalPredictTest, PredictSumsToOneAndAgreesWithEval) {
  const Json eval = Eval({});
  const Result r =
      RunTool({"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(), "--input",
               *dir_ + "/data/t10k-images-idx3-ubyte", "--top", "10", "--json"},
              false);
  ASSERT_EQ(r.code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  int count = 0, correct = 0;
  while (std::getline(lines, line)) {
    const Json example = Json::parse(line);
    ASSERT_EQ(example["index"].get<int>(), count);
    ASSERT_EQ(example["top"].size(), 10u);
    double sum = 0, previous = 1;
    for (const Json& top : example["top"]) {
      const double p = top["probability"];
      EXPECT_LE(p, previous);  // most likely first
      previous = p;
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    correct += example["top"][0]["class"].get<int>() == count % 10;  // the labels WriteIdx wrote
    ++count;
  }
  EXPECT_EQ(count, kTestImages);
  EXPECT_EQ(correct, eval["correct"].get<int>());
}

TEST_F(EvalPredictTest, PredictReadsAnImageAndShowsTopK) {
  // A 40x30 color PNG: converted to gray and resized to 28x28 like the data.
  const std::string png = *dir_ + "/image.png";
  cv::Mat image(30, 40, CV_8UC3);
  for (int y = 0; y < image.rows; ++y) {
    for (int x = 0; x < image.cols; ++x) image.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 6, y * 8, 90);
  }
  ASSERT_TRUE(cv::imwrite(png, image));
  Result r = RunTool({"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(),
                      "--input", png, "--top", "3"},
                     false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output,
              ::testing::MatchesRegex("0: [0-9] \\(0\\.[0-9]{4}\\) [0-9] \\(0\\.[0-9]{4}\\) "
                                      "[0-9] \\(0\\.[0-9]{4}\\)\n"));
  std::ofstream(png) << "not a png";
  r = RunTool(
      {"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(), "--input", png});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr(png + ": cannot decode image"));
}

TEST_F(EvalPredictTest, PredictPrintsClassNamesFromALabelsFile) {
  const std::string labels = *dir_ + "/classes.txt";
  std::ofstream(labels) << "tshirt\ntrouser\npullover\ndress\ncoat\nsandal\nshirt\nsneaker\nbag\n"
                        << "boot\n";
  const std::string input = *dir_ + "/data/t10k-images-idx3-ubyte";
  Result r = RunTool({"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(),
                      "--input", input, "--top", "2", "--labels", labels},
                     false);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\n3: [0-9] [a-z]+ \\(0\\.[0-9]{4}\\) [0-9] "
                                                 "[a-z]+ \\(0\\.[0-9]{4}\\)\n"));
  r = RunTool({"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(), "--input",
               input, "--top", "1", "--labels", labels, "--json"},
              false);
  ASSERT_EQ(r.code, 0) << r.output;
  const Json first = Json::parse(r.output.substr(0, r.output.find('\n')));
  const int64_t top = first["top"][0]["class"];
  const char* const names[] = {"tshirt", "trouser", "pullover", "dress", "coat",
                               "sandal", "shirt",   "sneaker",  "bag",   "boot"};
  EXPECT_EQ(first["top"][0]["name"], names[top]);
  std::ofstream(labels) << "only\nthree\nnames\n";
  r = RunTool({"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(), "--input",
               input, "--labels", labels});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr(labels + ": 3 class names (lines) for a network of 10 classes"));
}

// The trained network exported to ONNX, then named by a config as its model:
// eval of the same checkpoint gives the same figures, bit for bit, and train
// starts from the ONNX file's weights.
TEST_F(EvalPredictTest, OnnxExportImportsBackAndEvaluatesAlike) {
  const std::string onnx = *dir_ + "/run.onnx";
  Result r = RunTool(
      {"tools/onnx_export", "--config", Config(), "--checkpoint", Checkpoint(), "--output", onnx});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("onnx::checker passed"));
  std::string text = ReadAll(Config());
  const size_t begin = text.find("model:"), end = text.find("data:");
  text.replace(begin, end - begin, "model: {onnx: " + onnx + "}\n");
  text.replace(text.find("output: ") + 8, std::string::npos, *dir_ + "/from_onnx}\n");
  const std::string config = *dir_ + "/from_onnx.yaml";
  std::ofstream(config) << text;
  const Json original = Eval({});
  r = RunTool({"tools/eval", "--config", config, "--checkpoint", Checkpoint(), "--json"}, false);
  ASSERT_EQ(r.code, 0) << r.output;
  const Json imported = Json::parse(r.output, nullptr, false);
  EXPECT_EQ(imported["test_accuracy"], original["test_accuracy"]);
  EXPECT_EQ(imported["test_loss"], original["test_loss"]);
  r = RunTool({"tools/train", "--config", config, "--no-progress", "--max-steps", "1"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("initialized from " + onnx + ": 8 of 8 parameters loaded"));
  r = RunTool({"tools/onnx_import", "--onnx", onnx, "--yaml", *dir_ + "/net.yaml", "--weights",
               *dir_ + "/net.npz"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(ReadAll(*dir_ + "/net.yaml"), HasSubstr("{name: \"conv\", type: convolution"));
  const NpzArchive weights = *ReadNpz(*dir_ + "/net.npz");
  EXPECT_EQ(weights.size(), 8u);
  EXPECT_EQ(weights.count("params/bn/running_var"), 1u);
}

TEST_F(EvalPredictTest, BadInputsNameTheFile) {
  Result r = RunTool({"tools/eval", "--config", Config(), "--checkpoint", *dir_ + "/missing.npz"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("missing.npz' does not exist"));
  r = RunTool({"tools/eval", "--config", Config(), "--checkpoint", Config()});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("run.yaml' is not a readable .npz checkpoint"));
  const std::string twelve = WriteConfig(*dir_, "twelve", 12, 0.05);
  r = RunTool({"tools/eval", "--config", twelve, "--checkpoint", Checkpoint()});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("checkpoint '" + Checkpoint() +
                                  "': 'params/fc/weight' is "
                                  "10x98x1x1"));
  r = RunTool(
      {"tools/predict", "--config", Config(), "--checkpoint", Checkpoint(), "--input", Config()});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr(Config() + ": not an idx image file"));
}

// Fine-tuning into 12 classes: everything but the classifier is loaded. With
// a learning rate of 1e-20 the loaded weights reach the new checkpoint
// unchanged to within 1e-12, while a fresh initialization is far from them.
TEST_F(EvalPredictTest, InitLoadsTheTensorsThatMatchAndListsTheRest) {
  const std::string config = WriteConfig(*dir_, "finetune", 12, 1e-20);
  const Result r = RunTool({"tools/train", "--config", config, "--no-progress", "--max-steps", "1",
                            "--init", Checkpoint()});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("6 of 8 parameters loaded: conv/weight, conv/bias, bn/gamma, "
                                  "bn/beta, bn/running_mean, bn/running_var\n"));
  EXPECT_THAT(r.output, HasSubstr("2 freshly initialized: fc/weight (checkpoint 10x98x1x1 <f4, "
                                  "network 12x98x1x1), fc/bias"));
  auto before = ReadNpz(Checkpoint());
  auto after = ReadNpz(*dir_ + "/finetune/checkpoint.npz");
  ASSERT_TRUE(before.ok() && after.ok());
  for (const char* name : {"params/conv/weight", "params/conv/bias", "params/bn/gamma"}) {
    const NpyArray &a = before->at(name), &b = after->at(name);
    ASSERT_EQ(a.shape, b.shape) << name;
    for (size_t i = 0; i < a.data.size() / sizeof(float); ++i) {
      EXPECT_NEAR(a.floats()[i], b.floats()[i], 1e-12) << name << " " << i;
    }
  }
  EXPECT_NE(before->at("params/fc/weight").shape, after->at("params/fc/weight").shape);
  const Result both =
      RunTool({"tools/train", "--config", config, "--resume", "--init", Checkpoint()});
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.output, HasSubstr("--resume continues a run"));
}

}  // namespace
}  // namespace spill
