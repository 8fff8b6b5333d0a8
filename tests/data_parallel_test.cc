// Data-parallel training under mpirun, end to end: the real `train` binary
// on generated idx files, two ranks on this machine (--oversubscribe).
//
//   * 2 ranks x half the batch train like 1 process x the whole batch:
//     the same losses and final weights within float32 rounding, with one
//     and with several gradient buckets, with parameters updated in host
//     memory, and with synchronized batch norm; every rank holds
//     bit-identical parameters after every step (distributed.check_replicas);
//   * per-rank batch norm statistics differ from the global batch's (the
//     comparison above can tell them apart);
//   * an interrupted two-rank run resumed from its checkpoint ends exactly
//     as the uninterrupted one;
//   * a rank that fails (missing data, out of device memory) stops the
//     whole job with its message, well within the time limit.
// Every run has a time limit: mpirun's own --timeout and a watchdog that
// kills the process group.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "framework/io/npz.h"
#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kLimitSeconds = 120;       // the watchdog's, per run
constexpr int kMpiTimeoutSeconds = 100;  // mpirun --timeout
// What mpirun prints when it ends a job at --timeout: a job that stops on a
// rank's error ends before it, with that error.
constexpr char kMpiTimedOut[] = "time limit for job execution has been reached";
constexpr double kLossTolerance = 1e-5;  // relative, float32 rounding of a sum split in two
constexpr double kWeightTolerance = 1e-5;
// A killed rank ends the job well within this (mpirun notices at once); far
// below mpirun's own time limit, which is what a hang would run into.
constexpr double kEndAfterKillSeconds = 30;
constexpr int64_t kPoolBlock = 1024;  // device memory is handed out in blocks of this many bytes
constexpr char kTrain[] = "tools/train";
constexpr char kPlan[] = "tools/plan";

using Result = testing::ToolResult;
using testing::ReadAll;

std::string Dir(const std::string& name) { return testing::FreshDir("spill_dp_" + name); }

