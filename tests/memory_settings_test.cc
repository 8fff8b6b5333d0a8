// Each policy owns its settings: the YAML reader, the flags, the checks,
// Describe and --help come from the keys a policy registers next to its
// code. A scheduler with two settings added in the tests alone
// (tests/testing/knob_scheduler.cc) has them everywhere, trains
// bit-identically to the baseline and runs as planned; keys the chosen mode
// does not read are errors naming the mode; the modes are one table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/planning/planner.h"
#include "memory/scheduler_registry.h"
#include "memory/transfer_plan.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tools/common/cli.h"
#include "tools/common/memory_flags.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace {

using ::testing::HasSubstr;

StatusOr<TrainConfig> ParseMemory(const std::string& memory) {
  return ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: " + memory + "\n",
      "run.yaml", ".");
}

TEST(MemorySettingsTest, ANewSchedulersSettingsAreReadCheckedAndDescribed) {
  auto config = ParseMemory("{scheduler: knobs, knob_distance: 5, knob_min_bytes: 2KiB}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->memory.settings.Int("knob_distance"), 5);
  EXPECT_EQ(config->memory.settings.Bytes("knob_min_bytes"), size_t{2048});
  EXPECT_THAT(config->memory.Describe(),
              HasSubstr("knobs scheduler (knob_distance 5, knob_min_bytes 2KiB)"));
  // Defaults where not given.
  auto defaults = ParseMemory("{scheduler: knobs}");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->memory.settings.Int("knob_distance"), 4);
  // Ranges and kinds are checked, naming the file, the line and the key.
  auto bad = ParseMemory("{scheduler: knobs, knob_distance: 2}");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("run.yaml:4: memory.knob_distance: '2' is not an integer in [3, 100]"));
  bad = ParseMemory("{scheduler: knobs, knob_min_bytes: lots}");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("memory.knob_min_bytes"));
  // Under another scheduler they are not read: an error naming the mode.
  bad = ParseMemory("{mode: window, knob_distance: 5}");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("memory.knob_distance: mode 'window' does not read it (it is a setting "
                        "of the knobs scheduler"));
}

TEST(MemorySettingsTest, ANewSchedulersSettingsAreFlagsWithHelp) {
  Flags flags("tool", "a tool");
  MemoryFlags memory;
  memory.Declare(flags, ToolMemoryFlagsUse("liveness", 1 << 30, 1 << 30));
  const std::string help = flags.app().help();
  EXPECT_THAT(help, HasSubstr("--knob-distance"));
  EXPECT_THAT(help, HasSubstr("knobs: offload when the next use is this many steps away "
                              "(default 4); read by the knobs scheduler"));
  const char* argv[] = {"tool", "--scheduler", "knobs", "--knob-min-bytes", "4KiB"};
  ASSERT_EQ(flags.Parse(5, const_cast<char**>(argv)), -1);
  MemoryOptions options;
  ASSERT_TRUE(memory.Apply(&options).ok());
  EXPECT_EQ(options.scheduler, "knobs");
  EXPECT_EQ(options.settings.Bytes("knob_min_bytes"), size_t{4096});
  EXPECT_TRUE(options.Validate().ok());
  // The same flag under a mode that does not read it.
  options.scheduler = "superneurons";
  Status unread = CheckKeysRead(options);
  ASSERT_FALSE(unread.ok());
  EXPECT_THAT(unread.message(), HasSubstr("--knob-min-bytes: mode 'liveness' does not read it"));
}

// Like every policy, it keeps the math and its plans equal its runs.
TEST(MemorySettingsTest, ANewSchedulerTrainsBitIdenticallyAndAsPlanned) {
  const NetSpec spec = testing::MustParse(testing::kResNet);
  testing::SyntheticRun run;
  run.batch = 3;
  run.steps = 2;
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  run.memory.host_budget = 16 << 20;
  run.memory.poison_freed = true;
  auto baseline = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(baseline.ok());
  run.memory.scheduler = "knobs";
  run.memory.offload = true;
  run.memory.record_events = true;
  ASSERT_TRUE(run.memory.settings.Set("knob_min_bytes", "0").ok());
  auto trace = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_GT(trace->to_host, 0u);
  EXPECT_EQ(trace->losses, baseline->losses);
  EXPECT_TRUE(testing::BitEqual(trace->params, baseline->params));
  auto net = testing::BuildTrainingNet(spec, run.batch);
  ASSERT_TRUE(net.ok());
  auto plan = Plan((*net)->view(), run.memory);
  ASSERT_TRUE(plan.ok() && plan->fits);
  EXPECT_EQ(plan->peak, trace->log.peak);
  ASSERT_EQ(plan->events.size(), trace->events.size());
  for (size_t i = 0; i < plan->events.size(); ++i) {
    EXPECT_TRUE(plan->events[i].type == trace->events[i].type &&
                plan->events[i].offset == trace->events[i].offset)
        << "event " << i;
  }
  // The settings reach it: a larger minimum size offloads less.
  auto plans = [&](const char* min_bytes) {
    MemoryOptions options = run.memory;
    SPILL_CHECK(options.settings.Set("knob_min_bytes", min_bytes).ok());
    auto made = MakeTransferPlans((*net)->view(), options);
    SPILL_CHECK(made.ok());
    return made->train.Count(TransferOp::kBeginOffload);
  };
  EXPECT_GT(plans("0"), plans("1GiB"));
  EXPECT_EQ(plans("1GiB"), 0);
}

