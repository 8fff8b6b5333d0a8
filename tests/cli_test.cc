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
#include <map>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "framework/io/npz.h"
#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kLimitSeconds = testing::kToolLimitSeconds;
// What a refusal may cost: processor time, limited by the kernel (a child
// past it ends with SIGXCPU, not with the refusal's exit code), so a loaded
// machine cannot fail these checks.
constexpr int kRefusalCpuSeconds = 10;

using Result = testing::ToolResult;
using testing::ReadAll;
using testing::RunTool;

// `args` as RunTool runs them, within kRefusalCpuSeconds of processor time.
Result RunRefused(const std::vector<std::string>& args) {
  testing::ChildLimits limits;
  limits.cpu_seconds = kRefusalCpuSeconds;
  return RunTool(args, kLimitSeconds, /*with_stderr=*/true, limits);
}

std::string Dir(const std::string& name) { return testing::FreshDir("spill_cli_" + name); }

void WriteIdx(const std::string& dir, const std::string& prefix, uint32_t count) {
  testing::WriteIdx(dir, prefix, count, [](uint32_t i, uint32_t p) {
    return static_cast<uint8_t>((i * 31 + p) % 256);
  });
}

// A small config training a tiny network on 64 synthetic images, with
// `memory` as its memory: section.
std::string WriteConfig(const std::string& dir, int epochs,
                        const std::string& memory = "{conv_timing: model}") {
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
                      << "memory: " << memory << "\n"
                      << "run: {epochs: " << epochs << ", output: " << dir << "/run}\n";
  return path;
}

// ---------------------------------------------------------------------- plan

TEST(CliTest, BadNumbersNameTheFlagAndEndQuickly) {
  Result r = RunRefused({"tools/plan", "--config", "models/lenet.yaml", "--batch", "2147483648"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--batch: '2147483648' is not an integer in [1, 1048576]"));
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--batch", "32abc"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--batch: '32abc' is not an integer"));
  r = RunTool({"tools/plan", "--config", "models/lenet.yaml", "--device-memory", "12XB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--device-memory: '12XB': unknown unit 'XB'"));
  r = RunTool({"tools/deepest", "--minimum"});  // plan's, not deepest's
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--minimum"));
}