// OpenMPI in a test: as root, on 2 cores, shared memory between local ranks
// only, a short session directory (its socket paths must stay short).
class SessionDir {
 public:
  SessionDir() {
    char pattern[] = "/tmp/spill_mpi_XXXXXX";
    const char* made = mkdtemp(pattern);
    path_ = made != nullptr ? made : "/tmp";
  }
  ~SessionDir() {
    if (path_ != "/tmp") fs::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void SetMpiEnvironment(const std::string& session) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_btl", "self,vader", 1);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  setenv("OMPI_MCA_plm", "isolated", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  setenv("TMPDIR", session.c_str(), 1);
}

// Runs `args` in its own process group, output into `log`; kills the group
// past the limit. `meanwhile`, when given, is called every poll while the
// job runs.
Result RunJob(const std::vector<std::string>& args, const std::string& log,
              const std::function<void()>& meanwhile = nullptr) {
  static SessionDir session;  // made by this process, removed at its exit
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    SetMpiEnvironment(session.path());
    FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  Result r;
  int status = 0;
  const auto deadline = start + std::chrono::seconds(kLimitSeconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "ran past " << kLimitSeconds << " s: " << args[0];
      break;
    }
    if (meanwhile) meanwhile();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.output = ReadAll(log);
  return r;
}

// mpirun starting `ranks` copies of train on `config`, then `extra` flags.
std::vector<std::string> TrainJob(int ranks, const std::string& config,
                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"mpirun",
                                   "-np",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   "--timeout",
                                   std::to_string(kMpiTimeoutSeconds),
                                   kTrain,
                                   "--config",
                                   config,
                                   "--no-progress"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// mpirun starting two ranks that differ (MPMD): rank 0 trains on `config0`,
// rank 1 on `config1` with `extra1` flags.
std::vector<std::string> TwoRankJob(const std::string& config0, const std::string& config1,
                                    const std::vector<std::string>& extra1 = {}) {
  std::vector<std::string> args = {"mpirun", "--timeout", std::to_string(kMpiTimeoutSeconds),
                                   "--oversubscribe"};
  const std::string configs[] = {config0, config1};
  for (int rank = 0; rank < 2; ++rank) {
    if (rank > 0) args.push_back(":");
    for (const char* a : {"-np", "1", kTrain, "--config"}) args.push_back(a);
    args.push_back(configs[rank]);
    args.push_back("--no-progress");
  }
  args.insert(args.end(), extra1.begin(), extra1.end());
  return args;
}

void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count) {
  testing::WriteIdx(dir, prefix, count, [](uint32_t i, uint32_t p) {
    return static_cast<uint8_t>((i * 31 + p * 7 + (i * p) % 13) % 256);
  });
}

struct RunSetup {
  std::string model = "conv";  // conv | bn | mlp (most bytes in parameters, none dominant)
  std::string solver = "sgd";  // sgd (momentum 0.9) | adam
  int batch = 16;              // global
  int zero = 0;                // distributed.zero
  std::string memory = "{conv_timing: model}";
  std::string bucket = "4MiB";
  bool sync_batch_norm = false;
  std::string data;     // "" = generated
  int min_buckets = 1;  // gradient buckets the run must report
  int filters = 4;
  double lr = 0.05;
  int seed = 1;
  int steps = 8;
  std::string precision = "fp32";  // run.precision
  int64_t loss_scale = 0;          // run.loss_scale (fp16); 0: the default
  int micro_batches = 1;           // run.micro_batches
};

// `solver` (sgd or adam) at the learning rate the tests train it with.
RunSetup WithSolver(const std::string& solver) {
  RunSetup s;
  s.solver = solver;
  s.lr = solver == "adam" ? 0.01 : 0.05;
  return s;
}

// A tiny network, 64 training images, batch 16, 8 steps with momentum.
std::string WriteConfig(const std::string& dir, const std::string& output, const RunSetup& s) {
  std::string data = s.data;
  if (data.empty()) {
    data = dir + "/data";
    fs::create_directories(data);
    WriteIdx(data, "train", 64);
    WriteIdx(data, "t10k", 24);
  }
  const std::string path = dir + "/" + output + ".yaml";
  std::ofstream out(path);
  out << "model:\n  layers:\n"
      << "    - {name: data, type: input, shape: [1, 28, 28]}\n";
  if (s.model == "mlp") {
    out << "    - {name: pool, type: avg_pool, kernel: 4, stride: 4}\n";
    for (int i = 1; i <= 4; ++i) {
      out << "    - {name: fc" << i << ", type: fully_connected, outputs: 256}\n"
          << "    - {name: relu" << i << ", type: relu}\n";
    }
    out << "    - {name: fc5, type: fully_connected, outputs: 10}\n";
  } else {
    out << "    - {name: conv, type: convolution, filters: " << s.filters
        << ", kernel: 3, stride: 2}\n";
    if (s.model == "bn") out << "    - {name: bn, type: batch_norm}\n";
    out << "    - {name: relu, type: relu}\n"
        << "    - {name: fc1, type: fully_connected, outputs: 16}\n"
        << "    - {name: fc2, type: fully_connected, outputs: 10}\n";
  }
  out << "    - {name: loss, type: softmax_loss}\n"
      << "data: {dataset: fashion_mnist, path: " << data << ", batch: " << s.batch
      << ", workers: 1}\n"
      << "solver: {type: " << s.solver << ", lr: " << s.lr
      << (s.solver == "sgd" ? ", momentum: 0.9}\n" : "}\n") << "memory: " << s.memory << "\n"
      << "run: {steps: " << s.steps << ", eval_every: 4, checkpoint_every: 4, seed: " << s.seed
      << ", precision: " << s.precision
      << (s.loss_scale > 0 ? ", loss_scale: " + std::to_string(s.loss_scale) : "")
      << (s.micro_batches > 1 ? ", micro_batches: " + std::to_string(s.micro_batches) : "")
      << ", output: " << dir << "/" << output << "}\n"
      << "distributed: {bucket: "
      << s.bucket
      // At zero 3 no rank holds the parameters whole, so there is nothing to compare.
      << ", check_replicas: " << (s.zero < 3 ? "true" : "false")
      << ", sync_batch_norm: " << (s.sync_batch_norm ? "true" : "false") << ", zero: " << s.zero
      << "}\n";
  return path;
}

// (step, loss) of the training lines of a run's log.
std::vector<std::pair<int64_t, double>> Losses(const std::string& run) {
  std::vector<std::pair<int64_t, double>> losses;
  std::ifstream in(run + "/log.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto json = nlohmann::json::parse(line);
    if (json["kind"] == "train") losses.emplace_back(json["step"], json["loss"]);
  }
  return losses;
}

std::map<std::string, std::vector<float>> Weights(const std::string& run) {
  auto archive = ReadNpz(run + "/checkpoint.npz");
  EXPECT_TRUE(archive.ok()) << archive.status().ToString();
  std::map<std::string, std::vector<float>> weights;
  if (!archive.ok()) return weights;
  for (const auto& [name, array] : *archive) {
    if (name.rfind("params/", 0) != 0 && name.rfind("state/", 0) != 0) continue;
    std::vector<float> values(array.data.size() / sizeof(float));
    std::memcpy(values.data(), array.data.data(), values.size() * sizeof(float));
    weights[name] = values;
  }
  return weights;
}

// Trains `config` in one process and in two ranks; both must agree.
void ExpectSameTraining(const std::string& dir, const RunSetup& setup) {
  const std::string one = WriteConfig(dir, "one", setup);
  const std::string two = WriteConfig(dir, "two", setup);
  Result single = RunJob({kTrain, "--config", one, "--no-progress"}, dir + "/one.txt");
  ASSERT_EQ(single.code, 0) << single.output;
  Result pair = RunJob(TrainJob(2, two, {"--report", dir + "/two.json"}), dir + "/two.txt");
  ASSERT_EQ(pair.code, 0) << pair.output;
  EXPECT_THAT(pair.output, HasSubstr("data parallel: 2 ranks of batch 8"));
  const auto report = nlohmann::json::parse(ReadAll(dir + "/two.json"));
  EXPECT_EQ(report["ranks"], 2);
  const auto& communication = report["communication"];
  EXPECT_GE(communication["buckets"].get<int>(), setup.min_buckets);
  EXPECT_GT(communication["allreduce_seconds_per_step"].get<double>(), 0);
  EXPECT_LE(communication["overlapped_seconds_per_step"].get<double>(),
            communication["allreduce_seconds_per_step"].get<double>());

  const auto a = Losses(dir + "/one"), b = Losses(dir + "/two");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_NEAR(a[i].second, b[i].second, kLossTolerance * std::abs(a[i].second))
        << "step " << a[i].first;
  }
  const auto wa = Weights(dir + "/one"), wb = Weights(dir + "/two");
  ASSERT_FALSE(wa.empty());
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, values] : wa) {
    ASSERT_EQ(values.size(), wb.at(name).size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_NEAR(values[i], wb.at(name)[i], kWeightTolerance * (1 + std::abs(values[i])))
          << name << "[" << i << "]";
    }
  }
}

