// Saving onto a disk that fills up: the writers of checkpoints, ONNX models,
// reports and logs fail with an error that names the file and the reason,
// leave the file they would have replaced as it was and leave no temporary
// file behind; a training run whose checkpoint cannot be written stops with
// that error and its last checkpoint resumes.
//
// The failing writes are real: a process limited to small files
// (RLIMIT_FSIZE, testing::LimitFileSize) gets EFBIG from write() past the
// limit, as a process on a full disk gets ENOSPC - the same path through the
// writers, without root or a separate filesystem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "framework/base/files.h"
#include "framework/io/npz.h"
#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::ReadAll;

constexpr int64_t kLimitBytes = 16 << 10;  // the largest file the limited process may write
constexpr int64_t kLargeBytes = 64 << 10;  // more than that
constexpr int kToolSeconds = 120;

struct Outcome {
  bool ok = false;
  std::string message;
};

// Runs `write` in a child process limited to kLimitBytes per file and returns
// its status: the limit must not reach the test process itself.
Outcome WriteLimited(const std::function<Status()>& write) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    testing::LimitFileSize(kLimitBytes);
    const Status status = write();
    const std::string message = status.ToString();
    const bool sent = ::write(pipe_fds[1], message.data(), message.size()) ==
                      static_cast<ssize_t>(message.size());
    _exit(status.ok() && sent ? 0 : sent ? 1 : 2);
  }
  ::close(pipe_fds[1]);
  Outcome outcome;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0;) {
    outcome.message.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 2) << "the child did not report";
  outcome.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return outcome;
}

std::string Fill(int64_t bytes, char c) { return std::string(static_cast<size_t>(bytes), c); }

NpzArchive Archive(int64_t bytes) {
  const std::vector<float> values(static_cast<size_t>(bytes / 4), 0.5f);
  NpzArchive archive;
  archive["params/w"] = NpyArray::Floats({static_cast<int64_t>(values.size())}, values.data());
  return archive;
}

// The previous content of `path` survives a write that does not fit, the
// error names the file and the reason, and the same write that fits the
// limit succeeds (the limit, not the writer, is what failed).
void ExpectKeptOnFailure(const std::string& path,
                         const std::function<Status(int64_t bytes)>& write) {
  const std::string previous = "the previous content\n";
  std::ofstream(path) << previous;
  const Outcome failed = WriteLimited([&] { return write(kLargeBytes); });
  EXPECT_FALSE(failed.ok);
  EXPECT_THAT(failed.message, HasSubstr("'" + path + "'"));
  EXPECT_THAT(failed.message, HasSubstr("File too large"));
  EXPECT_THAT(failed.message, HasSubstr("ulimit -f"));
  EXPECT_THAT(failed.message, HasSubstr("was left as it was"));
  EXPECT_EQ(ReadAll(path), previous);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const Outcome written = WriteLimited([&] { return write(kLimitBytes / 2); });
  EXPECT_TRUE(written.ok) << written.message;
  EXPECT_NE(ReadAll(path), previous);
}

TEST(FullDiskTest, AnAtomicWriteKeepsThePreviousFile) {
  const std::string dir = testing::FreshDir("full_disk_atomic");
  ExpectKeptOnFailure(dir + "/model.onnx", [&](int64_t bytes) {
    return WriteFileAtomically(dir + "/model.onnx", Fill(bytes, 'x'), "ONNX model");
  });
}

TEST(FullDiskTest, AReportOrLogKeepsThePreviousFile) {
  const std::string dir = testing::FreshDir("full_disk_text");
  ExpectKeptOnFailure(dir + "/report.json", [&](int64_t bytes) {
    return WriteTextFile(dir + "/report.json", Fill(bytes, 'y'), "--report");
  });
}

TEST(FullDiskTest, ACheckpointKeepsThePreviousFile) {
  const std::string dir = testing::FreshDir("full_disk_npz");
  const std::string path = dir + "/checkpoint.npz";
  ExpectKeptOnFailure(path,
                      [&](int64_t bytes) { return WriteNpzAtomically(path, Archive(bytes)); });
  EXPECT_TRUE(ReadNpz(path).ok());
}

