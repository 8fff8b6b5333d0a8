// Hostile input whose right outcome is known: each case is nonsense that
// must be REJECTED, with an error that names the file and line or the field -
// never silently accepted - and must end quickly. One test per class of the
// inputs that used to crash, hang or be accepted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "framework/graph/net.h"
#include "framework/io/npz.h"
#include "layers/cpu/conv_timer.h"
#include "tests/testing/fuzz_harness.h"

namespace spill {
namespace fuzz {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const char kHead[] = "layers:\n  - {name: data, type: input, shape: [1, 8, 8]}\n";
const char kTail[] =
    "  - {name: fc, type: fully_connected, outputs: 3}\n  - {name: loss, type: softmax_loss}\n";

// The error of parsing and building `yaml` (as "net.yaml"), or "" if accepted.
std::string NetError(const std::string& yaml) {
  Tally tally;
  Status status = RunCase(
      "targeted network",
      [&]() -> Status {
        SPILL_ASSIGN_OR_RETURN(NetSpec spec, ParseNetString(yaml, "net.yaml"));
        return Net::Build(spec, {2, DeviceType::kCpu}).status();
      },
      &tally);
  return status.message();
}

std::string ConfigError(const std::string& yaml) {
  Tally tally;
  return RunCase(
             "targeted config", [&] { return ConfigPipeline(yaml, "bad.yaml"); }, &tally)
      .message();
}

const char kConfig[] = R"(model:
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv, type: convolution, filters: 4, kernel: 3}
    - {name: fc, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: /nowhere, batch: 8}
solver: {type: sgd, lr: 0.1}
run: {epochs: 1}
)";

class TargetedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""}); }
};

// ------------------------------------------------------------------ networks

TEST_F(TargetedTest, UnknownAndDuplicateKeysNameTheLine) {
  std::string e =
      NetError(std::string(kHead) +
               "  - {name: c, type: convolution, filters: 2, kernel: 3, kernal: 3}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:3"));
  EXPECT_THAT(e, HasSubstr("unknown key 'kernal'"));
  e = NetError(std::string(kHead) + "  - {name: c, type: relu, name: d}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:3: duplicate key 'name' (first at line 3)"));
  e = NetError(std::string(kHead) + kTail + "layers: []\n");
  EXPECT_THAT(e, HasSubstr("net.yaml:5: duplicate key 'layers' (first at line 1)"));
  e = NetError(std::string("layres: []\n") + kHead + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:1: unknown key 'layres'"));
}

TEST_F(TargetedTest, GroupsZeroIsARangeError) {
  const std::string e =
      NetError(std::string(kHead) +
               "  - {name: c, type: convolution, filters: 2, kernel: 3, groups: 0}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:3"));
  EXPECT_THAT(e, HasSubstr("groups: must be an integer in [1, 1048576] (got '0')"));
}

