// The memory page's data: the address space rebuilt from an event log
// agrees with the runtime's own per-step records (bytes in use by category,
// the live tensors) at every step, for every mode, allocator and budget;
// blocks never overlap; the reasons given for placements and evictions
// match what the plan did; and the page's compact encodings decode back.
// (tests/memory_page_browser_test.cc opens the pages in a browser.)
#include "memory/report/memory_page.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "framework/base/units.h"
#include "memory/planning/planner.h"
#include "memory/report/address_map.h"
#include "memory/report/page_encoding.h"
#include "memory/residency.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace {

using testing::Network;

struct Variant {
  const char* name;
  const char* allocator;
  bool compact = true;
  const char* params = "device";
  int64_t batch_chunk = kBatchChunkOff;
};
constexpr Variant kVariants[] = {
    {"first_fit", "first_fit"},
    {"best_fit_no_compaction", "best_fit", false},
    {"gtbm", "gtbm", false},
    {"caching", "caching", false},
    {"static", "static"},
    {"va", "va"},
    {"params_host", "first_fit", true, "host"},
    {"chunk_auto", "first_fit", true, "device", kBatchChunkAuto},
};
constexpr int64_t kBatch = 3;

MemoryOptions Options(const std::string& mode, const Variant& v) {
  MemoryOptions o;
  EXPECT_TRUE(ApplyMemoryMode(mode, &o).ok());
  o.allocator = v.allocator;
  o.compact = v.compact;
  o.params = *ParseParamPlacement(v.params);
  // These maps are a few KiB: offload them all the same.
  EXPECT_TRUE(o.settings.Set("min_offload", "0").ok());
  o.batch_chunk = v.batch_chunk;
  EXPECT_TRUE(o.settings.Set("va_chunk", "64KiB").ok());
  o.device_budget = kUnlimitedBudget;
  o.record_events = true;
  o.record_live = true;
  // The learned planner trains briefly on these small graphs (a plan per
  // budget the minimum search tries; its default training takes minutes).
  EXPECT_TRUE(o.settings.Set("planner.episodes", "12").ok());
  EXPECT_TRUE(o.settings.Set("planner.embedding", "8").ok());
  return o;
}

// The learned and exact planners plan anew at every budget a minimum search
// probes (training, or a CBC solve: minutes on these networks); here they
// run with room to spare, and memory_test and planners_test run them at
// their smallest budgets.
bool PlansAnewPerBudget(const std::string& mode) { return FindMemoryMode(mode)->costly; }

// What the checks saw, over every case: each kind of cause must occur.
struct Seen {
  std::map<std::string, int> placed, evicted;
  int moves = 0;
};

// Every step's record, rebuilt from the blocks live at it.
void ExpectMapMatchesRecords(const MemoryPlan& plan, const Schedule& schedule,
                             const std::string& what, Seen* seen) {
  const int steps = static_cast<int>(plan.log.steps.size());
  const AddressMap map = BuildAddressMap(plan.events, schedule, steps);
  ASSERT_EQ(map.blocks.size(), CountBlocks(plan.events)) << what;
  ASSERT_EQ(map.step_record.size(), static_cast<size_t>(steps)) << what;
  for (const MapBlock& b : map.blocks) {
    seen->placed[PlacedByName(b.placed)]++;
    seen->evicted[EvictedByName(b.evicted)]++;
    seen->moves += static_cast<int>(b.moves.size());
  }
  for (int s = 0; s < steps; ++s) {
    const StepRecord& r = plan.log.steps[s];
    const int at = map.step_record[s];
    std::array<size_t, kNumCategories> in_use{};
    std::vector<TensorId> live;
    std::vector<std::pair<size_t, size_t>> ranges;
    for (const MapBlock& b : map.blocks) {
      if (!LiveAt(b, at)) continue;
      in_use[static_cast<int>(b.category)] += b.bytes;
      ranges.push_back({OffsetAt(b, at), b.bytes});
      if (b.tensor != kNoTensor && b.placed != PlacedBy::kStaging &&
          IsTransient(schedule.tensors[b.tensor].kind)) {
        live.push_back(b.tensor);
      }
    }
    ASSERT_EQ(in_use, r.in_use) << what << ": step " << s + 1;
    std::sort(live.begin(), live.end());
    std::vector<TensorId> expected = r.live;
    std::sort(expected.begin(), expected.end());
    ASSERT_EQ(live, expected) << what << ": step " << s + 1;
    ASSERT_EQ(static_cast<int>(live.size()), r.live_tensors) << what << ": step " << s + 1;
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) {
      ASSERT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first)
          << what << ": blocks overlap at step " << s + 1;
    }
  }
  // The tensors live at the peak, as the plan lists them.
  std::vector<TensorId> peak = plan.log.steps[plan.log.peak_step].live;
  std::vector<TensorId> listed = plan.log.peak_live;
  std::sort(peak.begin(), peak.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(peak, listed) << what;
}