// train's log.jsonl: lines are appended until the limit; the one that does
// not fit is cut away whole and the error says so.
TEST(FullDiskTest, ALogKeepsItsWholeLines) {
  const std::string path = testing::FreshDir("full_disk_log") + "/log.jsonl";
  {
    LineLog log;
    ASSERT_TRUE(log.Open(path, false, "the training log").ok());
    ASSERT_TRUE(log.Append("first").ok());
  }
  const std::string line(100, 'z');
  const Outcome failed = WriteLimited([&]() -> Status {
    LineLog log;
    SPILL_RETURN_IF_ERROR(log.Open(path, true, "the training log"));
    for (int64_t i = 0; i <= kLimitBytes / 100; ++i) SPILL_RETURN_IF_ERROR(log.Append(line));
    return Status::Ok();
  });
  EXPECT_FALSE(failed.ok);
  EXPECT_THAT(failed.message, HasSubstr("the training log '" + path + "': File too large"));
  EXPECT_THAT(failed.message, HasSubstr("its lines up to the last whole one are kept"));
  std::ifstream in(path);
  std::string read;
  ASSERT_TRUE(std::getline(in, read));
  EXPECT_EQ(read, "first");
  int64_t lines = 0;
  while (std::getline(in, read)) {
    EXPECT_EQ(read, line);
    ++lines;
  }
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(path)), 6 + lines * 101);
  EXPECT_EQ(lines, (kLimitBytes - 6) / 101);
}

// A tiny network whose checkpoint (with momentum) is about 32 KiB, larger than
// the limit; a checkpoint every 2 of its 8 steps.
std::string WriteRun(const std::string& dir) {
  fs::create_directories(dir + "/data");
  const auto pixel = [](uint32_t i, uint32_t p) {
    return static_cast<uint8_t>((i * 13 + p * (i % 3 + 1)) % 256);
  };
  testing::WriteIdx(dir + "/data", "train", 64, pixel);
  testing::WriteIdx(dir + "/data", "t10k", 16, pixel);
  const std::string path = dir + "/run.yaml";
  std::ofstream(path) << "model:\n  layers:\n"
                      << "    - {name: data, type: input, shape: [1, 28, 28]}\n"
                      << "    - {name: conv, type: convolution, filters: 8, kernel: 3, stride: 4}\n"
                      << "    - {name: fc, type: fully_connected, outputs: 10}\n"
                      << "    - {name: loss, type: softmax_loss}\n"
                      << "data: {dataset: fashion_mnist, path: " << dir << "/data, batch: 16}\n"
                      << "solver: {type: sgd, lr: 0.01, momentum: 0.9}\n"
                      << "memory: {conv_timing: model}\n"
                      << "run: {epochs: 2, checkpoint_every: 2, output: " << dir << "/run}\n";
  return path;
}

TEST(FullDiskTest, TrainingStopsWhenItsCheckpointCannotBeWrittenAndResumes) {
  const std::string dir = testing::FreshDir("full_disk_train");
  const std::string config = WriteRun(dir), checkpoint = dir + "/run/checkpoint.npz";
  auto run = [&](std::vector<std::string> extra, int64_t max_file_bytes) {
    std::vector<std::string> args = {"tools/train", "--config", config, "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::ChildLimits limits;
    limits.max_file_bytes = max_file_bytes;
    return testing::RunTool(args, kToolSeconds, true, limits);
  };
  testing::ToolResult r = run({"--max-steps", "2"}, 0);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string saved = ReadAll(checkpoint);
  ASSERT_GT(static_cast<int64_t>(saved.size()), kLimitBytes);

  r = run({"--resume"}, kLimitBytes);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot write npz archive '" + checkpoint + "'"));
  EXPECT_THAT(r.output, HasSubstr("File too large"));
  EXPECT_EQ(ReadAll(checkpoint), saved);
  EXPECT_FALSE(fs::exists(checkpoint + ".tmp"));

  r = run({"--resume", "--report", dir + "/report.json"}, 0);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(ReadAll(dir + "/report.json"), HasSubstr("\"steps\""));
}

}  // namespace
}  // namespace spill