TEST(CliTest, HelpComesFromTheDeclarations) {
  for (const char* tool :
       {"tools/plan", "tools/train", "tools/deepest", "tools/widest", "tools/bench/bench_train"}) {
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

// ------------------------------------------------------ the memory policy flags

// A small run of each tool that takes the memory flags: a tiny network, a
// budget that stops the searches after a few plans, one training step.
std::vector<std::string> SmallRun(const std::string& tool) {
  const std::vector<std::string> tiny = {"--set",      "width=4", "--set",
                                         "classes=10", "--set",   "stem=cifar"};
  // Benchmarks live in tools/bench, the other programs in tools/.
  std::vector<std::string> args = {tool.rfind("bench_", 0) == 0 ? "tools/bench/" + tool
                                                                : "tools/" + tool};
  if (tool == "plan") args.insert(args.end(), {"--config", "models/lenet.yaml", "--batch", "4"});
  if (tool == "widest") args.insert(args.end(), {"--config", "models/lenet.yaml"});
  if (tool == "deepest") {
    args.insert(args.end(), tiny.begin(), tiny.end());
    args.insert(args.end(), {"--size", "8", "--batch", "1"});
  }
  if (tool == "bench_train") {
    args.insert(args.end(),
                {"--config", "models/lenet.yaml", "--batch", "4", "--steps", "1", "--warmup", "0"});
  }
  return args;
}

Result RunWith(const std::string& tool, const std::vector<std::string>& flags) {
  std::vector<std::string> args = SmallRun(tool);
  args.insert(args.end(), flags.begin(), flags.end());
  return RunTool(args);
}

// RunWith for a run that must be refused before any work.
Result RefusedWith(const std::string& tool, const std::vector<std::string>& flags) {
  std::vector<std::string> args = SmallRun(tool);
  args.insert(args.end(), flags.begin(), flags.end());
  return RunRefused(args);
}

const char* const kMemoryTools[] = {"plan", "deepest", "widest", "bench_train"};

using FlagValues = std::vector<std::pair<std::string, std::string>>;

// Every shared memory flag, and the superneurons scheduler's own, with a
// value each tool that trains can use. (The other policies' flags are
// errors under superneurons, which does not read them:
// PolicyFlagsAreReadByTheirModesOnly.)
FlagValues EveryMemoryFlag() {
  return {{"--memory", "superneurons"},
          {"--device-memory", "4MiB"},
          {"--host-memory", "8MiB"},
          {"--host-tier", "ram"},
          {"--params", "host"},
          {"--update", "host"},
          {"--allocator", "best_fit"},
          {"--compact", "false"},
          {"--eviction", "belady"},
          {"--workspace", "memory_optimal"},
          {"--recompute-strategy", "speed"},
          {"--prefetch-ahead", "2"},
          {"--chunk", "off"}};
}

std::vector<std::string> Flatten(const FlagValues& given) {
  std::vector<std::string> flags;
  for (const auto& [flag, value] : given) flags.insert(flags.end(), {flag, value});
  return flags;
}

// Every memory flag, spelled once, in every tool; and each tool reports the
// policy it was given, so the flags were applied, not only accepted.
TEST(CliTest, MemoryFlagsAreSpelledAlikeInEveryTool) {
  const FlagValues given = EveryMemoryFlag();
  const std::vector<std::string> flags = Flatten(given);
  const std::map<std::string, std::string> applied = {
      {"plan", "best_fit allocator"},
      {"deepest",
       "memory superneurons, best_fit without compaction, parameters host (updated on "
       "host)"},
      {"widest",
       "memory superneurons, best_fit without compaction, parameters host (updated on "
       "host)"},
      {"bench_train", "of a 4.00 MiB budget, superneurons"}};
  for (const char* tool : kMemoryTools) {
    Result r = RunWith(tool, flags);
    EXPECT_EQ(r.code, 0) << tool << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(applied.at(tool))) << tool;
  }
}

// Old spellings stay: --no-compact is --compact false, --barrier alone is
// --barrier true; giving an alias and its flag together is an error.
TEST(CliTest, OldSpellingsOfMemoryFlagsStillWork) {
  for (const char* tool : kMemoryTools) {
    Result r = RunWith(tool, {"--memory", "dymem", "--device-memory", "16MiB", "--no-compact",
                              "--allocator", "best_fit", "--barrier"});
    EXPECT_EQ(r.code, 0) << tool << "\n" << r.output;
    if (std::string(tool) == "widest" || std::string(tool) == "deepest") {
      EXPECT_THAT(r.output, HasSubstr("best_fit without compaction")) << tool;
    }
    r = RunWith(tool, {"--no-compact", "--compact", "true"});
    EXPECT_EQ(r.code, 2) << tool;
    EXPECT_THAT(r.output, HasSubstr("--no-compact: is --compact false; give one of them")) << tool;
  }
}

// Each policy's flags work under the modes whose policies read them; under
// a mode that does not read one it is an error naming the mode, in every
// tool - never a value accepted and ignored.
TEST(CliTest, PolicyFlagsAreReadByTheirModesOnly) {
  const std::vector<std::pair<std::vector<std::string>, FlagValues>> owned = {
      {{"--memory", "window"}, {{"--window", "1.2x"}, {"--window-budget", "0.9x"}}},
      {{"--memory", "lms"}, {{"--lms-threshold", "5"}, {"--lms-ahead", "1"}}},
      {{"--memory", "dymem"},
       {{"--release", "eager"},
        {"--prefetch", "ahead"},
        {"--offload-set", "conv"},
        {"--barrier", "true"},
        {"--min-offload", "64KiB"}}},
      {{"--memory", "liveness", "--allocator", "va"}, {{"--va-chunk", "64KiB"}}},
      {{"--memory", "superneurons"},
       {{"--eviction", "belady"}, {"--prefetch-ahead", "5"}, {"--recompute-strategy", "memory"}}},
  };
  for (const auto& [mode, flags] : owned) {
    std::vector<std::string> args = mode;
    for (const std::string& f : Flatten(flags)) args.push_back(f);
    Result r = RunWith("plan", args);
    EXPECT_EQ(r.code, 0) << mode[1] << "\n" << r.output;
  }
  for (const char* tool : {"plan", "bench_train"}) {
    for (const auto& [mode, flags] : owned) {
      for (const auto& [flag, value] : flags) {
        Result r = RunWith(tool, {"--memory", "liveness", flag, value});
        EXPECT_NE(r.code, 0) << tool << " " << flag;
        EXPECT_THAT(r.output, HasSubstr(flag + ": mode 'liveness' does not read it")) << tool;
      }
    }
  }
  Result r = RunWith("plan", {"--memory", "liveness", "--size-pool"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(
      r.output,
      HasSubstr("--size-pool sizes the pool of an allocator that sizes its own (gtbm); mode "
                "'liveness' places with the first_fit allocator (use --memory "
                "dymem or --allocator gtbm)"));
  r = RunWith("plan", {"--memory", "dymem", "--size-pool"});
  EXPECT_EQ(r.code, 0) << r.output;
}

// A bad value is refused by every tool alike, before any work, naming the flag.
TEST(CliTest, BadMemoryFlagValuesNameTheFlagInEveryTool) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--compact", "maybe"}, "--compact: 'maybe' is not true or false"},
      {{"--allocator", "nope"}, "--allocator: 'nope' is not one of: "},
      {{"--memory", "nope"}, "--memory: unknown memory mode 'nope'"},
      {{"--device-memory", "12XB"}, "--device-memory: '12XB': unknown unit 'XB'"},
      {{"--va-chunk", "5000"}, "--va-chunk: memory: va_chunk must be a positive multiple of 4 KiB"},
      {{"--window-budget", "0.8y"}, "--window-budget: '0.8y' is neither a multiple"},
      {{"--prefetch-ahead", "-1"}, "--prefetch-ahead: '-1' is not an integer in [0, 1024]"},
      {{"--release", "soon"}, "--release: 'soon' is not one of: lazy, eager"},
      {{"--host-tier", "disk"}, "--host-tier: memory: host_tier must be ram or file:"},
      {{"--chunk", "2MiB"}, "--chunk: "},
      {{"--planner-gamma", "1.5"}, "--planner-gamma: memory.planner.gamma must be in [0, 1]"},
      {{"--planner-profile", "tpu9"}, "--planner-profile: unknown device profile 'tpu9'"},
      {{"--planner-episodes", "0"}, "--planner-episodes: '0' is not an integer in [1, "},
      {{"--lms-order", "biggest"}, "--lms-order: 'biggest' is not one of: largest, earliest"},
  };
  for (const char* tool : kMemoryTools) {
    for (const auto& [flags, message] : cases) {
      Result r = RefusedWith(tool, flags);
      EXPECT_EQ(r.code, 2) << tool << " " << flags[0] << "\n" << r.output;
      EXPECT_THAT(r.output, HasSubstr(message)) << tool;
    }
  }
}

// Values a tool cannot use are refused with the reason, never ignored.
TEST(CliTest, MemoryFlagValuesAToolCannotUseAreRefused) {
  for (const char* tool : {"plan", "bench_train"}) {
    Result r = RunWith(tool, {"--window-budget", "search"});
    EXPECT_EQ(r.code, 2) << tool;
    EXPECT_THAT(r.output,
                HasSubstr("--window-budget: 'search' is for the tools that search (deepest, "
                          "widest)"))
        << tool;
  }
  Result r = RunWith(
      "widest", {"--memory", "window", "--device-memory", "16MiB", "--window-budget", "search"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the window scheduler's window_budget"));
  r = RunWith("bench_train", {"--allocator", "ideal"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--allocator: 'ideal' is plan only"));
  r = RunWith("widest", {"--allocator", "ideal", "--confirm", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--allocator: 'ideal' is plan only"));
  r = RunWith("plan", {"--allocator", "ideal", "--memory", "liveness"});
  EXPECT_EQ(r.code, 0) << r.output;
}

// A confirmation asked for and not made is a failure: the search's result is
// printed, then why it was not trained (ResNet-50's largest batch under
// 1 PiB needs terabytes of host memory), and the exit code is 1.
TEST(CliTest, AnUnconfirmedConfirmFails) {
  const Result r = RunTool({"tools/widest", "--config", "models/resnet50.yaml", "--device-memory",
                            "1PiB", "--confirm", "1"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("largest batch of resnet50 under 1.00 PiB"));
  EXPECT_THAT(r.output, ::testing::MatchesRegex(
                            "(.|\n)*not confirmed: resnet50 at batch [0-9]+ was found by "
                            "planning, but --confirm 1 could not train it here: it needs about "
                            "[0-9.]+ TiB of host memory(.|\n)*"));
}

// ------------------------------------------ train and eval: flags over a config

// One step of train on `config`, with `flags` (`refused`: within
// kRefusalCpuSeconds).
Result Train(const std::string& config, const std::vector<std::string>& flags,
             bool refused = false) {
  std::vector<std::string> args = {"tools/train", "--config",    config, "--no-progress",
                                   "--overwrite", "--max-steps", "1"};
  args.insert(args.end(), flags.begin(), flags.end());
  return refused ? RunRefused(args) : RunTool(args);
}

// eval of `checkpoint` under `config`, with `flags`.
Result Eval(const std::string& config, const std::string& checkpoint,
            const std::vector<std::string>& flags, bool refused = false) {
  std::vector<std::string> args = {"tools/eval", "--config", config, "--checkpoint", checkpoint};
  args.insert(args.end(), flags.begin(), flags.end());
  return refused ? RunRefused(args) : RunTool(args);
}

// train and eval take the flags of the tools that plan, spelled alike, and
// run under them: train's startup line and eval's result name the policy.
TEST(CliTest, TrainAndEvalTakeTheSharedMemoryFlags) {
  const std::string dir = Dir("train_flags");
  const std::string config = WriteConfig(dir, 1);
  Result r = Train(config, Flatten(EveryMemoryFlag()));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("memory superneurons ("));
  EXPECT_THAT(r.output, HasSubstr("best_fit allocator, belady eviction"));
  EXPECT_THAT(r.output, HasSubstr("no compaction, parameters host, updated on host, device "
                                  "budget 4.00 MiB"));
  FlagValues evaluating;  // eval runs no backward pass and no solver update
  for (const auto& given : EveryMemoryFlag()) {
    if (given.first != "--update" && given.first != "--recompute-strategy") {
      evaluating.push_back(given);
    }
  }
  r = Eval(config, dir + "/run/checkpoint.npz", Flatten(evaluating));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("images, memory superneurons)"));
}

// A flag given overrides the config's memory: section key by key; a flag not
// given leaves the config's value; the config file is never rewritten.
TEST(CliTest, MemoryFlagsOverrideTheConfigOnlyWhereGiven) {
  const std::string dir = Dir("train_overrides");
  const std::string config =
      WriteConfig(dir, 1,
                  "{conv_timing: model, mode: liveness, device_budget: 64MiB, allocator: best_fit, "
                  "chunk: 8}");
  const std::string text = ReadAll(config);
  Result r = Train(config, {});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* part : {"memory liveness (", "best_fit allocator", "batch slices of 8",
                           "device budget 64.00 MiB"}) {
    EXPECT_THAT(r.output, HasSubstr(part)) << "no flags";
  }
  r = Train(config, {"--device-memory", "32MiB", "--chunk", "off"});
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part : {"memory liveness (", "best_fit allocator", "device budget 32.00 MiB"}) {
    EXPECT_THAT(r.output, HasSubstr(part)) << "--device-memory --chunk";
  }
  EXPECT_THAT(r.output, Not(HasSubstr("batch slices")));
  r = Train(config, {"--memory", "superneurons"});
  EXPECT_EQ(r.code, 0) << r.output;
  for (const char* part : {"memory superneurons (", "best_fit allocator", "batch slices of 8",
                           "device budget 64.00 MiB"}) {
    EXPECT_THAT(r.output, HasSubstr(part)) << "--memory";
  }
  const std::string checkpoint = dir + "/run/checkpoint.npz";
  r = Eval(config, checkpoint, {});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("images, memory liveness)"));
  r = Eval(config, checkpoint, {"--memory", "superneurons", "--device-memory", "32MiB"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("images, memory superneurons)"));
  EXPECT_EQ(ReadAll(config), text);
}

// What train or eval cannot use is refused before any work, naming the flag.
TEST(CliTest, TrainAndEvalRefuseMemoryFlagsTheyCannotUse) {
  const std::string dir = Dir("train_refusals");
  const std::string config = WriteConfig(dir, 1);
  const std::string checkpoint = dir + "/unread.npz";  // parsing stops before it is read
  std::ofstream(checkpoint) << "x";
  const std::vector<std::pair<std::vector<std::string>, std::string>> both = {
      {{"--window-budget", "search"},
       "--window-budget: 'search' is for the tools that search (deepest, widest)"},
      {{"--allocator", "ideal"}, "--allocator: 'ideal' is plan only"},
      {{"--memory", "nope"}, "--memory: unknown memory mode 'nope'"},
      {{"--chunk", "2MiB"}, "--chunk: "},
      {{"--planner-gamma", "1.5"}, "--planner-gamma: memory.planner.gamma must be in [0, 1]"},
      {{"--planner-profile", "tpu9"}, "--planner-profile: unknown device profile 'tpu9'"},
      {{"--planner-episodes", "0"}, "--planner-episodes: '0' is not an integer in [1, "},
      {{"--lms-order", "biggest"}, "--lms-order: 'biggest' is not one of: largest, earliest"},
  };
  for (const auto& [flags, message] : both) {
    for (const Result& r : {Train(config, flags, /*refused=*/true),
                            Eval(config, checkpoint, flags, /*refused=*/true)}) {
      EXPECT_EQ(r.code, 2) << flags[0] << "\n" << r.output;
      EXPECT_THAT(r.output, HasSubstr(message));
    }
  }
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--update", "host"},
        std::vector<std::string>{"--recompute-strategy", "speed"}}) {
    Result r = Eval(config, checkpoint, flags);
    EXPECT_EQ(r.code, 2) << flags[0] << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(flags[0] + ": '" + flags[1] +
                                    "' acts on backward passes and solver updates, and this "
                                    "tool runs neither"));
  }
  // Settings of the scheduler liveness runs with that liveness makes moot.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--recompute-strategy", "memory"},
        std::vector<std::string>{"--prefetch-ahead", "5"}}) {
    Result r = Train(config, {"--memory", "liveness", flags[0], flags[1]}, /*refused=*/true);
    EXPECT_EQ(r.code, 2) << flags[0] << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(flags[0] + ": mode 'liveness' does not read it (the "
                                               "superneurons scheduler reads it only when it"));
  }
}

