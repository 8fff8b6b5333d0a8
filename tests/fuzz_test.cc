// Hostile input, generated: mutated network files, training configs, idx and
// CIFAR-10 datasets, checkpoints and ONNX models, from the model zoo, the shipped configs
// and valid fixtures; predict's inputs (images, idx and CIFAR-10 files),
// networks exported to ONNX and read back, and the host tier under budgets
// from zero to huge; with a fixed seed. Every case runs the code the tools
// run (parser, Net::Build, the planner, the data readers and loader, the
// checkpoint loader) in-process and must end - accepted or rejected - without
// a crash, an escaping exception or running past its time (fuzz_harness.h).
// Cases whose right outcome is known are in fuzz_targeted_test.cc, except
// checkpoint arrays with generated bad values or shapes, which must all be
// refused.
//
// tools/ci/fuzz.sh runs more cases with a random seed (SPILL_FUZZ_SEED,
// SPILL_FUZZ_SCALE).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>

#include "framework/io/npz.h"
#include "layers/cpu/conv_timer.h"
#include "memory/memory_options.h"
#include "tests/testing/fuzz_harness.h"
#include "tests/testing/fuzz_mutations.h"
#include "tests/testing/fuzz_onnx.h"
#include "tests/testing/fuzz_tools.h"
#include "tests/testing/test_networks.h"

namespace spill {
namespace fuzz {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kTextMutations = static_cast<int>(TextMutation::kCount);
constexpr int kByteMutations = static_cast<int>(ByteMutation::kCount);

// Sources and case counts at scale 1: small networks of every construct
// the parser reads, beside the zoo's.
std::vector<std::string> FixtureNets() {
  return {
      R"(layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: conv, type: convolution, filters: 2, kernel: 3, pad: 1, groups: 1}
  - {name: pool, type: max_pool, kernel: 2, stride: 2}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)",
      "params: {width: 4, depth: 2}\n" + std::string(testing::kResidualUnitBlock) + R"(layers:
  - {name: data, type: input, shape: [4, 8, 8]}
  - {name: res, block: unit, repeat: $depth, args: {filters: $width}}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: "${width * 2 + 1}"}
  - {name: loss, type: softmax_loss}
)",
      R"(layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: a, type: convolution, filters: 4, kernel: 1}
  - {name: b, type: convolution, filters: 4, kernel: 3, pad: 1, inputs: [data]}
  - {name: cat, type: concat, inputs: [a, b]}
  - {name: drop, type: dropout, ratio: 0.5}
  - {name: fc, type: fully_connected, outputs: 2}
  - {name: loss, type: softmax_loss, inputs: [fc, data:1]}
)",
      R"(layers:
  - {name: data, type: input, shape: [1, 1, 6], labels: pixels}
  - {name: embed, type: embedding, vocabulary: 5, size: 3}
  - {name: rnn, type: gru, hidden: 4, layers: 2, bidirectional: true, dropout: 0.2, bias: true}
  - {name: lstm, type: lstm, hidden: 3}
  - {name: scores, type: convolution, filters: 5, kernel: 1}
  - {name: loss, type: softmax_loss}
)",
      R"(layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 8, kernel: 4, stride: 4}
  - {name: tokens, type: tokens}
  - {name: cls, type: class_token}
  - {name: pos, type: positions, length: 5}
  - {name: qkv, type: convolution, filters: 24, kernel: 1}
  - {name: attn, type: attention, heads: 2, causal: false, algorithm: auto}
  - {name: first, type: token, index: 0}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)",
      R"(layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 6, kernel: 2, stride: 2}
  - {name: qkv, type: convolution, filters: 18, kernel: 1}
  - {name: attn, type: window_attention, heads: 2, window: 2, shift: 1, cosine: true}
  - {name: merge, type: space_to_depth}
  - {name: gap, type: global_avg_pool}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)",
      R"(layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 6, kernel: 2, stride: 2}
  - {name: qkv, type: convolution, filters: 18, kernel: 1}
  - {name: attn, type: window_attention, heads: 2, window: 2, grid: true, scale: 0.4}
  - {name: gap, type: global_avg_pool}
  - {name: act, type: tanh}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)",
  };
}

