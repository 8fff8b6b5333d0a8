// The memory pages as a user sees them: written by plan, train and eval,
// opened in headless Chromium (Debian's chromium, installed by
// tools/setup.sh), their scripts run, and what they drew read back from the
// DOM. The curve's peak, the number of blocks and the tensors live at the
// peak step must equal what `plan --json` reports for every mode - the page
// rebuilds all three from its own compact encoding of the event log - and a
// measured training iteration's page must equal the plan of the same run.
// Screenshots go to the test's outputs (TEST_UNDECLARED_OUTPUTS_DIR).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/tool_runner.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kToolSeconds = 600;     // plan of the 2,500-unit ResNet, on a loaded machine
constexpr int kBrowserSeconds = 300;  // Chromium reading a page of a few MB
constexpr char kWindow[] = "--window-size=1400,1700";

// Where Chromium is: $SPILL_CHROMIUM, or Debian's.
std::string Chromium() {
  const char* given = std::getenv("SPILL_CHROMIUM");
  for (const std::string& path :
       {std::string(given ? given : ""), std::string("/usr/bin/chromium")}) {
    if (!path.empty() && access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// Headless, offline, as root, with a profile of its own.
std::vector<std::string> BrowserArgs(const std::string& chromium, const std::string& profile) {
  return {chromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--hide-scrollbars",
          "--user-data-dir=" + profile};
}

class MemoryPageBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = Chromium();
    ASSERT_FALSE(chromium_.empty())
        << "headless Chromium not found (/usr/bin/chromium, or $SPILL_CHROMIUM): this test opens "
           "the memory pages in it. Install it with `bash tools/setup.sh` (Debian's chromium), "
           "which the test command runs.";
    dir_ = testing::FreshDir("spill_memory_page");
  }

  // Runs a spill program; its stdout.
  std::string Run(const std::vector<std::string>& args) {
    testing::ToolResult r = testing::RunTool(args, kToolSeconds, /*with_stderr=*/false);
    EXPECT_EQ(r.code, 0) << args[0] << " failed:\n" << r.output;
    return r.output;
  }

  // The DOM after the page's scripts ran.
  std::string Dom(const std::string& page) {
    std::vector<std::string> args = BrowserArgs(chromium_, testing::FreshDir("chromium_profile"));
    args.push_back(kWindow);
    args.push_back("--dump-dom");
    args.push_back("file://" + page);
    const std::string out = dir_ + "/dom.html", err = dir_ + "/chromium.log";
    const int code = testing::Wait(testing::Spawn(args, out, err), kBrowserSeconds);
    EXPECT_EQ(code, 0) << "chromium failed on " << page << ":\n" << testing::ReadAll(err);
    return testing::ReadAll(out);
  }

  // A screenshot of the page into the test's outputs.
  void Screenshot(const std::string& page, const std::string& name) {
    const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
    const std::string png = std::string(outputs ? outputs : dir_.c_str()) + "/" + name + ".png";
    std::vector<std::string> args = BrowserArgs(chromium_, testing::FreshDir("chromium_profile"));
    args.push_back(kWindow);
    args.push_back("--screenshot=" + png);
    args.push_back("file://" + page);
    const std::string log = dir_ + "/screenshot.log";
    EXPECT_EQ(testing::Wait(testing::Spawn(args, log, log), kBrowserSeconds), 0)
        << testing::ReadAll(log);
    EXPECT_GT(fs::exists(png) ? fs::file_size(png) : 0, 10000u) << "no screenshot at " << png;
  }

  std::string chromium_, dir_;
};

// One attribute of the first tag at or after `from` that holds `marker`.
std::string Attribute(const std::string& dom, size_t from, const std::string& marker,
                      const std::string& name) {
  const size_t found = dom.find(marker, from);
  if (found == std::string::npos) return "";
  const size_t begin = dom.rfind('<', found), end = dom.find('>', found);
  const size_t value = dom.find(" " + name + "=\"", begin);
  if (value == std::string::npos || value > end) return "";
  const size_t first = value + name.size() + 3;
  return dom.substr(first, dom.find('"', first) - first);
}

std::string Unescaped(std::string text) {
  const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}};
  for (const auto& [entity, c] : entities) {
    for (size_t at = text.find(entity); at != std::string::npos; at = text.find(entity, at + 1)) {
      text.replace(at, std::strlen(entity), c);
    }
  }
  return text;
}