class AddressMapTest : public ::testing::TestWithParam<std::tuple<Network, Variant>> {};

TEST_P(AddressMapTest, EveryStepAsRecordedInEveryModeAtRoomyAndSmallestBudgets) {
  const auto& [network, variant] = GetParam();
  auto net = testing::BuildTrainingNet(testing::MustParse(network.yaml), kBatch);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  const NetworkView view = (*net)->view();
  Seen seen;
  for (const std::string& mode : MemoryModeNames()) {
    MemoryOptions options = Options(mode, variant);
    for (bool smallest : {false, true}) {
      if (smallest && PlansAnewPerBudget(mode)) continue;
      if (smallest) {
        auto minimum = MinimumBudget(view, options, kPoolBlockBytes);
        ASSERT_TRUE(minimum.ok()) << mode << ": " << minimum.status().ToString();
        options.device_budget = *minimum;
      }
      auto plan = Plan(view, options);
      ASSERT_TRUE(plan.ok() && plan->fits) << mode;
      ExpectMapMatchesRecords(*plan, (*net)->schedule(),
                              mode + (smallest ? " at its smallest budget" : " roomy"), &seen);
    }
  }
  // Every network under every variant offloads, prefetches, drops and
  // rebuilds in some mode.
  for (const char* cause : {"resident", "write", "prefetch", "rebuild", "workspace"}) {
    EXPECT_GT(seen.placed[cause], 0) << "placed by " << cause;
  }
  for (const char* cause : {"release", "offload", "drop"}) {
    EXPECT_GT(seen.evicted[cause], 0) << "evicted by " << cause;
  }
  if (std::string(variant.name) == "chunk_auto") {
    EXPECT_GT(seen.placed["staging"], 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Networks, AddressMapTest,
                         ::testing::Combine(::testing::ValuesIn(testing::kNetworks),
                                            ::testing::ValuesIn(kVariants)),
                         [](const ::testing::TestParamInfo<std::tuple<Network, Variant>>& i) {
                           return std::string(std::get<0>(i.param).name) + "_" +
                                  std::get<1>(i.param).name;
                         });

// Compaction at a tight budget slides blocks; the map follows them.
TEST(AddressMapTest, CompactionMovesAreFollowed) {
  int moves = 0;
  for (const Network& network : testing::kNetworks) {
    auto net = testing::BuildTrainingNet(testing::MustParse(network.yaml), kBatch);
    ASSERT_TRUE(net.ok());
    for (const std::string& mode : MemoryModeNames()) {
      if (PlansAnewPerBudget(mode)) continue;
      MemoryOptions options = Options(mode, kVariants[0]);
      auto minimum = MinimumBudget((*net)->view(), options, kPoolBlockBytes);
      ASSERT_TRUE(minimum.ok());
      options.device_budget = *minimum;
      auto plan = Plan((*net)->view(), options);
      ASSERT_TRUE(plan.ok() && plan->fits);
      if (plan->compacted == 0) continue;
      Seen seen;
      ExpectMapMatchesRecords(*plan, (*net)->schedule(), std::string(network.name) + " " + mode,
                              &seen);
      EXPECT_GT(seen.moves, 0) << network.name << " " << mode << " compacted without moves";
      moves += seen.moves;
    }
  }
  EXPECT_GT(moves, 0) << "no plan compacted: the test needs a tighter case";
}

// The decoder of page_model.js, mirrored.
std::vector<int64_t> Decode(const nlohmann::json& column, size_t n) {
  std::vector<int64_t> out(n, 0);
  const int64_t unit = column.value("u", int64_t{1});
  if (column.contains("c")) {
    std::fill(out.begin(), out.end(), column["c"].get<int64_t>() * unit);
  } else if (column.contains("v")) {
    for (size_t i = 0; i < n; ++i) out[i] = column["v"][i].get<int64_t>() * unit;
  } else if (column.contains("d")) {
    int64_t sum = 0;
    for (size_t i = 0; i < n; ++i) out[i] = (sum += column["d"][i].get<int64_t>()) * unit;
  }
  return out;
}

TEST(PageEncodingTest, ColumnsDecodeToTheirValues) {
  const std::vector<std::vector<int64_t>> cases = {
      {},
      {7, 7, 7},
      {0, 1024, 2048, 3072, 1 << 20},
      {5, -3, 123456789012345, 0, 9},
      {1024, 1025},
      {int64_t{1} << 50, (int64_t{1} << 50) - 1024},
  };
  for (const auto& values : cases) {
    for (int64_t unit : {int64_t{1}, kKibUnit}) {
      const nlohmann::json column = EncodeColumn(values, unit);
      EXPECT_EQ(Decode(column, values.size()), values) << column.dump();
    }
  }
  EXPECT_EQ(EncodeColumn({2048, 4096}, kKibUnit)["u"], kKibUnit);
  EXPECT_FALSE(EncodeColumn({2048, 4095}, kKibUnit).contains("u"));
  EXPECT_TRUE(EncodeColumn({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}).contains("d"));
  EXPECT_EQ(EncodeColumn({3, 3, 3})["c"], 3);
}

TEST(PageEncodingTest, NamesShareTheirPrefixesAndKeepCharactersWhole) {
  const std::vector<std::string> names = {"stage1/unit1/conv1",  "stage1/unit1/bn1",
                                          "stage1/unit10/conv1", "caf\xc3\xa9",
                                          "caf\xc3\xa8",         ""};
  const nlohmann::json coded = EncodeNames(names);
  // Decode as the script does, counting the prefix in UTF-16 units (here
  // every character is one unit; the bytes of a character stay together).
  std::vector<std::string> decoded;
  std::string previous;
  for (size_t i = 0; i < names.size(); ++i) {
    size_t units = coded["p"][i].get<size_t>(), bytes = 0;
    while (units > 0) {
      bytes++;
      while (bytes < previous.size() &&
             (static_cast<unsigned char>(previous[bytes]) & 0xC0) == 0x80)
        bytes++;
      units--;
    }
    previous = previous.substr(0, bytes) + coded["s"][i].get<std::string>();
    decoded.push_back(previous);
  }
  EXPECT_EQ(decoded, names);
  EXPECT_EQ(coded["p"][1], 13);  // "stage1/unit1/"
  EXPECT_EQ(coded["p"][4], 3);   // "caf", not half of the "é"
}

TEST(MemoryPageTest, DataStaysInsideItsScriptElement) {
  const NetSpec spec = testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 6, 6]}
  - {name: "conv<script><!--", type: convolution, filters: 2, kernel: 3}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)");
  auto net = testing::BuildTrainingNet(spec, kBatch);
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  MemoryOptions options = Options("superneurons", kVariants[0]);
  auto plan = Plan((*net)->view(), options);
  ASSERT_TRUE(plan.ok() && plan->fits);
  MemoryPage page(
      PageSubject{"lenet </script>", "test", &(*net)->schedule(), (*net)->layer_names()});
  page.AddMode(PlannedPageMode("superneurons", options, *plan, nullptr));
  MemoryPlan unfit;
  unfit.fits = false;
  unfit.failure = "too small";
  page.AddMode(PlannedPageMode("baseline", options, unfit, nullptr));
  const std::string html = page.Html();
  const size_t data = html.find("id=\"spill-data\">");
  ASSERT_NE(data, std::string::npos);
  const size_t end = html.find("</script>", data);
  const std::string json = html.substr(data + 16, end - data - 16);
  EXPECT_EQ(json.find('<'), std::string::npos);
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed, page.data());
  EXPECT_EQ(parsed["modes"].size(), 2u);
  EXPECT_EQ(parsed["modes"][0]["blocks"]["count"], CountBlocks(plan->events));
  EXPECT_EQ(parsed["modes"][1]["failure"], "too small");
  EXPECT_NE(html.find("<title>lenet &lt;/script&gt; - device memory</title>"), std::string::npos);
  EXPECT_EQ(html.find("cdn"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos) << "the page must not reach the network";
}