// Networks of layers that have no ONNX form (layers/matrix_layers.h): the
// parser's and the builder's sources, not the exporter's.
std::vector<std::string> UnexportedNets() {
  return {R"(layers:
  - {name: data, type: input, shape: [1, 8, 8]}
  - {name: patches, type: convolution, filters: 6, kernel: 2, stride: 2}
  - {name: q, type: slice, begin: 0, end: 4}
  - {name: k, type: slice, inputs: [patches], begin: 2, end: 6}
  - {name: scores, type: matmul, inputs: [q, k], transpose_b: true, alpha: 0.5}
  - {name: probs, type: softmax, axis: h}
  - {name: flat, type: reshape, shape: [-1, 2, 2]}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)"};
}

// At least: 11 zoo networks, the block library, the fixtures (the zoo grows).
constexpr int kNetworkSources = 12 + 6;
constexpr int kNetworkCases = kNetworkSources * kTextMutations;  // 234 at least
constexpr int kConfigCases = 20 * kTextMutations;                // 260
constexpr int kIdxCases = 4 * kByteMutations * 4 + 4;            // 84
constexpr int kCifarCases = 2 * kByteMutations * 4;              // 40
constexpr int kCheckpointCases = kByteMutations * 16;            // 80
static_assert(kNetworkCases + kConfigCases + kIdxCases + kCifarCases + kCheckpointCases >= 500,
              "the fuzz test promises at least 500 generated cases");
// ONNX models from PyTorch (tests/testdata/onnx): structural and byte mutations.
// A dense block and an Inception block; ShuffleNetV2 (folded shape
// arithmetic, channel shuffle and split), ConvNeXt (the layer norm and GELU
// chains, channels-last views), a ViT (attention's MatMul, Softmax and
// reshapes of the batch merged with the heads, the class token's Expand)
// and causal attention over a sequence (its mask); a Swin (the shifted
// windows' rolls, partitions, constant-folded mask and relative position
// bias, the patch merging's strided slices) and its version 2 (cosine
// attention, a bias computed from weights); a MaxViT (its partitioned
// views, grid attention and Einsum products).
const char* const kOnnxSources[] = {"dense_block", "inception",      "shufflenet_v2", "convnext",
                                    "vit",         "char_attention", "pixel_softmax", "swin",
                                    "swin_v2",     "maxvit"};
constexpr int kOnnxSourceCount = static_cast<int>(sizeof(kOnnxSources) / sizeof(kOnnxSources[0]));
constexpr int kOnnxMutations = static_cast<int>(OnnxMutation::kCount);
constexpr int kOnnxDraws = 6, kOnnxByteDraws = 4;
constexpr int kOnnxCases =
    kOnnxSourceCount * (kOnnxMutations * kOnnxDraws + kByteMutations * kOnnxByteDraws);

// predict's inputs: images of both formats and both channel counts, raw and
// gzipped idx image files, a CIFAR-10 batch (name, file name, config kind).
constexpr int kPredictDraws = 3;
// Exports read back: each fixture network under each text mutation.
constexpr int kExportDraws = 2, kExportByteDraws = 2;
// The host tier: memory sections drawn from these values.
constexpr int kHostCases = 48;
const char* const kHostModes[] = {"offload", "superneurons",      "vdnn",     "window",   "lms",
                                  "dymem",   "offload_recompute", "liveness", "recompute"};
// Settings of the superneurons scheduler that only some modes read (each
// with the switch it needs): the others must refuse them, naming the key.
const char* const kMootKeys[][2] = {{"prefetch_ahead: 2", "offload"},
                                    {"recompute_strategy: memory", "recompute"}};
const char* const kHostBudgets[] = {"0",    "1",    "4KiB", "64KiB",
                                    "1MiB", "1GiB", "1PiB", "18446744073709551615"};
const char* const kDeviceBudgets[] = {"8KiB", "32KiB", "256KiB", "1GiB"};

void Report(const char* what, const Tally& t) {
  std::printf("fuzz %s: %d cases (seed %llu): %d accepted, %d rejected; slowest %.2f s (%s)\n",
              what, t.cases, static_cast<unsigned long long>(Seed()), t.accepted, t.rejected,
              t.slowest_seconds, t.slowest.c_str());
}

using TextSources = std::vector<std::pair<std::string, std::string>>;  // name, text