TEST_F(TargetedTest, ExpressionTrapsAreErrors) {
  const std::string conv = "  - {name: c, type: convolution, kernel: 1, filters: ";
  std::string e = NetError(kHead + conv + "\"${(-9223372036854775807 - 1) / -1}\"}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:3"));
  EXPECT_THAT(e, HasSubstr("integer overflow"));
  e = NetError(kHead + conv + "\"${9223372036854775807 * 2}\"}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("integer overflow"));
  e = NetError(kHead + conv + "\"${4 % 0}\"}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("division by zero"));
  const std::string deep(100000, '(');
  e = NetError(kHead + conv + "\"${" + deep + "1" + std::string(100000, ')') + "}\"}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("nested deeper than 64 levels"));
  e = NetError(kHead + conv + "\"${" + std::string(100000, '-') + "1}\"}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("nested deeper than 64 levels"));
}

TEST_F(TargetedTest, DeepNestingAliasBombsAndCyclesInYaml) {
  std::string e = NetError("params: {x: " + std::string(5000, '[') + std::string(5000, ']') +
                           "}\n" + kHead + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml"));
  EXPECT_FALSE(e.empty());
  std::string bomb = "params:\n  a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string p = "*a" + std::to_string(i - 1);
    bomb += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + p + ", " + p + ", " +
            p + ", " + p + ", " + p + ", " + p + ", " + p + ", " + p + ", " + p + ", " + p + "]\n";
  }
  e = NetError(bomb + kHead + kTail);
  EXPECT_THAT(e, HasSubstr("more than 1048576 nodes"));
  e = NetError("params: {x: &a [1, *a]}\n" + std::string(kHead) + kTail);
  EXPECT_THAT(e, HasSubstr("nested deeper than 64 levels"));
}

// The ceiling is checked before any layer is made (the suite's watchdog ends
// a run that expands the bomb instead).
TEST_F(TargetedTest, RepeatBombsEndAtTheLayerCeiling) {
  std::string e =
      NetError("blocks:\n  b: {layers: [{name: r, type: relu}]}\n" + std::string(kHead) +
               "  - {name: x, block: b, repeat: 1000000000}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("net.yaml:5: repeat: must be an integer in [0, 524288]"));
  e = NetError(
      "blocks:\n"
      "  b0: {layers: [{name: r, type: relu}]}\n"
      "  b1: {layers: [{name: x, block: b0, repeat: 1024}]}\n"
      "  b2: {layers: [{name: x, block: b1, repeat: 1024}]}\n" +
      std::string(kHead) + "  - {name: y, block: b2, repeat: 1024}\n" + kTail);
  EXPECT_THAT(e, HasSubstr("the network would pass the limit of 524288 layers"));
}

TEST_F(TargetedTest, LossesMustExistBeReachedAndScoreVectors) {
  std::string e =
      NetError(std::string(kHead) + "  - {name: fc, type: fully_connected, outputs: 3}\n");
  EXPECT_THAT(e, HasSubstr("net.yaml: the network has no loss layer"));
  e = NetError(std::string(kHead) + "  - {name: c, type: convolution, filters: 2, kernel: 3}\n" +
               "  - {name: loss, type: softmax_loss}\n");
  EXPECT_THAT(e, HasSubstr("net.yaml:4: layer 'loss' (softmax_loss): scores must be N x classes"));
  e = NetError(std::string(kHead) + "  - {name: side, type: relu}\n" +
               "  - {name: fc, type: fully_connected, outputs: 3, inputs: [data]}\n" +
               "  - {name: loss, type: softmax_loss}\n");
  EXPECT_THAT(e, HasSubstr("net.yaml:3: 1 layer(s) feed no loss layer: 'side'"));
}

TEST_F(TargetedTest, ScalarDocumentsAndBadReferences) {
  EXPECT_THAT(NetError("just a string\n"), HasSubstr("net.yaml: expected a map"));
  EXPECT_THAT(NetError(""), HasSubstr("net.yaml: expected a map"));
  std::string e = NetError(std::string(kHead) +
                           "  - {name: fc, type: fully_connected, outputs: 3, inputs: "
                           "[data:99999999999999]}\n  - {name: loss, type: softmax_loss}\n");
  EXPECT_THAT(e, HasSubstr("net.yaml:3"));
  EXPECT_THAT(e, HasSubstr("has 2 outputs"));
}

TEST_F(TargetedTest, FoldersAndFifosWhereFilesBelong) {
  const std::string dir = FreshDir("targeted_files");
  fs::create_directories(dir + "/lib.yaml");
  WriteText(dir + "/net.yaml", "include: [lib.yaml]\n" + std::string(kHead) + kTail);
  auto spec = LoadNetFile(dir + "/net.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("net.yaml:1"));
  EXPECT_THAT(spec.status().message(), HasSubstr("lib.yaml' is a folder"));
  ASSERT_EQ(::mkfifo((dir + "/fifo.yaml").c_str(), 0600), 0);
  spec = LoadNetFile(dir + "/fifo.yaml");  // must not wait for a writer
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("fifo.yaml' is a FIFO"));
}

TEST_F(TargetedTest, SizesPastTheCeilingsAreErrors) {
  auto spec = ParseNetString(std::string(kHead) + kTail, "net.yaml");
  ASSERT_TRUE(spec.ok());
  auto net = Net::Build(*spec, {int64_t{2147483648}, DeviceType::kCpu});
  ASSERT_FALSE(net.ok());
  EXPECT_THAT(net.status().message(), HasSubstr("batch size 2147483648 is outside [1, 1048576]"));
  const std::string e =
      NetError("layers:\n  - {name: data, type: input, shape: [1048576, 1048576, 1048576]}\n" +
               std::string(kTail));
  EXPECT_THAT(e, HasSubstr("net.yaml:2: layer 'data' (input): output 0 would be"));
  EXPECT_THAT(e, HasSubstr("no device budget holds it"));
}

// ------------------------------------------------------------------- configs

TEST_F(TargetedTest, ConfigKeysTyposAndDuplicates) {
  std::string e = ConfigError(std::string(kConfig) + "memroy: {mode: offload}\n");
  EXPECT_THAT(e, HasSubstr("bad.yaml:10: unknown key 'memroy'"));
  e = ConfigError(std::string(kConfig) + "solver: {type: adam}\n");
  EXPECT_THAT(e, HasSubstr("bad.yaml:10: duplicate key 'solver' (first at line 8)"));
  EXPECT_THAT(ConfigError("42\n"), HasSubstr("bad.yaml:1: the document: must be a map"));
}

TEST_F(TargetedTest, ConfigValuesOutOfRange) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string text = kConfig;
    text.replace(text.find(from), from.size(), to);
    return ConfigError(text);
  };
  EXPECT_THAT(with("run: {epochs: 1}", "run: {epochs: 1, checkpoint_every: -5}"),
              HasSubstr("bad.yaml:9: run.checkpoint_every: must be an integer in [0, "));
  EXPECT_THAT(with("lr: 0.1}", "lr: 0.1, schedule: {type: step, step_size: 2, gamma: -0.5}}"),
              HasSubstr("bad.yaml:8: solver.schedule.gamma: must be a number in (0, 1]"));
  EXPECT_THAT(with("batch: 8}", "batch: 8, workers: 500000}"),
              HasSubstr("bad.yaml:7: data.workers: must be an integer in [1, 64]"));
  EXPECT_THAT(with("batch: 8}", "batch: 99999999999999999999}"),
              HasSubstr("data.batch: must be an integer in [1, 1048576]"));
  EXPECT_THAT(with("batch: 8}", "batch: 8, shuffle: on}"),
              HasSubstr("data.shuffle: must be true or false (got 'on')"));
  EXPECT_THAT(with("dataset: fashion_mnist", "dataset: ~"),
              HasSubstr("bad.yaml:7: data.dataset: has no value (leave the key out"));
  EXPECT_THAT(with("run: {epochs: 1}", "run: {epochs: 1}\nmemory: {workspace: pin:nope}"),
              HasSubstr("pin:nope"));
}

TEST_F(TargetedTest, ConfigModelFileIsAFolder) {
  const std::string dir = FreshDir("targeted_model_folder");
  const std::string e =
      ConfigError("model: {file: " + dir + "}\ndata: {path: /x}\nrun: {epochs: 1}\n");
  EXPECT_THAT(e, HasSubstr(dir + "' is a folder"));
}

// ------------------------------------------------------------------ datasets

TEST_F(TargetedTest, FifoInPlaceOfADataFileEndsQuickly) {
  const std::string dir = FreshDir("targeted_fifo");
  WriteIdxSet(dir);
  fs::remove(dir + "/train-labels-idx1-ubyte");
  ASSERT_EQ(::mkfifo((dir + "/train-labels-idx1-ubyte").c_str(), 0600), 0);
  Tally tally;
  Status status = RunCase(
      "fifo", [&] { return IdxPipeline(dir); }, &tally);
  EXPECT_THAT(status.message(), HasSubstr("train-labels-idx1-ubyte' is a FIFO"));
}

TEST_F(TargetedTest, GzipBombIsBoundedByTheHeader) {
  const std::string dir = FreshDir("targeted_bomb");
  WriteIdxSet(dir);
  std::vector<uint8_t> bomb = IdxImages(3, 4, 5);
  bomb.resize(bomb.size() + (size_t{256} << 20), 0);  // 256 MiB of zeros after 3 images
  WriteBytes(dir + "/t10k-images-idx3-ubyte.gz", Gzip(bomb));
  Tally tally;
  Status status = RunCase(
      "gzip bomb", [&] { return IdxPipeline(dir); }, &tally);
  EXPECT_THAT(status.message(), HasSubstr("more than 76 bytes, expected exactly 76"));
}

TEST_F(TargetedTest, IdxHeaderThatOverflowsIsAnError) {
  const std::string dir = FreshDir("targeted_header");
  WriteIdxSet(dir);
  std::vector<uint8_t> images = IdxImages(1, 4, 5);
  for (int i = 4; i < 16; ++i)
    images[i] = i < 8 ? 0xff : (i % 4 == 1 ? 1 : 0);  // 2^32-1 x 65536 x 65536
  WriteBytes(dir + "/train-images-idx3-ubyte", images);
  Tally tally;
  Status status = RunCase(
      "idx header", [&] { return IdxPipeline(dir); }, &tally);
  EXPECT_THAT(status.message(), HasSubstr("train-images-idx3-ubyte: header declares"));
}

// --------------------------------------------------------------- checkpoints

class CheckpointTest : public TargetedTest {
 protected:
  void SetUp() override {
    dir_ = FreshDir("targeted_checkpoint");
    bench_ = CheckpointBench::Create();
    ASSERT_TRUE(bench_->Save(dir_ + "/good.npz").ok());
    auto archive = ReadNpz(dir_ + "/good.npz");
    ASSERT_TRUE(archive.ok());
    archive_ = *archive;
  }
  // Loads `archive` written as a valid .npz (CRCs and all).
  std::string LoadError(const NpzArchive& archive) {
    const std::string path = dir_ + "/edited.npz";
    EXPECT_TRUE(WriteNpzAtomically(path, archive).ok());
    Tally tally;
    return RunCase(
               "checkpoint", [&] { return bench_->Load(path); }, &tally)
        .message();
  }

  std::string dir_;
  std::unique_ptr<CheckpointBench> bench_;
  NpzArchive archive_;
};

TEST_F(CheckpointTest, TransposedWeightIsRejected) {
  NpyArray& weight = archive_.at("params/fc/weight");
  ASSERT_EQ(weight.shape, (std::vector<int64_t>{4, 48, 1, 1}));
  std::swap(weight.shape[0], weight.shape[1]);
  const std::string e = LoadError(archive_);
  EXPECT_THAT(e, HasSubstr("'params/fc/weight' is 48x4x1x1 <f4, the network expects 4x48x1x1"));
}

TEST_F(CheckpointTest, MissingStepCounterIsRejected) {
  archive_.erase("meta/step");
  EXPECT_THAT(LoadError(archive_), HasSubstr("has no 'meta/step'"));
}

TEST_F(CheckpointTest, BadCountersAndDtypesAreRejected) {
  archive_["meta/step"] = NpyArray::Int64(-3);
  EXPECT_THAT(LoadError(archive_), HasSubstr("'meta/step' must not be negative; it is -3"));
  archive_["meta/step"] = NpyArray::Int64(7);
  NpyArray& bias = archive_.at("params/conv/bias");
  bias.dtype = "<i8";  // 3 floats' bytes would not fill 3 int64s: keep the size right
  bias.shape = {1, 3, 1, 1};
  bias.data.resize(3 * 8);
  EXPECT_THAT(LoadError(archive_), HasSubstr("'params/conv/bias' is 1x3x1x1 <i8"));
}

TEST_F(CheckpointTest, ArraysFromAnotherNetworkOrSolverAreRejected) {
  archive_["params/ghost/weight"] = archive_.at("params/fc/bias");
  EXPECT_THAT(LoadError(archive_), HasSubstr("holds 'params/ghost/weight'"));
  archive_.erase("params/ghost/weight");
  archive_.erase("state/fc/weight.momentum");
  EXPECT_THAT(LoadError(archive_), HasSubstr("has no 'state/fc/weight.momentum'"));
}

TEST_F(CheckpointTest, CorruptBytesFailTheCrc) {
  std::vector<uint8_t> bytes = ReadBytes(dir_ + "/good.npz");
  const std::string text(bytes.begin(), bytes.end());
  const size_t header = text.find("(4, 48, 1, 1)");  // the fc weight's .npy header
  ASSERT_NE(header, std::string::npos);
  bytes[text.find('\n', header) + 50] ^= 0x40;  // a byte of its data
  WriteBytes(dir_ + "/corrupt.npz", bytes);
  Tally tally;
  Status status = RunCase(
      "crc", [&] { return bench_->Load(dir_ + "/corrupt.npz"); }, &tally);
  EXPECT_THAT(status.message(), HasSubstr("corrupt.npz' is not a readable .npz checkpoint"));
  EXPECT_THAT(status.message(), HasSubstr("fails its CRC-32 check"));
}

TEST_F(CheckpointTest, FolderInPlaceOfTheCheckpoint) {
  fs::create_directories(dir_ + "/folder.npz");
  Tally tally;
  Status status = RunCase(
      "folder", [&] { return bench_->Load(dir_ + "/folder.npz"); }, &tally);
  EXPECT_THAT(status.message(), HasSubstr("folder.npz' is a folder"));
}

}  // namespace
}  // namespace fuzz
}  // namespace spill
