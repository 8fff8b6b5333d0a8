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

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kLimitSeconds = 120;

struct Result {
  int code = -1;  // exit code, or 128 + signal
  std::string output;
  double seconds = 0;
};

std::string Dir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("spill_cli_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts `args` (argv[0] relative to the runfiles root) with stdout and
// stderr into `log`.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLimitSeconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "a tool ran past " << kLimitSeconds << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Result RunTool(const std::vector<std::string>& args) {
  const std::string log = Dir("log") + "/out.txt";
  const auto start = std::chrono::steady_clock::now();
  Result r;
  r.code = Wait(Spawn(args, log));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.output = ReadAll(log);
  return r;
}

void PutBigEndian(std::ofstream& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.write(b, 4);
}

void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count) {
  std::ofstream images(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary);
  std::ofstream labels(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary);
  for (uint32_t v : {2051u, count, 28u, 28u}) PutBigEndian(images, v);
  PutBigEndian(labels, 2049);
  PutBigEndian(labels, count);
  for (uint32_t i = 0; i < count; ++i) {
    for (int p = 0; p < 784; ++p) images.put(static_cast<char>((i * 31 + p) % 256));
    labels.put(static_cast<char>(i % 10));
  }
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
  const pid_t pid = Spawn({"tools/train", "--config", config, "--no-progress", "--overwrite"}, log);
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
    EXPECT_EQ(Wait(pid), 130) << "signal " << signal;
    EXPECT_THAT(ReadAll(dir + "/first.txt"), HasSubstr("checkpoint saved"));
    auto archive = ReadNpz(dir + "/run/checkpoint.npz");
    ASSERT_TRUE(archive.ok()) << archive.status().ToString();
    EXPECT_GT(archive->at("meta/step").int64(), 0);
  }
  // kill -9 leaves the lock file behind but not the lock: the next run goes on.
  const pid_t pid = StartLongRun(config, dir, dir + "/killed.txt");
  kill(pid, SIGKILL);
  Wait(pid);
  EXPECT_TRUE(fs::exists(dir + "/run/train.lock"));
  Result r =
      RunTool({"tools/train", "--config", config, "--no-progress", "--resume", "--max-steps", "1"});
  EXPECT_EQ(r.code, 0) << r.output;
}

}  // namespace
}  // namespace spill