// Scale() rounds of every source under every text mutation, drawn from
// `rng` in that order: each(name, mutation, mutated text).
template <typename Each>
void ForEachMutatedText(const TextSources& sources, Random& rng, Each each) {
  for (int round = 0; round < Scale(); ++round) {
    for (const auto& [name, text] : sources) {
      for (int m = 0; m < kTextMutations; ++m) {
        const auto mutation = static_cast<TextMutation>(m);
        each(name, mutation, MutateText(text, mutation, rng));
      }
    }
  }
}

class FuzzTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Planning models convolution times: no case measures anything.
    cpu::SetConvTiming({cpu::ConvTimingMode::kModel, ""});
  }
};

TEST_F(FuzzTest, Networks) {
  TextSources sources;
  for (const auto& entry : fs::directory_iterator("models")) {
    if (entry.path().extension() == ".yaml") {
      sources.push_back({entry.path().filename().string(), ReadText(entry.path().string())});
    }
  }
  std::sort(sources.begin(), sources.end());
  sources.push_back({"blocks/resnet.yaml", ReadText("models/blocks/resnet.yaml")});
  const std::vector<std::string> fixtures = FixtureNets();
  for (size_t i = 0; i < fixtures.size(); ++i) {
    sources.push_back({"fixture" + std::to_string(i), fixtures[i]});
  }
  const std::vector<std::string> unexported = UnexportedNets();
  for (size_t i = 0; i < unexported.size(); ++i) {
    sources.push_back({"unexported" + std::to_string(i), unexported[i]});
  }
  ASSERT_GE(static_cast<int>(sources.size()), kNetworkSources);
  const std::string dir = FreshDir("networks");
  fs::create_directories(dir + "/blocks");
  Random rng(Seed());
  Tally tally;
  ForEachMutatedText(
      sources, rng,
      [&](const std::string& name, TextMutation mutation, const std::string& mutated) {
        // A mutated block library is read through the networks that include it.
        const bool library = name == "blocks/resnet.yaml";
        WriteText(dir + "/blocks/resnet.yaml",
                  library ? mutated : ReadText("models/blocks/resnet.yaml"));
        WriteText(dir + "/net.yaml", library ? ReadText("models/resnet50.yaml") : mutated);
        const std::string mode = static_cast<int>(mutation) % 2 ? "superneurons" : "liveness";
        RunCase(
            name + " / " + TextMutationName(mutation),
            [&] { return NetworkPipeline(dir + "/net.yaml", mode); }, &tally);
      });
  EXPECT_EQ(tally.cases, static_cast<int>(sources.size()) * kTextMutations * Scale());
  EXPECT_GE(tally.cases, kNetworkCases * Scale());
  Report("networks", tally);
}