TEST(DataParallelTest, TwoRanksOfHalfTheBatchTrainLikeOneProcess) {
  ExpectSameTraining(Dir("equal"), RunSetup());
}

TEST(DataParallelTest, ManySmallBucketsAndUpdatesInHostMemory) {
  RunSetup setup;
  setup.bucket = "4KiB";  // the minimum: fc1 and fc2 weights fill one each
  setup.min_buckets = 3;
  setup.memory = "{conv_timing: model, params: host, update: host}";
  ExpectSameTraining(Dir("host"), setup);
}

TEST(DataParallelTest, SyncBatchNormUsesTheGlobalBatch) {
  RunSetup setup;
  setup.model = "bn";
  setup.sync_batch_norm = true;
  ExpectSameTraining(Dir("syncbn"), setup);
}

TEST(DataParallelTest, PerRankBatchNormDiffersFromTheGlobalBatch) {
  const std::string dir = Dir("rankbn");
  RunSetup setup;
  setup.model = "bn";
  Result single = RunJob(
      {kTrain, "--config", WriteConfig(dir, "one", setup), "--no-progress", "--max-steps", "1"},
      dir + "/one.txt");
  ASSERT_EQ(single.code, 0) << single.output;
  Result pair =
      RunJob(TrainJob(2, WriteConfig(dir, "two", setup), {"--max-steps", "1"}), dir + "/two.txt");
  ASSERT_EQ(pair.code, 0) << pair.output;
  const auto a = Losses(dir + "/one"), b = Losses(dir + "/two");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GT(std::abs(a[0].second - b[0].second), 10 * kLossTolerance * std::abs(a[0].second));
}

TEST(DataParallelTest, ResumedRunEndsLikeAnUninterruptedOne) {
  const std::string dir = Dir("resume");
  const std::string whole = WriteConfig(dir, "whole", RunSetup());
  const std::string parts = WriteConfig(dir, "parts", RunSetup());
  auto train = [&](const std::string& config, std::vector<std::string> extra,
                   const std::string& log) {
    return RunJob(TrainJob(2, config, extra), dir + "/" + log);
  };
  Result r = train(whole, {}, "whole.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  r = train(parts, {"--max-steps", "4"}, "first.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(Losses(dir + "/parts").size(), 4u);
  r = train(parts, {"--resume"}, "second.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto a = Losses(dir + "/whole"), b = Losses(dir + "/parts");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b, a);  // bit for bit
  EXPECT_EQ(Weights(dir + "/whole"), Weights(dir + "/parts"));
}

TEST(DataParallelTest, AFailingRankStopsTheJobWithItsMessage) {
  const std::string dir = Dir("fail");
  const std::string good = WriteConfig(dir, "good", RunSetup());
  RunSetup broken;
  broken.data = dir + "/missing";
  const std::string bad = WriteConfig(dir, "bad", broken);
  // Rank 0 starts normally and waits for rank 1 in the first broadcast;
  // rank 1 cannot open its data.
  Result r = RunJob(TwoRankJob(good, bad), dir + "/out.txt");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("train (rank 1 of 2)"));
  EXPECT_THAT(r.output, HasSubstr("missing"));
  EXPECT_THAT(r.output, Not(HasSubstr(kMpiTimedOut))) << r.output;  // stopped, not timed out
}

// Rank 1 gets a device budget too small for the network: out of memory.
TEST(DataParallelTest, ARankOutOfMemoryStopsTheJobWithItsMessage) {
  const std::string dir = Dir("oom");
  const std::string config = WriteConfig(dir, "run", RunSetup());
  Result r = RunJob(TwoRankJob(config, config, {"--device-memory", "96KiB"}), dir + "/out.txt");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("train (rank 1 of 2): out of device memory"));
  EXPECT_THAT(r.output, Not(HasSubstr(kMpiTimedOut))) << r.output;
}