// --------------------------------------------------------------------- train

// A check that needs only the config and the data's size comes before
// anything that grows with the batch: LeNet at batch 100,000 on 512 images
// is refused as soon as the data is opened, within the kernel's limits on
// the child (2 s of processor time; its largest resident set read back).
// One rank of a data-parallel run with its share of the model state: the
// deepest network it holds is at least one process's, and grows with each
// stage; --zero needs --ranks.
TEST(CliTest, DeepestPlansOneRankOfAShardedRun) {
  auto depth = [](const Result& r) {
    const std::string key = "depth ";
    const size_t at = r.output.find(key);
    return at == std::string::npos ? -1L : std::stol(r.output.substr(at + key.size()));
  };
  const std::vector<std::string> budget = {"--device-memory", "3MiB", "--memory", "superneurons"};
  std::vector<long> depths;
  for (const std::vector<std::string>& ranks : {std::vector<std::string>{},
                                                {"--ranks", "4", "--zero", "1"},
                                                {"--ranks", "4", "--zero", "2"},
                                                {"--ranks", "4", "--zero", "3"}}) {
    std::vector<std::string> flags = budget;
    flags.insert(flags.end(), ranks.begin(), ranks.end());
    Result r = RunWith("deepest", flags);
    ASSERT_EQ(r.code, 0) << r.output;
    if (!ranks.empty()) {
      EXPECT_THAT(r.output, HasSubstr("one of 4 data-parallel ranks (zero " + ranks[3] + ")"));
    }
    depths.push_back(depth(r));
  }
  EXPECT_GT(depths[0], 0);
  EXPECT_GE(depths[1], depths[0]);
  EXPECT_GT(depths[2], depths[1]);
  EXPECT_GT(depths[3], depths[2]);
  Result refused = RefusedWith("deepest", {"--zero", "1"});
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("--zero 1 shards over data-parallel ranks: give --ranks N"));
  // plan --rank names one of the ranks.
  Result rank = RunWith("plan", {"--ranks", "2", "--rank", "2"});
  EXPECT_NE(rank.code, 0) << rank.output;
  EXPECT_THAT(rank.output, HasSubstr("--rank 2 is not one of the 2 ranks (0 to 1)"));
}