// Keys a mode does not read are errors naming the mode, never values
// accepted and ignored.
TEST(MemorySettingsTest, KeysTheModeDoesNotReadAreErrorsNamingIt) {
  for (const char* entry :
       {"release: eager", "prefetch: ahead", "eviction: belady", "va_chunk: 64KiB", "window: 1.2x",
        "lms_threshold: 5", "window_budget: 0.9x", "barrier: true", "offload_set: conv",
        "lms_ahead: 1", "min_offload: 64KiB", "lms_count: 3", "lms_order: earliest",
        "prefetch_ahead: 5", "recompute_strategy: memory"}) {
    auto config = ParseMemory(std::string("{mode: liveness, ") + entry + "}");
    ASSERT_FALSE(config.ok()) << entry;
    const std::string key = std::string(entry).substr(0, std::string(entry).find(':'));
    EXPECT_THAT(config.status().message(),
                HasSubstr("run.yaml:4: memory." + key + ": mode 'liveness' does not read it"))
        << entry;
  }
  // Read where the mode's policies read them.
  for (const char* memory :
       {"{mode: dymem, release: eager, barrier: true, min_offload: 64KiB}",
        "{mode: superneurons, eviction: belady, prefetch_ahead: 2}",
        "{mode: liveness, allocator: va, va_chunk: 64KiB}",
        "{mode: liveness, allocator: gtbm, min_offload: 64KiB}", "{mode: window, window: 1.2x}",
        "{mode: lms, lms_threshold: 5}", "{mode: lms, lms_count: 3, lms_order: earliest}",
        "{mode: dqn, planner: {limit: 1GiB, episodes: 5}}",
        "{mode: memonger, planner: {segment: 3}}"}) {
    auto config = ParseMemory(memory);
    EXPECT_TRUE(config.ok()) << memory << ": " << config.status().ToString();
  }
  // The superneurons scheduler reads its prefetch distance only where it
  // offloads and its strategy only where it recomputes, in presets and in
  // switches given alike.
  for (const char* memory :
       {"{mode: recompute, prefetch_ahead: 2}", "{mode: offload, recompute_strategy: speed}",
        "{mode: liveness, offload: false, prefetch_ahead: 2}"}) {
    auto moot = ParseMemory(memory);
    ASSERT_FALSE(moot.ok()) << memory;
    EXPECT_THAT(moot.status().message(), HasSubstr("the superneurons scheduler reads it only when"))
        << memory;
  }
  for (const char* memory :
       {"{mode: offload, prefetch_ahead: 2}", "{mode: recompute, recompute_strategy: speed}",
        "{mode: liveness, recompute: true, recompute_strategy: memory}"}) {
    auto read = ParseMemory(memory);
    EXPECT_TRUE(read.ok()) << memory << ": " << read.status().ToString();
  }
  // A planner's section keys, by the same rule: memonger does not train.
  auto config = ParseMemory("{mode: memonger, planner: {episodes: 5}}");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("memory.planner.episodes: mode 'memonger' does not read it"));
}

// One table of modes: every tool and test lists them from it.
TEST(MemorySettingsTest, ModesAreOneTable) {
  std::vector<std::string> names;
  for (const MemoryMode& mode : MemoryModes()) {
    names.push_back(mode.name);
    MemoryOptions options;
    ASSERT_TRUE(ApplyMemoryMode(mode.name, &options).ok());
    EXPECT_EQ(options.scheduler, mode.scheduler);
    EXPECT_NE(Schedulers().Find(mode.scheduler), nullptr) << mode.name;
    if (mode.allocator != nullptr) {
      EXPECT_NE(Allocators().Find(mode.allocator), nullptr);
    }
    EXPECT_TRUE(options.Validate().ok()) << mode.name;
  }
  EXPECT_EQ(names, MemoryModeNames());
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text of the Markdown section that starts with `heading`, up to the
// next heading of its level.
std::string Section(const std::string& text, const std::string& heading) {
  const size_t begin = text.find("\n" + heading + "\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find("\n## ", begin + heading.size() + 2);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The README names every mode in its mode table and every allocator and
// eviction rule in its policy table, and the programs' manual has a row per
// mode: a mode or policy registered and not documented fails here.
TEST(MemorySettingsTest, EveryModeAndPolicyIsInTheReadmeAndTheManual) {
  const std::string readme = ReadText("README.md"), manual = ReadText("tools/README.md");
  const std::string modes = Section(readme, "## Memory modes");
  const std::string policies = Section(readme, "## Memory policies");
  ASSERT_FALSE(modes.empty() || policies.empty() || manual.empty());
  for (const std::string& mode : MemoryModeNames()) {
    EXPECT_THAT(modes, HasSubstr("`" + mode + "`")) << "README.md, Memory modes";
    EXPECT_THAT(manual, HasSubstr("\n| `" + mode + "` |")) << "tools/README.md's mode table";
  }
  for (const std::string& name : AllocatorNames()) {
    EXPECT_THAT(policies, HasSubstr("`" + name + "`")) << "README.md, Memory policies";
  }
  for (const std::string& name : EvictionNames()) {
    EXPECT_THAT(policies, HasSubstr("`" + name + "`")) << "README.md, Memory policies";
  }
}

}  // namespace
}  // namespace spill
