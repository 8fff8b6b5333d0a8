// The tools given what a careless or hostile user gives them, on a tiny
// trained network: class names that are not text, truncated or empty images,
// outputs that are the tools' own inputs or special files, checkpoints with
// transposed, extra or non-finite arrays, a training run whose loss becomes
// NaN, flags a tool declares, sizes in PiB. Every case ends in a clear error
// (or the right result), never a crash, a silent acceptance or a lost file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <opencv2/imgcodecs.hpp>

#include "framework/base/units.h"
#include "framework/io/npz.h"
#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = testing::ToolResult;
using testing::ReadAll;
using testing::RunTool;

// A tiny network with BatchNorm (a variance to refuse when negative) trained
// on generated idx files in `dir`/data, its checkpoint every `every` steps.
std::string WriteConfig(const std::string& dir, const std::string& name, double lr, int every) {
  const std::string path = dir + "/" + name + ".yaml";
  std::ofstream(path) << "model:\n  layers:\n"
                      << "    - {name: data, type: input, shape: [1, 28, 28]}\n"
                      << "    - {name: conv, type: convolution, filters: 2, kernel: 3, stride: 4}\n"
                      << "    - {name: bn, type: batch_norm}\n"
                      << "    - {name: fc, type: fully_connected, outputs: 10}\n"
                      << "    - {name: loss, type: softmax_loss}\n"
                      << "data: {dataset: fashion_mnist, path: " << dir << "/data, batch: 16}\n"
                      << "solver: {type: sgd, lr: " << lr << "}\n"
                      << "memory: {conv_timing: model}\n"
                      << "run: {epochs: 2, checkpoint_every: " << every << ", output: " << dir
                      << "/" << name << "}\n";
  return path;
}

class HostileToolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::FreshDir("spill_hostile_tools"));
    fs::create_directories(*dir_ + "/data");
    const auto pixel = [](uint32_t i, uint32_t p) {
      return static_cast<uint8_t>((i * 17 + p * (i % 5 + 1)) % 256);
    };
    testing::WriteIdx(*dir_ + "/data", "train", 64, pixel);
    testing::WriteIdx(*dir_ + "/data", "t10k", 16, pixel);
    const Result r =
        RunTool({"tools/train", "--config", WriteConfig(*dir_, "run", 0.05, 0), "--no-progress"});
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  static std::string Config() { return Path("run.yaml"); }
  static std::string Checkpoint() { return Path("run/checkpoint.npz"); }
  static Result Predict(const std::string& input, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"tools/predict", "--config", Config(), "--checkpoint",
                                     Checkpoint(),    "--input",  input};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunTool(args);
  }
  // The trained checkpoint with `edit` applied, saved as `name`.
  static std::string EditedCheckpoint(const std::string& name,
                                      const std::function<void(NpzArchive&)>& edit) {
    auto archive = ReadNpz(Checkpoint());
    EXPECT_TRUE(archive.ok()) << archive.status().ToString();
    edit(*archive);
    const std::string path = Path(name);
    EXPECT_TRUE(WriteNpzAtomically(path, *archive).ok());
    return path;
  }
  // `key`'s values with value `at` index 0.
  static void SetFirst(NpzArchive& archive, const std::string& key, float value) {
    NpyArray& array = archive.at(key);
    std::vector<float> values(array.floats(), array.floats() + array.numel());
    values[0] = value;
    array = NpyArray::Floats(array.shape, values.data());
  }
  static std::string Png() {
    const std::string png = Path("image.png");
    cv::Mat image(28, 28, CV_8UC1, cv::Scalar(90));
    EXPECT_TRUE(cv::imwrite(png, image));
    return png;
  }

  static std::string* dir_;
};

std::string* HostileToolsTest::dir_ = nullptr;