// plan --steps lists every step with the images each call computes: the
// batch ("all") unless the step is streamed or computed in slices.
TEST(CliTest, PlanStepsShowTheImagesOfEachCall) {
  Result r = RunWith("plan", {"--steps", "--precision", "bf16"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("images/call"));
  EXPECT_THAT(r.output, HasSubstr(" all "));
}

// In 16 bits plan names the layers that compute on float32 copies of their
// 16-bit tensors (on the CPU the fully connected layers and the loss) and
// the largest copies a step of theirs needs; in float32 it says nothing of
// them.
TEST(CliTest, PlanNamesTheLayersOnFloat32Copies) {
  Result bf16 = RunWith("plan", {"--precision", "bf16", "--memory", "liveness"});
  ASSERT_EQ(bf16.code, 0) << bf16.output;
  EXPECT_THAT(bf16.output, HasSubstr("compute on float32 copies of their 16-bit tensors ("));
  EXPECT_THAT(bf16.output, HasSubstr("fully_connected "));
  EXPECT_THAT(bf16.output, HasSubstr("the largest step's copies: "));
  EXPECT_THAT(bf16.output, Not(HasSubstr("convolution ")));
  Result fp32 = RunWith("plan", {"--memory", "liveness"});
  ASSERT_EQ(fp32.code, 0) << fp32.output;
  EXPECT_THAT(fp32.output, Not(HasSubstr("16 bits:")));
}

TEST(CliTest, ABatchLargerThanTheTrainingSetIsRefusedBeforeAnyWork) {
  const std::string dir = Dir("batch_past_data");
  fs::create_directories(dir + "/data");
  WriteIdx(dir + "/data", "train", 512);
  WriteIdx(dir + "/data", "t10k", 16);
  const std::string config = dir + "/config.yaml";
  std::ofstream(config) << "model: {file: " << fs::absolute("models/lenet.yaml").string()
                        << ", params: {classes: 10, channels: 1, size: 28}}\n"
                        << "data: {dataset: fashion_mnist, path: " << dir
                        << "/data, batch: 100000}\n"
                        << "solver: {type: sgd, lr: 0.01}\nmemory: {mode: liveness}\n"
                        << "run: {epochs: 1, output: " << dir << "/run}\n";
  testing::ChildLimits limits;
  limits.cpu_seconds = 2;
  constexpr int64_t kMaxResidentBytes = 500 * 1000 * 1000;
  const Result r = RunTool({"tools/train", "--config", config, "--no-progress"}, kLimitSeconds,
                           /*with_stderr=*/true, limits);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("the training set (512 examples) is smaller than one batch of 100000"));
  EXPECT_LT(r.peak_rss_bytes, kMaxResidentBytes) << r.output;
}