// What a mode's section of the page shows.
struct ShownMode {
  int64_t peak = -1;
  int peak_step = -1;
  int64_t blocks = -1;
  int steps = -1;
  int live_step = -1;
  std::multiset<std::string> live;
  bool lanes = false;
};

std::map<std::string, ShownMode> ReadModes(const std::string& dom) {
  std::map<std::string, ShownMode> modes;
  const std::string open = "<section class=\"mode";
  for (size_t at = dom.find(open); at != std::string::npos;) {
    const size_t next = dom.find(open, at + 1);
    const std::string section = dom.substr(at, next == std::string::npos ? next : next - at);
    at = next;
    ShownMode m;
    const std::string name = Attribute(section, 0, "class=\"mode", "data-mode");
    const std::string peak = Attribute(section, 0, "class=\"curve-peak\"", "data-bytes");
    if (peak.empty()) {
      modes[name] = m;  // did not fit
      continue;
    }
    m.peak = std::stoll(peak);
    m.peak_step = std::stoi(Attribute(section, 0, "class=\"curve-peak\"", "data-step"));
    m.blocks = std::stoll(Attribute(section, 0, "class=\"block-count\"", "data-count"));
    m.steps = std::stoi(Attribute(section, 0, "class=\"step-count\"", "data-count"));
    m.lanes = section.find("class=\"view-title lanes-title\"") != std::string::npos;
    m.live_step = std::stoi(Attribute(section, 0, "<ol class=\"live\"", "data-step"));
    std::string names = Unescaped(Attribute(section, 0, "<ol class=\"live\"", "data-tensors"));
    for (size_t line = 0; !names.empty() && line <= names.size();) {
      const size_t next = std::min(names.find('\n', line), names.size());
      m.live.insert(names.substr(line, next - line));
      line = next + 1;
    }
    modes[name] = m;
  }
  return modes;
}

// The page agrees with plan --json in every mode.
void ExpectPageShowsPlan(const std::string& dom, const Json& plan, bool lanes) {
  ASSERT_NE(dom.find("data-rendered=\"1\""), std::string::npos)
      << "the page's script did not finish";
  const std::map<std::string, ShownMode> shown = ReadModes(dom);
  ASSERT_EQ(shown.size(), plan["modes"].size());
  for (const Json& mode : plan["modes"]) {
    const std::string name = mode["mode"];
    ASSERT_EQ(shown.count(name), 1u) << name;
    const ShownMode& m = shown.at(name);
    if (!mode["fits"].get<bool>()) {
      EXPECT_EQ(m.peak, -1) << name;
      continue;
    }
    EXPECT_EQ(m.peak, mode["peak_bytes"].get<int64_t>()) << name;
    EXPECT_EQ(m.peak_step, mode["peak_step"].get<int>()) << name;
    EXPECT_EQ(m.blocks, mode["blocks"].get<int64_t>()) << name;
    EXPECT_EQ(m.live_step, m.peak_step) << name;
    std::multiset<std::string> live;
    for (const Json& t : mode["peak_live"]) live.insert(t.get<std::string>());
    EXPECT_EQ(m.live, live) << name << ": the tensors live at the peak step";
    EXPECT_FALSE(live.empty()) << name;
    EXPECT_EQ(m.lanes, lanes) << name;
  }
}

struct Case {
  const char* name;
  std::vector<std::string> plan;
  bool lanes;
};

