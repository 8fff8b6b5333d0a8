// What the fuzz tests run on each input, in-process: the same code the tools
// run, from reading a file to a memory plan or a restored checkpoint.
//
// A case passes when it ends - accepted or rejected - with no exception
// escaping and no crash. RunCase enforces that: it catches any exception (a
// failure) and arms a watchdog that ends the whole process, naming the case,
// if one runs past kHangSeconds - a hang must fail the test, not stall it.
// It also keeps the slowest case, which the tests print; how long a case
// takes is never asserted (that depends on what else the machine runs).
#ifndef SPILL_TESTS_TESTING_FUZZ_HARNESS_H_
#define SPILL_TESTS_TESTING_FUZZ_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "framework/base/status.h"
#include "framework/graph/net.h"
#include "framework/solver/solver.h"
#include "memory/runtime/runtime.h"

namespace spill {
namespace fuzz {

#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowdown = 6;  // AddressSanitizer at -O1
#else
constexpr double kSlowdown = 1;
#endif
constexpr double kHangSeconds = 120 * kSlowdown;

// SPILL_FUZZ_SEED (default: a fixed seed) and SPILL_FUZZ_SCALE (default 1:
// how many times each generated case is drawn), for tools/ci/fuzz.sh;
// SPILL_FUZZ_VERBOSE prints every case's outcome.
uint64_t Seed();
int Scale();

struct Tally {
  int cases = 0;
  int accepted = 0;
  int rejected = 0;
  double slowest_seconds = 0;  // wall seconds of the slowest case, and its name
  std::string slowest;
};

// Runs `body` as described above and returns its status (kInternal when it
// threw).
Status RunCase(const std::string& name, const std::function<Status()>& body, Tally* tally);

// A fresh, empty folder.
std::string FreshDir(const std::string& name);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);
void WriteText(const std::string& path, const std::string& text);
std::string ReadText(const std::string& path);
std::vector<uint8_t> ReadBytes(const std::string& path);
std::vector<uint8_t> Gzip(const std::vector<uint8_t>& bytes);

// Pipelines.
// The network file at `path`: parse, build at batch 2, plan under `mode`.
Status NetworkPipeline(const std::string& path, const std::string& mode);
// A training config's text: parse, load its model for a dataset of the
// config's kind, build, check the workspace policy, add solver state, plan.
Status ConfigPipeline(const std::string& text, const std::string& label);
// Opens both splits of a dataset folder and reads examples through a loader.
Status IdxPipeline(const std::string& dir);
Status CifarPipeline(const std::string& dir);

// Valid files to mutate.
std::vector<uint8_t> IdxImages(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic = 2051);
std::vector<uint8_t> IdxLabels(uint32_t count, uint32_t magic = 2049);
std::vector<uint8_t> CifarRecords(int records, int salt);
// Writes a small valid idx set (train raw, test gzipped) into `dir`.
void WriteIdxSet(const std::string& dir);
// Writes five training batches and a test batch into `dir`.
void WriteCifarSet(const std::string& dir);

// A small network with solver state, a CPU device and a memory runtime to
// save checkpoints from and load them into.
class CheckpointBench {
 public:
  static std::unique_ptr<CheckpointBench> Create();
  Status Save(const std::string& path);
  Status Load(const std::string& path);
  const Net& net() const { return *net_; }

 private:
  std::unique_ptr<Device> device_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<Solver> solver_;
  std::unique_ptr<MemoryRuntime> runtime_;
};

}  // namespace fuzz
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_FUZZ_HARNESS_H_
