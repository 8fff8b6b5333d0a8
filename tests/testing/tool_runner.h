// Running spill's programs as a user does, for the tests that check them
// end to end: a child process per run with a time limit, its output read
// back, fresh folders under the test's temporary directory, and small idx
// files (the MNIST format) to train on.
#ifndef SPILL_TESTS_TESTING_TOOL_RUNNER_H_
#define SPILL_TESTS_TESTING_TOOL_RUNNER_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spill {
namespace testing {

struct ToolResult {
  int code = -1;       // exit code, or 128 + signal; -1 when killed at the limit
  std::string output;  // stdout, then stderr (when kept)
  double seconds = 0;
  // What the kernel counted for the child (wait4): its largest resident
  // set, and its processor time (user + system, every thread).
  int64_t peak_rss_bytes = 0;
  double cpu_seconds = 0;
};

// Limits a child is started under (0: none). A child past `cpu_seconds` of
// processor time is ended by the kernel (SIGXCPU, then SIGKILL): a limit on
// work done, which other load on the machine does not use up.
struct ChildLimits {
  int64_t max_file_bytes = 0;
  int cpu_seconds = 0;
};

// `name` under the test's temporary directory, emptied and created.
std::string FreshDir(const std::string& name);
std::string ReadAll(const std::string& path);

// Limits the calling process (and what it starts) to files of at most
// `max_bytes`: a write past it fails with EFBIG, as one on a full disk fails
// with ENOSPC (SIGXFSZ, which would end the process instead, is ignored). A
// real failing write for tests, without root or a separate filesystem.
void LimitFileSize(int64_t max_bytes);

// Starts `args` (argv[0] relative to the runfiles root) with stdout into
// `out` and stderr into `err` (the same file when equal), under `limits`
// (max_file_bytes as LimitFileSize does).
pid_t Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err,
            const ChildLimits& limits = {});
// Waits for `pid`; past `limit_seconds` (a watchdog against hangs) kills it,
// records a test failure and returns -1. Otherwise the exit code, or 128 +
// the signal; `usage`, when given, receives what the kernel counted.
int Wait(pid_t pid, int limit_seconds, rusage* usage = nullptr);
// Spawn and Wait: stdout, then stderr unless `with_stderr` is false.
ToolResult RunTool(const std::vector<std::string>& args, int limit_seconds, bool with_stderr = true,
                   const ChildLimits& limits = {});
// The limit of most tool tests: a tool on a tiny network, on a loaded machine.
constexpr int kToolLimitSeconds = 120;
// RunTool within kToolLimitSeconds, stdout then stderr.
inline ToolResult RunTool(const std::vector<std::string>& args) {
  return RunTool(args, kToolLimitSeconds);
}

// The pixel of `image` at `index` (0..783).
using PixelFn = std::function<uint8_t(uint32_t image, uint32_t index)>;
// PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte in `dir`: `count`
// 28x28 images, image i labelled i % 10.
void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count,
              const PixelFn& pixel);

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_TOOL_RUNNER_H_