TEST_F(MemoryPageBrowserTest, PlanPagesShowWhatPlanReports) {
  const std::vector<Case> cases = {
      {"lenet", {"--config", "models/lenet.yaml"}, false},
      {"resnet50_b32",
       {"--config", "models/resnet50.yaml", "--batch", "32", "--device-profile", "titanx-pcie3"},
       true},
      {"resnet_2500_units",
       {"--config", "models/resnet_deep.yaml", "--set", "n1=6", "--set", "n2=32", "--set",
        "n3=2456", "--set", "n4=6", "--memory", "superneurons"},
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string page = dir_ + "/" + c.name + ".html";
    std::vector<std::string> args = {"tools/plan", "--json", "--html", page};
    args.insert(args.end(), c.plan.begin(), c.plan.end());
    const Json plan = Json::parse(Run(args));
    ExpectPageShowsPlan(Dom(page), plan, c.lanes);
    Screenshot(page, c.name);
  }
}

// A config training a small network on synthetic images; every tensor is
// offloaded or dropped somewhere in this mode.
std::string WriteConfig(const std::string& dir) {
  fs::create_directories(dir + "/data");
  for (const auto& [prefix, count] : {std::pair<const char*, int>{"train", 64}, {"t10k", 24}}) {
    testing::WriteIdx(dir + "/data", prefix, count, [](uint32_t i, uint32_t p) {
      return static_cast<uint8_t>((i * 37 + p * 11) % 256);
    });
  }
  const std::string path = dir + "/config.yaml";
  std::ofstream(path) << "model:\n  layers:\n"
                      << "    - {name: data, type: input, shape: [1, 28, 28]}\n"
                      << "    - {name: conv, type: convolution, filters: 4, kernel: 3}\n"
                      << "    - {name: relu, type: relu}\n"
                      << "    - {name: pool, type: max_pool, kernel: 2}\n"
                      << "    - {name: fc, type: fully_connected, outputs: 10}\n"
                      << "    - {name: loss, type: softmax_loss}\n"
                      << "data: {dataset: fashion_mnist, path: " << dir << "/data, batch: 16}\n"
                      << "solver: {type: sgd, lr: 0.01, momentum: 0.9}\n"
                      << "memory: {mode: offload_recompute, conv_timing: model}\n"
                      << "run: {epochs: 1, output: " << dir << "/run}\n";
  return path;
}

TEST_F(MemoryPageBrowserTest, TrainAndEvalPagesShowTheMeasuredIteration) {
  const std::string config = WriteConfig(dir_ + "/train");
  const std::string train_page = dir_ + "/train.html", eval_page = dir_ + "/eval.html";
  Run({"tools/train", "--config", config, "--max-steps", "2", "--no-progress", "--html",
       train_page});
  // Plans equal runs: the measured iteration's page shows the plan's numbers.
  const Json plan = Json::parse(Run({"tools/plan", "--config", config, "--memory",
                                     "offload_recompute", "--json", "--trace", dir_ + "/t.jsonl"}));
  ExpectPageShowsPlan(Dom(train_page), plan, /*lanes=*/true);
  Screenshot(train_page, "train");

  Run({"tools/eval", "--config", config, "--checkpoint", dir_ + "/train/run/checkpoint.npz",
       "--html", eval_page});
  const std::map<std::string, ShownMode> shown = ReadModes(Dom(eval_page));
  ASSERT_EQ(shown.count("offload_recompute"), 1u);
  const ShownMode& m = shown.at("offload_recompute");
  EXPECT_EQ(m.steps, 6) << "forward steps only";
  EXPECT_GT(m.blocks, 0);
  EXPECT_GT(m.peak, 0);
  EXPECT_LE(m.peak, plan["modes"][0]["peak_bytes"].get<int64_t>()) << "no gradients in eval";
  EXPECT_FALSE(m.live.empty());
  EXPECT_EQ(m.live_step, m.peak_step);
  Screenshot(eval_page, "eval");
}

}  // namespace
}  // namespace spill