TEST_F(FuzzTest, Configs) {
  TextSources sources;
  for (const auto& entry : fs::directory_iterator("configs")) {
    if (entry.path().extension() == ".yaml") {
      sources.push_back({entry.path().string(), ReadText(entry.path().string())});
    }
  }
  std::sort(sources.begin(), sources.end());
  sources.push_back({"configs/inline.yaml", std::string("model:\n") + R"(
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv, type: convolution, filters: 4, kernel: 3}
    - {name: fc, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: /nowhere, batch: 8, workers: 2, augment: {crop: 28, pad: 2}}
solver: {type: adam, lr: 0.001, schedule: {type: multistep, milestones: [1, 2], gamma: 0.5}}
memory: {mode: superneurons, device_budget: 64MiB, workspace: pin:im2col_image}
run: {steps: 10, checkpoint_every: 5, eval_every: 5, seed: 3, precision: fp16, loss_scale: 1024,
     loss_scale_growth: 100}
)"});
  // Every memory and data-parallel setting at once, so their readers meet the
  // mutations too.
  sources.push_back({"configs/inline_memory.yaml", std::string("model:\n") + R"(
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv, type: convolution, filters: 4, kernel: 3}
    - {name: bn, type: batch_norm}
    - {name: fc, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: /nowhere, batch: 8}
solver: {type: sgd, lr: 0.01, momentum: 0.9}
memory: {mode: window, device_budget: 64MiB, host_budget: 1GiB, allocator: va, va_chunk: 64KiB,
         window: 1.5x, window_budget: 1x, params: above:1KiB, update: host, host_tier: ram,
         chunk: 2, stream_buffers: 1, workspace: pin:im2col_image, compact: false}
run: {steps: 4, seed: 5, init: /nowhere/init.npz, precision: bf16, micro_batches: 2}
distributed: {bucket: 256KiB, sync_batch_norm: false, check_replicas: true, zero: 1}
)"});
  // A searching planner's settings (room to spare: the mutations reach the
  // readers and checks, not minutes of search).
  sources.push_back({"configs/inline_planner.yaml", std::string("model:\n") + R"(
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv, type: convolution, filters: 4, kernel: 3}
    - {name: fc, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: /nowhere, batch: 8}
memory: {mode: search, device_budget: 64MiB, min_offload: 0,
         planner: {limit: 48MiB, evaluations: 50, seed: 2, profile: h100-pcie5, placements: 2}}
run: {steps: 2}
)"});
  // The text dataset's keys; the model takes its sequence and classes from the data.
  sources.push_back({"configs/inline_text.yaml", std::string("model:\n") + R"(
  params: {sequence: 8, classes: 10}
  layers:
    - {name: data, type: input, shape: [1, 1, $sequence], labels: pixels}
    - {name: score, type: convolution, filters: $classes, kernel: 1}
    - {name: loss, type: softmax_loss}
data: {dataset: text, path: /nowhere, batch: 4, sequence: 16, test_fraction: 0.1, streams: true,
       shuffle: false, vocabulary: /nowhere/vocab.txt}
run: {steps: 2}
)"});
  // Settings the mode makes moot: refused unmutated, mutated as the rest.
  sources.push_back({"configs/moot_keys.yaml", std::string("model:\n") + R"(
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: fc, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: /nowhere, batch: 8}
memory: {mode: liveness, prefetch_ahead: 3, recompute_strategy: memory}
run: {steps: 2}
)"});
  for (const auto& [name, text] : sources) {
    if (name.rfind("configs/inline", 0) == 0) {
      const Status unmutated = ConfigPipeline(text, name);
      EXPECT_TRUE(unmutated.ok()) << name << ": " << unmutated.ToString();
    }
  }
  const Status moot = ConfigPipeline(sources.back().second, sources.back().first);
  EXPECT_THAT(moot.message(), HasSubstr("memory.prefetch_ahead: mode 'liveness' does not read it"));
  ASSERT_EQ(static_cast<int>(sources.size()) * kTextMutations, kConfigCases);
  Random rng(Seed() + 1);
  Tally tally;
  ForEachMutatedText(
      sources, rng,
      [&](const std::string& name, TextMutation mutation, const std::string& mutated) {
        RunCase(
            name + " / " + TextMutationName(mutation),
            [&] { return ConfigPipeline(mutated, name); }, &tally);
      });
  EXPECT_EQ(tally.cases, kConfigCases * Scale());
  Report("configs", tally);
}

TEST_F(FuzzTest, IdxDatasets) {
  const char* const kFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  const std::string dir = FreshDir("idx");
  Random rng(Seed() + 2);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (const char* file : kFiles) {
      const std::string path = dir + "/" + file;
      const bool gz = fs::path(file).extension() == ".gz";
      for (int m = 0; m < kByteMutations; ++m) {
        for (int draw = 0; draw < 4; ++draw) {
          WriteIdxSet(dir);
          const auto mutation = static_cast<ByteMutation>(m);
          // Half of the gzipped cases mutate the content, half the stream.
          const bool images = std::string(file).find("images") != std::string::npos;
          const std::vector<uint8_t> content =
              gz && draw % 2 == 0
                  ? Gzip(MutateBytes(images ? IdxImages(3, 4, 5) : IdxLabels(3), mutation, 16, rng))
                  : MutateBytes(ReadBytes(path), mutation, 16, rng);
          WriteBytes(path, content);
          RunCase(
              std::string(file) + " / " + ByteMutationName(mutation),
              [&] { return IdxPipeline(dir); }, &tally);
        }
      }
      // The file replaced by something that is not a file.
      WriteIdxSet(dir);
      fs::remove(path);
      fs::create_directory(path);
      RunCase(
          std::string(file) + " / folder", [&] { return IdxPipeline(dir); }, &tally);
      fs::remove(path);
    }
  }
  EXPECT_EQ(tally.cases, kIdxCases * Scale());
  Report("idx datasets", tally);
}