// Ranks that would exchange tensors of different sizes (a heap corrupted, or
// MPI_ERR_TRUNCATE), wait in a collective the other never reaches (a
// deadlock), or train diverging replicas silently: each stops before the
// first step with the first key that differs and both values.
TEST(DataParallelTest, RanksThatDisagreeStopBeforeTheFirstStep) {
  const std::string dir = Dir("disagree");
  const std::string base = WriteConfig(dir, "base", RunSetup());
  struct Case {
    std::string name;
    RunSetup setup;
    std::vector<std::string> extra;
    std::string key;
  };
  std::vector<Case> cases(7);
  cases[0] = {"filters", RunSetup(), {}, "network layer 1 'conv'"};
  cases[0].setup.filters = 8;
  cases[1] = {"syncbn", RunSetup(), {}, "distributed.sync_batch_norm"};
  cases[1].setup.sync_batch_norm = true;
  cases[2] = {"steps", RunSetup(), {"--max-steps", "3"}, "--max-steps"};
  cases[3] = {"lr", RunSetup(), {}, "solver.lr"};
  cases[3].setup.lr = 0.1;
  cases[4] = {"seed", RunSetup(), {}, "run.seed"};
  cases[4].setup.seed = 7;
  cases[5] = {"zero", RunSetup(), {}, "distributed.zero"};
  cases[5].setup.zero = 1;
  cases[6] = {"precision", RunSetup(), {}, "run.precision"};
  cases[6].setup.precision = "bf16";
  for (const Case& c : cases) {
    const std::string other = WriteConfig(dir, c.name, c.setup);
    Result r = RunJob(TwoRankJob(base, other, c.extra), dir + "/" + c.name + ".txt");
    EXPECT_NE(r.code, 0) << c.name << ": " << r.output;
    EXPECT_THAT(
        r.output,
        HasSubstr("the ranks do not train the same thing: they differ first at '" + c.key + "'"))
        << c.name;
    EXPECT_THAT(r.output, HasSubstr(" on rank 1 (every rank must read the same")) << c.name;
    EXPECT_THAT(r.output, Not(HasSubstr(kMpiTimedOut))) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(dir + "/base/checkpoint.npz")) << c.name;  // no step was taken
  }
}

