// The tools as a user runs them: bad flags, outputs that cannot be written,
// nonsense networks and sizes, and train's promises about its output folder
// (no silent overwrite, one run at a time, SIGTERM and SIGHUP checkpoint).
// Each case runs the real binary in a child process with a time limit and
// checks its exit code and its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "framework/npz.h"
#include "tests/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kLimitSeconds = 120;

using Result = testing::ToolResult;
using testing::ReadAll;

std::string Dir(const std::string& name) { return testing::FreshDir("spill_cli_" + name); }

Result RunTool(const std::vector<std::string>& args) {
  return testing::RunTool(args, kLimitSeconds);
}

void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count) {
  testing::WriteIdx(dir, prefix, count, [](uint32_t i, uint32_t p) {
    return static_cast<uint8_t>((i * 31 + p) % 256);
  });
}

// A small config training a tiny network on 64 synthetic images.
std::string WriteConfig(const std::string& dir, int epochs) {
  fs::create_directories(dir + "/data");
  WriteIdx(dir + "/data", "train", 64);
  WriteIdx(dir + "/data", "t10k", 16);
  const std::string path = dir + "/config.yaml";
  std::ofstream(path) << "model:\n  layers:\n"
                      << "    - {name: data, type: input, shape: [1, 28, 28]}\n"
                      << "    - {name: conv, type: convolution, filters: 2, kernel: 3, stride: 4}\n"
                      << "    - {name: fc, type: fully_connected, outputs: 10}\n"
                      << "    - {name: loss, type: softmax_loss}\n"
                      << "data: {dataset: fashion_mnist, path: " << dir << "/data, batch: 16}\n"
                      << "solver: {type: sgd, lr: 0.01}\n"
                      << "memory: {conv_timing: model}\n"
                      << "run: {epochs: " << epochs << ", output: " << dir << "/run}\n";
  return path;
}

// ---------------------------------------------------------------------- plan

TEST(CliTest, BadNumbersNameTheFlagAndEndQuickly) {
  Result r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--batch", "2147483648"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--batch: '2147483648' is not an integer in [1, 1048576]"));
  EXPECT_LT(r.seconds, 10);
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--batch", "32abc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--batch: '32abc' is not an integer"));
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--device-memory", "12XB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--device-memory: '12XB': unknown unit 'XB'"));
  r = RunTool({"tools/deepest", "--prefetch-ahead", "3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--prefetch-ahead"));
}

TEST(CliTest, HelpComesFromTheDeclarations) {
  for (const char* tool : {"tools/plan", "tools/train", "tools/deepest", "tools/widest"}) {
    Result r = RunTool({tool, "--help"});
    EXPECT_EQ(r.code, 0) << tool;
    EXPECT_THAT(r.output, HasSubstr("--config")) << tool;
  }
}

TEST(CliTest, OutputsThatCannotBeWrittenAreErrors) {
  Result r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--csv", "/nowhere/plan.csv"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--csv: cannot write '/nowhere/plan.csv'"));
  const std::string dir = Dir("outputs");
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--svg", dir});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("is a folder"));
  // /proc accepts no new files, whoever asks: the write itself must fail loudly.
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--svg", "/proc/spill_plan.svg"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("/proc/spill_plan.svg"));
}

TEST(CliTest, NonsenseNetworksAndPoliciesAreErrors) {
  const std::string dir = Dir("networks");
  std::ofstream(dir + "/noloss.yaml")
      << "layers:\n  - {name: data, type: input, shape: [1, 8, 8]}\n"
      << "  - {name: fc, type: fully_connected, outputs: 3}\n";
  Result r = RunTool({"tools/plan", "--config", dir + "/noloss.yaml"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("noloss.yaml: the network has no loss layer"));
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--workspace", "pin:nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("'pin:nope' names no algorithm"));
  r = RunTool({"tools/plan", "--config", dir});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("is a folder"));
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--set", "size=[1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("plan: --set size:1: YAML syntax"));
}

// --------------------------------------------------------------------- train

TEST(CliTest, TrainRefusesToOverwriteACheckpointSilently) {
  const std::string dir = Dir("overwrite");
  const std::string config = WriteConfig(dir, 1);
  Result r = RunTool({"tools/train", "--config", config, "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunTool({"tools/train", "--config", config, "--no-progress"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("already holds a checkpoint"));
  EXPECT_THAT(r.output, HasSubstr("--resume"));
  EXPECT_THAT(r.output, HasSubstr("--overwrite"));
  r = RunTool({"tools/train", "--config", config, "--no-progress", "--overwrite"});
  EXPECT_EQ(r.code, 0) << r.output;
  r = RunTool({"tools/train", "--config", config, "--no-progress", "--report", dir + "/no/r.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--report: cannot write"));
  std::ofstream(dir + "/file") << "x";
  r = RunTool({"tools/train", "--config", config, "--no-progress", "--overwrite", "--trace",
               dir + "/file/trace"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--trace"));
}

// Starts a long run and waits for its first checkpoint: by then it holds the
// lock and handles signals.
pid_t StartLongRun(const std::string& config, const std::string& dir, const std::string& log) {
  fs::remove(dir + "/run/checkpoint.npz");
  const pid_t pid =
      testing::Spawn({"tools/train", "--config", config, "--no-progress", "--overwrite"}, log, log);
  for (int i = 0; i < kLimitSeconds * 10; ++i) {
    if (fs::exists(dir + "/run/checkpoint.npz")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pid;
}

TEST(CliTest, OneRunPerOutputFolderAndSignalsCheckpoint) {
  const std::string dir = Dir("lock");
  const std::string config = WriteConfig(dir, 100000);
  for (int signal : {SIGTERM, SIGHUP}) {
    const pid_t pid = StartLongRun(config, dir, dir + "/first.txt");
    Result second = RunTool({"tools/train", "--config", config, "--no-progress", "--resume"});
    EXPECT_EQ(second.code, 1);
    EXPECT_THAT(second.output,
                HasSubstr("is in use by another run (process " + std::to_string(pid) + ")"));
    kill(pid, signal);
    EXPECT_EQ(testing::Wait(pid, kLimitSeconds), 130) << "signal " << signal;
    EXPECT_THAT(ReadAll(dir + "/first.txt"), HasSubstr("checkpoint saved"));
    auto archive = ReadNpz(dir + "/run/checkpoint.npz");
    ASSERT_TRUE(archive.ok()) << archive.status().ToString();
    EXPECT_GT(archive->at("meta/step").int64(), 0);
  }
  // kill -9 leaves the lock file behind but not the lock: the next run goes on.
  const pid_t pid = StartLongRun(config, dir, dir + "/killed.txt");
  kill(pid, SIGKILL);
  testing::Wait(pid, kLimitSeconds);
  EXPECT_TRUE(fs::exists(dir + "/run/train.lock"));
  Result r =
      RunTool({"tools/train", "--config", config, "--no-progress", "--resume", "--max-steps", "1"});
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
}  // namespace spill