TEST_F(HostileToolsTest, ClassNamesMustBeUtf8TextAndNotBlank) {
  const std::string input = Path("data/t10k-images-idx3-ubyte"), labels = Path("labels.txt");
  std::string names;
  for (int c = 0; c < 10; ++c) names += "class" + std::to_string(c) + "\n";
  std::ofstream(labels) << names.substr(0, 14) << "\xff\xfe" << names.substr(14);
  Result r = Predict(input, {"--labels", labels, "--json"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(labels + ":3: the class name is not UTF-8 text (byte 1)"));
  std::ofstream(labels) << "  \n" << names.substr(7);
  r = Predict(input, {"--labels", labels});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(labels + ":1: the class name is blank"));
  std::ofstream(labels) << "caf\xc3\xa9\n" << names.substr(7);  // "café": UTF-8
  r = Predict(input, {"--labels", labels, "--json"});
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(HostileToolsTest, TruncatedImagesAndEmptyIdxFilesAreRefused) {
  const std::string jpeg = Path("image.jpg");
  cv::Mat image(28, 28, CV_8UC1, cv::Scalar(40));
  ASSERT_TRUE(cv::imwrite(jpeg, image));
  ASSERT_EQ(Predict(jpeg).code, 0);
  std::string bytes = ReadAll(jpeg);
  std::ofstream(jpeg, std::ios::binary) << bytes.substr(0, bytes.size() * 3 / 4);
  Result r = Predict(jpeg);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(jpeg + ": the JPEG is truncated"));
  const std::string png = Png();
  bytes = ReadAll(png);
  std::ofstream(png, std::ios::binary) << bytes.substr(0, bytes.size() - 12);  // IEND's chunk
  r = Predict(png);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the PNG is truncated"));
  const std::string empty = Path("empty-idx3-ubyte");
  std::ofstream(empty, std::ios::binary)
      << std::string("\0\0\x08\x03\0\0\0\0\0\0\0\x1c\0\0\0\x1c", 16);
  r = Predict(empty);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(empty + ": the idx file holds no images"));
}

// One image needs the network, not the training set.
TEST_F(HostileToolsTest, PredictRunsWithoutTheTrainingData) {
  std::string text = ReadAll(Config());
  text.replace(text.find(*dir_ + "/data"), (*dir_ + "/data").size(), Path("absent"));
  const std::string config = Path("nodata.yaml");
  std::ofstream(config) << text;
  const Result with = Predict(Png()),
               without = RunTool({"tools/predict", "--config", config, "--checkpoint", Checkpoint(),
                                  "--input", Png()});
  ASSERT_EQ(without.code, 0) << without.output;
  EXPECT_EQ(without.output, with.output);
}

TEST_F(HostileToolsTest, AnOutputThatIsAnInputOrASpecialFileIsRefused) {
  const std::string config_text = ReadAll(Config());
  Result r = RunTool({"tools/onnx_export", "--config", Config(), "--checkpoint", Checkpoint(),
                      "--output", Config()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("which the tool reads"));
  EXPECT_EQ(ReadAll(Config()), config_text);
  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = RunTool(
      {"tools/onnx_export", "--config", Config(), "--checkpoint", Checkpoint(), "--output", fifo});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("an output must be a regular file"));
  struct stat info;
  ASSERT_EQ(::stat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));  // not replaced by a regular file
  const std::string onnx = Path("run.onnx");
  r = RunTool(
      {"tools/onnx_export", "--config", Config(), "--checkpoint", Checkpoint(), "--output", onnx});
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunTool(
      {"tools/onnx_import", "--onnx", onnx, "--yaml", Path("same"), "--weights", Path("./same")});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("are the same file"));
  r = RunTool({"tools/onnx_import", "--onnx", onnx, "--yaml", onnx});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(ReadNpz(Checkpoint()).ok());
  const std::string checkpoint = ReadAll(Checkpoint());
  r = RunTool({"tools/train", "--config", Config(), "--overwrite", "--report", Checkpoint()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the run's checkpoint"));
  EXPECT_EQ(ReadAll(Checkpoint()), checkpoint);
}

// onnx_export checks the arrays as the checkpoint loader does.
TEST_F(HostileToolsTest, ExportRefusesTransposedAndExtraArrays) {
  const std::string transposed = EditedCheckpoint("transposed.npz", [](NpzArchive& a) {
    NpyArray& w = a.at("params/fc/weight");
    w.shape = {w.shape[1], w.shape[0], 1, 1};
  });
  Result r = RunTool({"tools/onnx_export", "--config", Config(), "--checkpoint", transposed,
                      "--output", Path("t.onnx")});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'params/fc/weight' is 98x10x1x1"));
  EXPECT_FALSE(fs::exists(Path("t.onnx")));
  const std::string extra = EditedCheckpoint(
      "extra.npz", [](NpzArchive& a) { a["params/ghost/weight"] = a.at("params/fc/bias"); });
  r = RunTool({"tools/onnx_export", "--config", Config(), "--checkpoint", extra, "--output",
               Path("e.onnx")});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("params/ghost/weight"));
}