// A config over sequence pairs with data.buckets: plan lists each length's
// peak and plays the first epoch's batches, as train orders them.
TEST(CliTest, PlanReportsTheLengthBucketsOfSequencePairs) {
  const std::string dir = Dir("plan_buckets");
  const std::string config = dir + "/config.yaml";
  std::ofstream(config) << "model: {file: " << fs::absolute("models/seq2seq.yaml").string()
                        << ", params: {hidden: 16, embed: 8, layers: 1}}\n"
                        << "data: {dataset: pairs, synthetic: reverse, synthetic_pairs: 400, "
                           "synthetic_max_length: 10, max_length: 12, buckets: true, batch: 16}\n"
                        << "solver: {type: adam, lr: 0.01}\nmemory: {mode: liveness}\n"
                        << "run: {epochs: 1, output: " << dir << "/run}\n";
  const Result r = RunTool({"tools/plan", "--config", config, "--memory", "liveness", "--allocator",
                            "static", "--minimum"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("length buckets [3, 6, 9, 12]: epoch 1's 23 batches"));
  for (const char* length : {"length    3:", "length    6:", "length    9:", "length   12:"}) {
    EXPECT_THAT(r.output, HasSubstr(length));
  }
  EXPECT_THAT(r.output, HasSubstr("4 plans"));
  EXPECT_THAT(r.output, HasSubstr("smallest budget for the epoch:"));
}

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
