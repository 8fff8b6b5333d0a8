#include "tests/testing/tool_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace spill {
namespace testing {
namespace {

namespace fs = std::filesystem;

constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr uint32_t kImageMagic = 2051, kLabelMagic = 2049, kSide = 28;

void PutBigEndian(std::ofstream& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.write(b, 4);
}

}  // namespace

std::string FreshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
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

void LimitFileSize(int64_t max_bytes) {
  std::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{static_cast<rlim_t>(max_bytes), static_cast<rlim_t>(max_bytes)};
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) std::perror("setrlimit(RLIMIT_FSIZE)");
}

pid_t Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err,
            const ChildLimits& limits) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (std::freopen(out.c_str(), "w", stdout) == nullptr) _exit(127);
    const bool same = out == err;
    if (same ? dup2(fileno(stdout), 2) < 0 : std::freopen(err.c_str(), "w", stderr) == nullptr) {
      _exit(127);
    }
    if (limits.max_file_bytes > 0) LimitFileSize(limits.max_file_bytes);
    if (limits.cpu_seconds > 0) {
      const rlimit cpu{static_cast<rlim_t>(limits.cpu_seconds),
                       static_cast<rlim_t>(limits.cpu_seconds) + 1};
      if (setrlimit(RLIMIT_CPU, &cpu) != 0) _exit(127);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid, int limit_seconds, rusage* usage) {
  int status = 0;
  rusage ignored;
  if (usage == nullptr) usage = &ignored;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_seconds);
  while (wait4(pid, &status, WNOHANG, usage) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, usage);
      ADD_FAILURE() << "a tool ran past " << limit_seconds << " s";
      return -1;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ToolResult RunTool(const std::vector<std::string>& args, int limit_seconds, bool with_stderr,
                   const ChildLimits& limits) {
  const std::string dir = FreshDir("tool_output");
  const std::string out = dir + "/out.txt", err = dir + "/err.txt";
  const auto start = std::chrono::steady_clock::now();
  ToolResult r;
  rusage usage{};
  r.code = Wait(Spawn(args, out, err, limits), limit_seconds, &usage);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  r.output = ReadAll(out) + (with_stderr ? ReadAll(err) : "");
  return r;
}

void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count,
              const PixelFn& pixel) {
  std::ofstream images(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary);
  std::ofstream labels(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary);
  for (uint32_t v : {kImageMagic, count, kSide, kSide}) PutBigEndian(images, v);
  PutBigEndian(labels, kLabelMagic);
  PutBigEndian(labels, count);
  for (uint32_t i = 0; i < count; ++i) {
    for (uint32_t p = 0; p < kSide * kSide; ++p) images.put(static_cast<char>(pixel(i, p)));
    labels.put(static_cast<char>(i % 10));
  }
}

}  // namespace testing
}  // namespace spill