TEST_F(HostileToolsTest, NonFiniteValuesAndNegativeVariancesAreRefusedAtLoad) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::string bad_weight =
      EditedCheckpoint("nan.npz", [&](NpzArchive& a) { SetFirst(a, "params/conv/weight", nan); });
  Result r = RunTool({"tools/eval", "--config", Config(), "--checkpoint", bad_weight});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'params/conv/weight' holds nan at index 0"));
  r = Predict(Png());
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunTool(
      {"tools/predict", "--config", Config(), "--checkpoint", bad_weight, "--input", Png()});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string bad_var = EditedCheckpoint(
      "var.npz", [](NpzArchive& a) { SetFirst(a, "params/bn/running_var", -0.5f); });
  r = RunTool({"tools/eval", "--config", Config(), "--checkpoint", bad_var});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("a variance cannot be negative"));
  const std::string bad_step =
      EditedCheckpoint("step.npz", [](NpzArchive& a) { a["meta/step"] = NpyArray::Int64(-5); });
  r = RunTool({"tools/train", "--config", Config(), "--resume", bad_step, "--max-steps", "1"});
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'meta/step' must not be negative; it is -5"));
}

// A learning rate so high that the statistics overflow within a few steps:
// training stops naming the step and the value, and the checkpoint of the
// last good step is still there, intact.
TEST_F(HostileToolsTest, ANanLossStopsTrainingAndKeepsTheLastGoodCheckpoint) {
  const Result r =
      RunTool({"tools/train", "--config", WriteConfig(*dir_, "diverge", 1000, 1), "--no-progress"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("training diverged: .* (nan|inf|-inf)"));
  EXPECT_THAT(r.output, Not(HasSubstr("no checkpoint of this run was written")));
  const std::string kept = Path("diverge/checkpoint.npz");
  EXPECT_THAT(r.output, HasSubstr("is kept in " + kept));
  EXPECT_EQ(RunTool({"tools/eval", "--config", Path("diverge.yaml"), "--checkpoint", kept}).code,
            0);
}

// A checkpoint that cannot be written (its path is a folder) is reported as
// that, not as a diverged run.
TEST_F(HostileToolsTest, AnUnwritableCheckpointIsNotReportedAsDivergence) {
  const std::string config = WriteConfig(*dir_, "blocked", 0.05, 1);
  fs::create_directories(Path("blocked/checkpoint.npz"));
  const Result r = RunTool(
      {"tools/train", "--config", config, "--overwrite", "--max-steps", "2", "--no-progress"});
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("checkpoint.npz"));
  EXPECT_THAT(r.output, HasSubstr("is a folder"));
  EXPECT_THAT(r.output, Not(HasSubstr("diverged")));
}

// An out-of-memory report says what is short: host memory rather than the
// device budget, or the window scheduler's tiny fraction of the budget.
TEST_F(HostileToolsTest, OutOfMemoryReportsNameWhatIsShort) {
  const std::vector<std::string> train = {"tools/train", "--config",
                                          WriteConfig(*dir_, "oom", 0.05, 0), "--no-progress"};
  std::vector<std::string> args = train;
  args.insert(args.end(),
              {"--memory", "superneurons", "--device-memory", "100KiB", "--host-memory", "1KiB"});
  Result r = RunTool(args);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("train: out of host memory"));
  EXPECT_THAT(r.output, HasSubstr("(raise memory.host_budget or --host-memory)"));
  EXPECT_THAT(r.output, Not(HasSubstr("raise memory.device_budget")));
  args = train;
  args.insert(args.end(), {"--memory", "window", "--window-budget", "1e-9x"});
  r = RunTool(args);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("with 1x this mode needs [0-9.]+ KiB"));
}

TEST_F(HostileToolsTest, ExperimentToolsHonourTheirFlags) {
  Result r =
      RunTool({"tools/deepest", "--device-memory", "64MiB", "--batch", "1", "--set", "n1=-1"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--set n1: expected a number of units"));
  // Images of half the side hold a quarter of the activations: about four
  // times the batch fits.
  const auto widest = [](const std::string& size) -> int64_t {
    const Result r = RunTool({"tools/widest", "--config", "models/resnet50.yaml", "--device-memory",
                              "1GiB", "--size", size});
    EXPECT_EQ(r.code, 0) << r.output;
    const size_t at = r.output.find("first_fit: ");
    return at == std::string::npos ? 0 : std::stoll(r.output.substr(at + 11));
  };
  const int64_t small = widest("32"), large = widest("64");
  ASSERT_GT(large, 0);
  EXPECT_GT(small, 3 * large);
}

TEST(UnitsTest, SizesGoUpToPebibytes) {
  EXPECT_EQ(*ParseBytes("1PiB"), size_t{1} << 50);
  EXPECT_EQ(*ParseBytes("2PB"), size_t{2000000000000000});
  EXPECT_EQ(FormatBytes(static_cast<double>(size_t{1} << 50)), "1.00 PiB");
  EXPECT_THAT(ParseBytes("1QiB").status().ToString(), HasSubstr("PiB"));
}

}  // namespace
}  // namespace spill