TEST_F(FuzzTest, CifarDatasets) {
  const char* const kFiles[] = {"data_batch_3.bin", "test_batch.bin"};
  const std::string dir = FreshDir("cifar");
  Random rng(Seed() + 3);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (const char* file : kFiles) {
      for (int m = 0; m < kByteMutations; ++m) {
        for (int draw = 0; draw < 4; ++draw) {
          WriteCifarSet(dir);
          const auto mutation = static_cast<ByteMutation>(m);
          const std::string path = dir + "/" + file;
          WriteBytes(path, MutateBytes(ReadBytes(path), mutation, 4, rng));
          RunCase(
              std::string(file) + " / " + ByteMutationName(mutation),
              [&] { return CifarPipeline(dir); }, &tally);
        }
      }
    }
  }
  EXPECT_EQ(tally.cases, kCifarCases * Scale());
  Report("CIFAR-10 datasets", tally);
}

TEST_F(FuzzTest, Checkpoints) {
  const std::string dir = FreshDir("checkpoints");
  auto bench = CheckpointBench::Create();
  const std::string good = dir + "/good.npz";
  ASSERT_TRUE(bench->Save(good).ok());
  ASSERT_TRUE(bench->Load(good).ok());
  const std::vector<uint8_t> bytes = ReadBytes(good);
  Random rng(Seed() + 4);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (int m = 0; m < kByteMutations; ++m) {
      for (int draw = 0; draw < 16; ++draw) {
        const auto mutation = static_cast<ByteMutation>(m);
        const std::string path = dir + "/mutated.npz";
        // Header words of a zip are little-endian; the big-endian rewrite
        // still lands extreme values in sizes, offsets and counts.
        WriteBytes(path, MutateBytes(bytes, mutation, bytes.size(), rng));
        RunCase(
            std::string("checkpoint / ") + ByteMutationName(mutation),
            [&] { return bench->Load(path); }, &tally);
      }
    }
  }
  EXPECT_EQ(tally.cases, kCheckpointCases * Scale());
  Report("checkpoints", tally);
}

// Arrays that are valid .npz but wrong for the network: a value that is not
// finite, a variance below zero, a transposed shape, an array the network
// lacks. Every one must be refused before anything is copied.
TEST_F(FuzzTest, CheckpointValues) {
  const std::string dir = FreshDir("checkpoint_values");
  auto bench = CheckpointBench::Create();
  const std::string good = dir + "/good.npz", path = dir + "/mutated.npz";
  ASSERT_TRUE(bench->Save(good).ok());
  const NpzArchive original = *ReadNpz(good);
  std::vector<std::string> params;
  for (const auto& [key, array] : original) {
    if (key.rfind("params/", 0) == 0) params.push_back(key);
  }
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  constexpr int kKinds = 4, kDraws = 8;
  Random rng(Seed() + 7);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (int kind = 0; kind < kKinds; ++kind) {
      for (int draw = 0; draw < kDraws; ++draw) {
        NpzArchive archive = original;
        const std::string key = kind == 1 ? "params/bn/running_var" : rng.Pick(params);
        NpyArray& array = archive.at(key);
        std::vector<float> values(array.floats(), array.floats() + array.numel());
        const size_t at = rng.Below(values.size());
        if (kind == 0) values[at] = kBad[rng.Below(3)];
        if (kind == 1) values[at] = -1.0f - static_cast<float>(rng.Below(1000));
        array = NpyArray::Floats(array.shape, values.data());
        if (kind == 2) std::reverse(array.shape.begin(), array.shape.end());
        if (kind == 3) archive["params/extra" + std::to_string(draw) + "/weight"] = array;
        if (kind == 2 && array.shape == original.at(key).shape) continue;  // symmetric
        ASSERT_TRUE(WriteNpzAtomically(path, archive).ok());
        const Status loaded = RunCase(
            "checkpoint values / kind " + std::to_string(kind), [&] { return bench->Load(path); },
            &tally);
        EXPECT_EQ(loaded.code(), StatusCode::kInvalidArgument) << kind << ": " << loaded.ToString();
      }
    }
  }
  EXPECT_EQ(tally.accepted, 0);
  Report("checkpoint values", tally);
}