// ZeRO stage 1: each rank keeps the solver state of its own range of the
// parameters and updates only that range; the ranks all-gather the updated
// parameters. Gradient sums are spill's own, in rank order, at every stage,
// so zero 1 trains the same bits as zero 0 on the same ranks; checkpoints
// hold the state whole either way. Each rank sends 2 Psi (N-1) / N floats a
// step at both stages (Psi: the trainable parameters): a reduce-scatter of
// the gradients, then an all-gather of the averages (zero 0) or of the
// updated parameters (zero 1). Rank 0 owns the first floor(Psi / N).
TEST(DataParallelTest, ShardedSolverStateTrainsTheSameBits) {
  struct Case {
    int ranks;
    std::string solver;
    int batch;
    // One convolution algorithm: oneDNN's workspace depends on the threads a
    // rank gets, which plan cannot know.
    std::string memory = "{conv_timing: model, workspace: pin:im2col_image}";
    std::string precision = "fp32";
  };
  const std::string tier = Dir("zero_tier");  // host memory in a file (ZeRO-Infinity's tier)
  const Case cases[] = {
      {2, "adam", 16},
      {3, "sgd", 24},
      {4, "adam", 16},
      // Parameters in host memory, each updated there during backward.
      {2, "sgd", 16,
       "{conv_timing: model, workspace: pin:im2col_image, params: host, update: host}"},
      // The same with host memory in a file.
      {2, "adam", 16,
       "{conv_timing: model, workspace: pin:im2col_image, params: host, update: host, "
       "host_tier: 'file:" +
           tier + "'}"},
      // Activations in bfloat16, and in IEEE half with the loss scaled: the
      // ranks unscale the averaged gradients and agree on every skip.
      {2, "adam", 16, "{conv_timing: model, workspace: pin:im2col_image}", "bf16"},
      {2, "sgd", 16, "{conv_timing: model, workspace: pin:im2col_image}", "fp16"},
  };
  for (const Case& c : cases) {
    const std::string name = std::to_string(c.ranks) + c.solver +
                             (c.memory.find("host") != std::string::npos ? "host" : "") +
                             (c.precision == "fp32" ? "" : c.precision);
    const std::string dir = Dir("zero" + name);
    std::map<std::string, std::vector<float>> weights[4];
    std::vector<std::pair<int64_t, double>> losses[4];
    int64_t peaks[4] = {0, 0, 0, 0}, held[4] = {0, 0, 0, 0}, kept[4] = {0, 0, 0, 0}, psi = 0;
    for (int zero : {0, 1, 2, 3}) {
      if (zero >= 2 && c.memory.find("params: host") != std::string::npos) continue;
      RunSetup setup = WithSolver(c.solver);
      setup.batch = c.batch;
      setup.bucket = "4KiB";  // several buckets, each cut across ranks differently
      setup.memory = c.memory;
      setup.zero = zero;
      setup.precision = c.precision;
      // A scale that overflows the first steps' fp16 gradients.
      if (c.precision == "fp16") setup.loss_scale = int64_t{1} << 20;
      const std::string run = "zero" + std::to_string(zero);
      const std::string config = WriteConfig(dir, run, setup);
      const std::string report = dir + "/" + run + ".json";
      Result r = RunJob(TrainJob(c.ranks, config, {"--report", report}), dir + "/" + run + ".txt");
      ASSERT_EQ(r.code, 0) << name << ": " << r.output;
      const char* said[] = {"", "solver state sharded (zero 1)",
                            "gradients leave the device (zero 2)",
                            "each layer's parameters gathered for its steps (zero 3)"};
      EXPECT_THAT(r.output, HasSubstr(said[zero])) << name;
      // The plan of rank 0 is rank 0's run.
      int64_t planned_parameters = -1;
      if (c.ranks == 2) {
        const std::string planned = dir + "/" + run + "_plan.json";
        Result p = RunJob({kPlan, "--config", config, "--ranks", "2", "--rank", "0", "--memory",
                           "liveness", "--timing", "model", "--json"},
                          planned);
        ASSERT_EQ(p.code, 0) << p.output;
        const auto plan = nlohmann::json::parse(p.output);
        EXPECT_EQ(plan["zero"], zero);
        EXPECT_EQ(plan["parameters_gathered"], zero == 3);
        planned_parameters = plan["model_state_bytes"]["parameters"].get<int64_t>();
        EXPECT_EQ(plan["modes"][0]["peak_bytes"].get<int64_t>(),
                  nlohmann::json::parse(ReadAll(report))["peak_device_memory_bytes"].get<int64_t>())
            << name << " zero " << zero;
      }
      losses[zero] = Losses(dir + "/" + run);
      weights[zero] = Weights(dir + "/" + run);
      if (c.precision == "fp16") {  // the first steps skipped, the last not
        const std::string log = ReadAll(dir + "/" + run + "/log.jsonl");
        EXPECT_THAT(log.substr(0, log.find('\n')), HasSubstr("\"skipped\":true")) << name;
        EXPECT_THAT(log.substr(log.rfind("\"kind\":\"train\"")), HasSubstr("\"skipped\":false"))
            << name;
      }
      psi = 0;
      for (const auto& [key, values] : weights[zero]) {
        if (key.rfind("params/", 0) == 0) psi += static_cast<int64_t>(values.size());
      }
      // Rank 0's parameters: whole, or at zero 3 its range of them.
      if (planned_parameters >= 0) {
        EXPECT_EQ(planned_parameters, 4 * (zero == 3 ? psi / c.ranks : psi)) << name;
      }
      const auto figures = nlohmann::json::parse(ReadAll(report));
      peaks[zero] = figures["peak_device_memory_bytes"].get<int64_t>();
      kept[zero] = figures["persistent_device_memory_bytes"].get<int64_t>();
      held[zero] = figures["communication"]["reduction_host_bytes"].get<int64_t>();
      const double sent = figures["communication"]["floats_sent_per_step"].get<double>();
      if (zero < 3) {
        EXPECT_EQ(sent, static_cast<double>(psi + (c.ranks - 2) * (psi / c.ranks)))
            << name << " zero " << zero;
        EXPECT_NEAR(sent, 2.0 * psi * (c.ranks - 1) / c.ranks, c.ranks) << name << " zero " << zero;
        continue;
      }
      // Zero 3: the reduce-scatter, then rank 0's piece to every other rank
      // for each layer's forward and again for its backward.
      EXPECT_EQ(sent, static_cast<double>(psi + (2 * c.ranks - 3) * (psi / c.ranks))) << name;
      EXPECT_NEAR(sent, 3.0 * psi * (c.ranks - 1) / c.ranks, 2 * c.ranks) << name;
    }
    ASSERT_EQ(losses[0].size(), 8u) << name;
    EXPECT_EQ(losses[1], losses[0]) << name;  // bit for bit
    ASSERT_FALSE(weights[0].empty());
    EXPECT_EQ(weights[1], weights[0]) << name;  // parameters and whole state
    // The reduction's host buffers: every gradient, whole, at zero 0; at 1
    // and 2 this rank's averages and the buckets being filled or reduced.
    EXPECT_GE(held[0], 4 * psi) << name;
    EXPECT_LT(held[1], held[0]) << name;
    if (!losses[2].empty()) {
      EXPECT_EQ(losses[2], losses[0]) << name;
      EXPECT_EQ(weights[2], weights[0]) << name;
      // The gradients are on the device only around their layer's backward.
      EXPECT_LT(peaks[2], peaks[1]) << name;
      // And at zero 3 the whole parameters only around their layer's steps:
      // between iterations rank 0 keeps its piece of them alone. (Its peak
      // is not lower here: one layer holds 98% of this network's
      // parameters, and its steps need them whole.)
      EXPECT_EQ(losses[3], losses[0]) << name;
      EXPECT_EQ(weights[3], weights[0]) << name;
      // (Each of the 8 parameters and their pieces rounds up to a block.)
      EXPECT_NEAR(kept[2] - kept[3], 4 * (psi - psi / c.ranks), kPoolBlock * 16) << name;
    }
    if (c.memory.find("update: host") != std::string::npos) {
      EXPECT_EQ(peaks[1], peaks[0]) << name;  // the state never enters the device
      continue;
    }
    // Rank 0's device memory holds its shard of the state alone: the peak
    // falls by the rest, up to the pool's rounding of each state tensor.
    const int64_t states = c.solver == "adam" ? 2 : 1;
    const int64_t tensors = states * static_cast<int64_t>(weights[0].size()) / (1 + states);
    EXPECT_NEAR(peaks[0] - peaks[1], states * 4 * (psi - psi / c.ranks), kPoolBlock * tensors)
        << name;
  }
}

