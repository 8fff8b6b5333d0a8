#include "tests/testing/onnx_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "framework/device/device_registry.h"
#include "framework/graph/executor.h"
#include "framework/graph/initializer.h"
#include "framework/graph/net.h"
#include "framework/io/checkpoint.h"
#include "framework/onnx/onnx_import.h"
#include "framework/onnx/onnx_model.h"
#include "memory/heap_pool.h"
#include "memory/planning/planner.h"
#include "memory/runtime/runtime.h"
#include "memory/workspace_selector.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tools/common/scores.h"

namespace spill {
namespace testing {
namespace {

constexpr char kFixtureDir[] = "tests/testdata/onnx/";
constexpr char kPinned[] = "pin:im2col_image";  // one algorithm: bit-exact comparisons

const char* const kModes[] = {
    "baseline",     "liveness", "offload", "recompute", "offload_recompute",
    "superneurons", "window",   "lms",     "dymem",     "vdnn"};

Status LoadAll(const NpzArchive& params, const Net& net, TensorStore& store) {
  SPILL_ASSIGN_OR_RETURN(PartialLoad load, LoadMatchingArrays(params, "imported", net, store));
  if (!load.fresh.empty() || !load.unused.empty()) {
    return InvalidArgument("imported weights do not match the network: " +
                           (load.fresh.empty() ? load.unused[0] : load.fresh[0]));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<OnnxFixture> LoadOnnxFixture(const std::string& name) {
  OnnxFixture f;
  f.onnx = kFixtureDir + name + ".onnx";
  SPILL_ASSIGN_OR_RETURN(NpzArchive arrays, ReadNpz(kFixtureDir + name + ".npz"));
  const NpyArray &in = arrays["input"], &out = arrays["output"];
  if (in.dtype != "<f4" || out.dtype != "<f4" || in.shape.empty()) {
    return InvalidArgument(name + ".npz: input and output must be float32 arrays");
  }
  f.input.assign(in.floats(), in.floats() + in.numel());
  f.output.assign(out.floats(), out.floats() + out.numel());
  f.batch = in.shape[0];
  return f;
}

onnx::ModelProto LoadOnnxProto(const std::string& name) {
  auto fixture = LoadOnnxFixture(name);
  SPILL_CHECK(fixture.ok()) << fixture.status().ToString();
  std::ifstream in(fixture->onnx, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  SPILL_CHECK(model.ParseFromString(bytes.str())) << fixture->onnx << " is not an ONNX model";
  return model;
}

std::string OnnxImportError(const onnx::ModelProto& model) {
  auto graph = ParseOnnxModel(model.SerializeAsString(), "net.onnx");
  if (!graph.ok()) return graph.status().ToString();
  auto net = ImportOnnx(**graph);
  return net.ok() ? "" : net.status().ToString();
}

std::vector<float> SomeImages(int64_t count) {
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1;
  return x;
}

NpzArchive SeededParams(const Net& net) {
  NpzArchive archive;
  const Schedule& s = net.schedule();
  for (int id = 0; id < net.num_layers(); ++id) {
    for (size_t p = 0; p < net.decl(id).params.size(); ++p) {
      const TensorInfo& info = s.tensors[s.layers[id].params[p]];
      std::vector<float> v = InitialValues(net.decl(id).params[p], 7, info.name);
      for (size_t i = 0; i < v.size(); ++i) {  // statistics, scales and shifts of all sorts
        const float u = static_cast<float>((i * 37 + p * 11) % 17) / 17.0f;
        if (info.name.find("running_var") != std::string::npos) v[i] = 0.5f + u;
        if (info.name.find("running_mean") != std::string::npos) v[i] = u - 0.5f;
        if (info.name.find("gamma") != std::string::npos) v[i] = 0.75f + u;
        if (info.name.find("beta") != std::string::npos) v[i] = 0.2f * u;
      }
      archive["params/" + info.name] = NpyArray::Floats(
          {info.shape.n(), info.shape.c(), info.shape.h(), info.shape.w()}, v.data());
    }
  }
  return archive;
}

StatusOr<std::vector<float>> ForwardScores(const NetSpec& spec, const NpzArchive& params,
                                           const std::vector<float>& input, int64_t batch) {
  return ScoreImages(spec, params, input, batch, kPinned);
}

void ExpectEveryModeBitIdentical(const NetSpec& spec, const NpzArchive& params) {
  auto run_in = [&](const std::string& mode, bool tight) {
    SyntheticRun run;
    run.batch = 2;
    run.steps = 2;
    run.learning_rate = 0.05f;
    SPILL_CHECK(ApplyMemoryMode(mode, &run.memory).ok());
    run.memory.device_budget = 64 << 20;
    run.memory.host_budget = 16 << 20;
    run.memory.poison_freed = true;  // a read after free turns into NaN
    SPILL_CHECK(run.memory.settings.Set("min_offload", "0").ok());
    run.memory.workspace = *ParseWorkspacePolicy(kPinned);
    run.initialize = [&](const Net& net, TensorStore& store) {
      return LoadAll(params, net, store);
    };
    if (tight) {
      auto net = BuildTrainingNet(spec, run.batch);
      SPILL_CHECK(net.ok());
      auto minimum = MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
      SPILL_CHECK(minimum.ok()) << minimum.status().ToString();
      run.memory.device_budget = *minimum;
    }
    return TrainSynthetic(spec, run);
  };
  auto baseline = run_in("baseline", false);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  for (double loss : baseline->losses) ASSERT_TRUE(std::isfinite(loss));
  for (const char* mode : kModes) {
    for (bool tight : {false, true}) {
      const std::string what = std::string(mode) + (tight ? " tight" : "");
      auto trace = run_in(mode, tight);
      ASSERT_TRUE(trace.ok()) << what << ": " << trace.status().ToString();
      ASSERT_EQ(trace->losses.size(), baseline->losses.size()) << what;
      for (size_t i = 0; i < trace->losses.size(); ++i) {
        EXPECT_EQ(trace->losses[i], baseline->losses[i]) << what << " step " << i;
      }
      EXPECT_TRUE(BitEqual(baseline->params, trace->params)) << what;
    }
  }
}

}  // namespace testing
}  // namespace spill