// An ONNX model is imported, built and planned; a rejection must be a
// user-facing error (never kInternal: the pipeline reports a weight that
// does not fit its layer as one).
TEST_F(FuzzTest, OnnxModels) {
  const std::string path = FreshDir("onnx") + "/mutated.onnx";
  Random rng(Seed() + 5);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (const char* source : kOnnxSources) {
      const std::string original = std::string("tests/testdata/onnx/") + source + ".onnx";
      ASSERT_TRUE(OnnxPipeline(original).ok()) << source;
      const std::vector<uint8_t> bytes = ReadBytes(original);
      const std::string text(bytes.begin(), bytes.end());
      auto run = [&](const std::string& name) {
        Status s = RunCase(
            name, [&] { return OnnxPipeline(path); }, &tally);
        EXPECT_NE(s.code(), StatusCode::kInternal) << name << ": " << s.ToString();
      };
      for (int m = 0; m < kOnnxMutations; ++m) {
        for (int draw = 0; draw < kOnnxDraws; ++draw) {
          const auto mutation = static_cast<OnnxMutation>(m);
          WriteText(path, MutateOnnx(text, mutation, rng));
          run(std::string(source) + " / " + OnnxMutationName(mutation));
        }
      }
      for (int m = 0; m < kByteMutations; ++m) {
        for (int draw = 0; draw < kOnnxByteDraws; ++draw) {
          const auto mutation = static_cast<ByteMutation>(m);
          WriteBytes(path, MutateBytes(bytes, mutation, bytes.size(), rng));
          run(std::string(source) + " / bytes " + ByteMutationName(mutation));
        }
      }
    }
  }
  EXPECT_EQ(tally.cases, kOnnxCases * Scale());
  Report("onnx models", tally);
}

// predict --input: every accepted file gives examples of the network's size
// with finite values (PredictInputPipeline); every refusal is a clean error.
TEST_F(FuzzTest, PredictInputs) {
  struct Source {
    std::string file, dataset;
    std::vector<uint8_t> bytes;
  };
  const std::vector<Source> sources = {
      {"gray.png", "fashion_mnist", EncodedImage(".png", 28, 28, 1)},
      {"color.png", "cifar10", EncodedImage(".png", 32, 32, 3)},
      {"photo.jpg", "fashion_mnist", EncodedImage(".jpg", 30, 40, 3)},
      {"photo.jpeg", "cifar10", EncodedImage(".jpg", 48, 36, 3)},
      {"t10k-images-idx3-ubyte", "fashion_mnist", IdxImages(3, 28, 28)},
      {"t10k-images-idx3-ubyte.gz", "fashion_mnist", Gzip(IdxImages(2, 28, 28))},
      {"test_batch.bin", "cifar10", CifarRecords(3, 1)},
  };
  const std::string dir = FreshDir("predict");
  Random rng(Seed() + 8);
  Tally tally;
  for (int round = 0; round < Scale(); ++round) {
    for (const Source& source : sources) {
      const std::string path = dir + "/" + source.file;
      WriteBytes(path, source.bytes);
      ASSERT_TRUE(PredictInputPipeline(path, source.dataset).ok()) << source.file;
      for (int m = 0; m < kByteMutations; ++m) {
        for (int draw = 0; draw < kPredictDraws; ++draw) {
          const auto mutation = static_cast<ByteMutation>(m);
          WriteBytes(path, MutateBytes(source.bytes, mutation, 32, rng));
          const std::string name = source.file + " / " + ByteMutationName(mutation);
          const Status s = RunCase(
              name, [&] { return PredictInputPipeline(path, source.dataset); }, &tally);
          EXPECT_NE(s.code(), StatusCode::kInternal) << name << ": " << s.ToString();
        }
      }
    }
  }
  EXPECT_EQ(tally.cases,
            static_cast<int>(sources.size()) * kByteMutations * kPredictDraws * Scale());
  Report("predict inputs", tally);
}