// A sharded run's checkpoint holds the state whole: it resumes at zero 0 on
// the same ranks exactly as the uninterrupted run ends, and on another
// number of ranks at all.
TEST(DataParallelTest, ShardedCheckpointsResumeOnAnyStageOrRankCount) {
  const std::string dir = Dir("zero_resume");
  RunSetup sharded = WithSolver("adam");
  sharded.zero = 1;
  RunSetup replicated = sharded;
  replicated.zero = 0;
  Result r = RunJob(TrainJob(2, WriteConfig(dir, "whole", sharded)), dir + "/whole.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string first = WriteConfig(dir, "parts", sharded);
  r = RunJob(TrainJob(2, first, {"--max-steps", "4"}), dir + "/first.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  fs::copy(dir + "/parts", dir + "/other", fs::copy_options::recursive);
  r = RunJob(TrainJob(2, WriteConfig(dir, "parts", replicated), {"--resume"}), dir + "/second.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(Losses(dir + "/parts"), Losses(dir + "/whole"));  // bit for bit
  EXPECT_EQ(Weights(dir + "/parts"), Weights(dir + "/whole"));
  // Four ranks of a quarter of the batch each take the state over.
  r = RunJob(TrainJob(4, WriteConfig(dir, "other", sharded), {"--resume"}), dir + "/four.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(Losses(dir + "/other").size(), 8u);
}

// The process of rank `rank` of the job training on `config` (its command
// line names the config; its environment, the rank), or 0.
pid_t RankProcess(const std::string& config, int rank) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string command = ReadAll(entry.path().string() + "/cmdline");
    std::replace(command.begin(), command.end(), '\0', ' ');
    if (command.find(kTrain) == std::string::npos || command.find(config) == std::string::npos) {
      continue;
    }
    std::string environment = ReadAll(entry.path().string() + "/environ");
    std::replace(environment.begin(), environment.end(), '\0', '\n');
    if (("\n" + environment).find("\n" + wanted + "\n") != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

// A rank killed outright (SIGKILL: no chance to say anything) in the middle
// of training: the job ends within seconds, not at mpirun's time limit, and
// the last checkpoint resumes.
void KillARankAndResume(int zero) {
  const std::string dir = Dir("killed" + std::to_string(zero));
  RunSetup setup;
  setup.zero = zero;
  setup.steps = 100000;  // far longer than the test: it ends by the kill
  const std::string config = WriteConfig(dir, "run", setup);
  const std::string checkpoint = dir + "/run/checkpoint.npz";
  std::chrono::steady_clock::time_point killed;
  bool done = false;
  Result r = RunJob(TrainJob(2, config), dir + "/out.txt", [&] {
    if (done || !fs::exists(checkpoint)) return;
    const pid_t rank1 = RankProcess(config, 1);
    if (rank1 == 0) return;
    killed = std::chrono::steady_clock::now();
    kill(rank1, SIGKILL);
    done = true;
  });
  ASSERT_TRUE(done) << r.output;
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(after, kEndAfterKillSeconds) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr(kMpiTimedOut))) << r.output;
  const auto before = Losses(dir + "/run");
  ASSERT_FALSE(before.empty());
  auto saved = ReadNpz(checkpoint);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  const int64_t step = saved->at("meta/step").int64();
  EXPECT_EQ(step % 4, 0);  // a checkpoint of a whole step, written atomically
  Result resumed =
      RunJob(TrainJob(2, config, {"--resume", "--max-steps", "4"}), dir + "/resumed.txt");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto after_resume = ReadNpz(checkpoint);
  ASSERT_TRUE(after_resume.ok());
  EXPECT_EQ(after_resume->at("meta/step").int64(), step + 4);
}

// At zero 3 the survivor may be waiting in a gather, on its own thread.
TEST(DataParallelTest, AKilledRankEndsTheJobAndTheLastCheckpointResumes) {
  for (int zero : {1, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    KillARankAndResume(zero);
  }
}

// Zero 3 with what it cannot do: compare replicas (no rank holds the
// parameters whole), or keep the parameters in host memory (they are
// sharded instead).
TEST(DataParallelTest, ZeroThreeRefusesWhatItCannotDoByName) {
  const std::string dir = Dir("zero_stage");
  RunSetup setup;
  setup.zero = 3;
  const std::string config = WriteConfig(dir, "run", setup);
  std::string text = ReadAll(config);
  const std::string replicas = "check_replicas: false";
  ASSERT_NE(text.find(replicas), std::string::npos);
  text.replace(text.find(replicas), replicas.size(), "check_replicas: true");
  std::ofstream(dir + "/replicas.yaml") << text;
  Result r =
      RunJob({kTrain, "--config", dir + "/replicas.yaml", "--no-progress"}, dir + "/replicas.txt");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("distributed.check_replicas"));
  EXPECT_THAT(r.output, HasSubstr("at zero 3 each rank holds its own piece"));

  setup.memory = "{conv_timing: model, params: host}";
  r = RunJob(TrainJob(2, WriteConfig(dir, "host", setup)), dir + "/host.txt");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("need parameters on the device (memory.params: device)"));
}

// One process computing each batch in N micro-batches and adding their
// gradients in order (run.micro_batches) trains exactly what N ranks train,
// at stage 0 and at stage 3: each rank's part of the batch is a micro-batch,
// and the reduction adds the ranks' gradients in rank order.
TEST(DataParallelTest, OneProcessAccumulatingMicroBatchesTrainsLikeTheRanks) {
  for (const auto& [ranks, solver] : {std::pair<int, std::string>{2, "adam"}, {4, "sgd"}}) {
    const std::string dir = Dir("micro" + std::to_string(ranks));
    RunSetup setup = WithSolver(solver);
    setup.batch = 8 * ranks;
    setup.memory = "{conv_timing: model, workspace: pin:im2col_image}";
    RunSetup accumulated = setup;
    accumulated.micro_batches = ranks;
    Result r = RunJob({kTrain, "--config", WriteConfig(dir, "one", accumulated), "--no-progress"},
                      dir + "/one.txt");
    ASSERT_EQ(r.code, 0) << r.output;
    for (int zero : {0, 3}) {
      setup.zero = zero;
      const std::string run = "zero" + std::to_string(zero);
      r = RunJob(TrainJob(ranks, WriteConfig(dir, run, setup)), dir + "/" + run + ".txt");
      ASSERT_EQ(r.code, 0) << r.output;
      EXPECT_EQ(Losses(dir + "/" + run), Losses(dir + "/one")) << ranks << " zero " << zero;
      EXPECT_EQ(Weights(dir + "/" + run), Weights(dir + "/one")) << ranks << " zero " << zero;
    }
  }
}

// Stage 3's point: a per-rank device budget below the replicated model
// state (parameters, gradients and momentum: 3 x 4 Psi bytes) trains, on 4
// ranks, where stage 2 - the parameters whole on every rank - does not.
TEST(DataParallelTest, AtZeroThreeABudgetBelowTheReplicatedModelStateTrains) {
  const std::string dir = Dir("zero3_budget");
  RunSetup setup;
  setup.model = "mlp";
  setup.memory = "{conv_timing: model, device_budget: 1MiB}";
  for (int zero : {2, 3}) {
    setup.zero = zero;
    const std::string run = "zero" + std::to_string(zero);
    Result r =
        RunJob(TrainJob(4, WriteConfig(dir, run, setup), {"--report", dir + "/" + run + ".json"}),
               dir + "/" + run + ".txt");
    if (zero == 2) {
      EXPECT_NE(r.code, 0);
      EXPECT_THAT(r.output, HasSubstr("out of device memory")) << r.output;
      continue;
    }
    ASSERT_EQ(r.code, 0) << r.output;
    int64_t psi = 0;
    for (const auto& [key, values] : Weights(dir + "/" + run)) {
      if (key.rfind("params/", 0) == 0) psi += static_cast<int64_t>(values.size());
    }
    const auto report = nlohmann::json::parse(ReadAll(dir + "/" + run + ".json"));
    EXPECT_LE(report["peak_device_memory_bytes"].get<int64_t>(), int64_t{1} << 20);
    EXPECT_GT(3 * 4 * psi, int64_t{1} << 20);  // the replicated model state
    EXPECT_EQ(Losses(dir + "/" + run).size(), 8u);
  }
}

// Every rank takes part in every gather at zero 3, so a rank whose slice
// of the test split needs fewer batches runs unscored ones: 17 test images
// on 2 ranks are slices of 8 and 9, one batch of 8 and two. The figures are
// zero 0's.
TEST(DataParallelTest, AtZeroThreeRanksEvaluateUnevenSlicesTogether) {
  const std::string dir = Dir("zero3_eval");
  const std::string data = dir + "/data";
  fs::create_directories(data);
  WriteIdx(data, "train", 64);
  WriteIdx(data, "t10k", 17);
  RunSetup setup;
  setup.data = data;
  std::vector<std::string> evals[2];
  for (int zero : {0, 3}) {
    setup.zero = zero;
    const std::string run = "zero" + std::to_string(zero);
    Result r = RunJob(TrainJob(2, WriteConfig(dir, run, setup)), dir + "/" + run + ".txt");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("(17 images)"));
    std::ifstream in(dir + "/" + run + "/log.jsonl");
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"eval\"") != std::string::npos) evals[zero / 3].push_back(line);
    }
  }
  ASSERT_EQ(evals[0].size(), 2u);
  EXPECT_EQ(evals[1], evals[0]);
}