// Each tensor's storage type reaches the page (shown with its block): a
// bf16 network's activations in bfloat16, its parameters in float32.
TEST(MemoryPageTest, TensorsCarryTheirStorageTypes) {
  const NetSpec spec = testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [1, 6, 6]}
  - {name: conv, type: convolution, filters: 2, kernel: 3}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)");
  for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
    auto net = testing::BuildTrainingNet(spec, kBatch, DeviceType::kCpu, false, precision);
    ASSERT_TRUE(net.ok()) << net.status().ToString();
    const Schedule& schedule = (*net)->schedule();
    MemoryPage page(PageSubject{"dtypes", "test", &schedule, (*net)->layer_names()});
    const nlohmann::json& data = page.data();
    ASSERT_EQ(data["dtypes"], nlohmann::json::array({"fp32", "bf16", "fp16"}));
    const nlohmann::json& t = data["tensors"];
    const std::vector<int64_t> templates = Decode(t["template"], schedule.tensors.size());
    const std::vector<int64_t> dtypes = t.contains("dtype")
                                            ? Decode(t["dtype"], t["suffix"].size())
                                            : std::vector<int64_t>(t["suffix"].size(), 0);
    int half = 0;
    for (size_t id = 0; id < schedule.tensors.size(); ++id) {
      const DType dtype = schedule.tensors[id].dtype;
      EXPECT_EQ(data["dtypes"][dtypes[templates[id]]], DTypeName(dtype))
          << schedule.tensors[id].name;
      half += dtype == DType::kBF16;
    }
    EXPECT_EQ(half > 0, precision == Precision::kBf16);
  }
}

}  // namespace
}  // namespace spill