// onnx_export of mutated networks: refused cleanly, or read back as the same
// network (ExportPipeline); the exported file with its bytes mutated is an
// ONNX input like any other.
TEST_F(FuzzTest, ExportsReadBack) {
  const std::string dir = FreshDir("export");
  const std::string net = dir + "/net.yaml", onnx = dir + "/net.onnx";
  Random rng(Seed() + 9);
  Tally tally;
  auto run = [&](const std::string& name, const std::function<Status()>& body) {
    const Status s = RunCase(name, body, &tally);
    EXPECT_NE(s.code(), StatusCode::kInternal) << name << ": " << s.ToString();
  };
  const std::vector<std::string> fixtures = FixtureNets();
  for (int round = 0; round < Scale(); ++round) {
    for (size_t i = 0; i < fixtures.size(); ++i) {
      const std::string source = "fixture" + std::to_string(i);
      WriteText(net, fixtures[i]);
      const Status original = ExportPipeline(net, onnx);
      ASSERT_TRUE(original.ok()) << source << ": " << original.ToString();
      const std::vector<uint8_t> exported = ReadBytes(onnx);
      for (int m = 0; m < kTextMutations; ++m) {
        for (int draw = 0; draw < kExportDraws; ++draw) {
          const auto mutation = static_cast<TextMutation>(m);
          WriteText(net, MutateText(fixtures[i], mutation, rng));
          run(source + " / " + TextMutationName(mutation),
              [&] { return ExportPipeline(net, onnx); });
        }
      }
      for (int m = 0; m < kByteMutations; ++m) {
        for (int draw = 0; draw < kExportByteDraws; ++draw) {
          const auto mutation = static_cast<ByteMutation>(m);
          WriteBytes(onnx, MutateBytes(exported, mutation, exported.size(), rng));
          run(source + " exported / bytes " + ByteMutationName(mutation),
              [&] { return OnnxPipeline(onnx); });
        }
      }
    }
  }
  Report("exports read back", tally);
}

// The host tier: offloading modes under host budgets from zero to the
// largest size, in RAM or in a file, at device budgets from tiny to roomy.
// A run either computes the baseline's losses and weights bit for bit or
// ends in a clean error; none crashes (no SIGBUS from a full file tier). A
// third of the draws add a setting that only some modes read: the others
// refuse it, naming the key and the mode.
TEST_F(FuzzTest, HostTier) {
  const std::string dir = FreshDir("host_tier");
  Random rng(Seed() + 10);
  Tally tally;
  int moot = 0;
  for (int round = 0; round < Scale(); ++round) {
    for (int c = 0; c < kHostCases; ++c) {
      const std::string mode = kHostModes[rng.Below(std::size(kHostModes))];
      const auto* extra = rng.Below(3) == 0 ? kMootKeys[rng.Below(std::size(kMootKeys))] : nullptr;
      const std::string memory =
          "mode: " + mode +
          ", device_budget: " + kDeviceBudgets[rng.Below(std::size(kDeviceBudgets))] +
          ", host_budget: " + kHostBudgets[rng.Below(std::size(kHostBudgets))] +
          (rng.Below(2) ? ", host_tier: \"file:" + dir + "\"" : "") +
          (extra != nullptr ? std::string(", ") + extra[0] : "");
      const Status s = RunCase(
          memory, [&] { return HostTierPipeline(memory); }, &tally);
      EXPECT_NE(s.code(), StatusCode::kInternal) << memory << ": " << s.ToString();
      MemoryOptions preset;
      ASSERT_TRUE(ApplyMemoryMode(mode, &preset).ok());
      const bool reads =
          preset.scheduler == "superneurons" &&
          (std::string(extra == nullptr ? "" : extra[1]) == "offload" ? preset.offload
                                                                      : preset.recompute);
      if (extra != nullptr && !reads) {
        // Refused; for this key unless another value was refused first.
        EXPECT_FALSE(s.ok()) << memory;
        const std::string key = std::string(extra[0]).substr(0, std::string(extra[0]).find(':'));
        moot += s.message().find("memory." + key + ": mode '" + mode + "' does not read it") !=
                std::string::npos;
      }
    }
  }
  EXPECT_GT(moot, 0);  // refused for the key itself, naming it and the mode
  EXPECT_GT(tally.accepted, 0);
  Report("host tier", tally);
}

}  // namespace
}  // namespace fuzz
}  // namespace spill