// Zero 3's checkpoints hold the parameters and the state whole: a stopped
// run resumes at zero 3 exactly as the uninterrupted run ends (every rank
// reads its own pieces), and at zero 0 too.
TEST(DataParallelTest, ShardedParametersResumeExactly) {
  const std::string dir = Dir("zero3_resume");
  RunSetup sharded = WithSolver("adam");
  sharded.zero = 3;
  sharded.model = "bn";
  RunSetup replicated = sharded;
  replicated.zero = 0;
  Result r = RunJob(TrainJob(2, WriteConfig(dir, "whole", sharded)), dir + "/whole.txt");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const RunSetup* then : {&sharded, &replicated}) {
    const std::string run = then->zero == 3 ? "parts" : "parts0";
    r = RunJob(TrainJob(2, WriteConfig(dir, run, sharded), {"--max-steps", "4"}),
               dir + "/" + run + "_first.txt");
    ASSERT_EQ(r.code, 0) << r.output;
    r = RunJob(TrainJob(2, WriteConfig(dir, run, *then), {"--resume"}),
               dir + "/" + run + "_second.txt");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(Losses(dir + "/" + run), Losses(dir + "/whole")) << run;  // bit for bit
    EXPECT_EQ(Weights(dir + "/" + run), Weights(dir + "/whole")) << run;
  }
}

TEST(DataParallelTest, GlobalBatchMustSplitEvenly) {
  const std::string dir = Dir("uneven");
  std::string config = WriteConfig(dir, "run", RunSetup());
  Result r = RunJob(TrainJob(3, config), dir + "/out.txt");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("3 ranks cannot split evenly"));
}

// Synchronized statistics need each rank's whole batch at once.
TEST(DataParallelTest, SyncBatchNormRefusesBatchSlices) {
  const std::string dir = Dir("sync_slices");
  RunSetup setup;
  setup.model = "bn";
  setup.sync_batch_norm = true;
  setup.memory = "{conv_timing: model, chunk: 2}";
  std::string config = WriteConfig(dir, "run", setup);
  Result r = RunJob(TrainJob(2, config), dir + "/out.txt");
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("sync_batch_norm needs whole batches; set memory.chunk: off"));
}

}  // namespace
}  // namespace spill
