// Training as a product: configs, checkpoints that numpy can read and that
// resume to exactly the losses of an uninterrupted run, Ctrl-C, solvers and
// learning-rate schedules. The data is a small Fashion-MNIST-format dataset
// written here in the real idx format.
#include "tools/trainer/trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/pair_dataset.h"
#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/io/npz.h"
#include "framework/solver/lr_schedule.h"
#include "memory/planners/planner_settings.h"
#include "memory/planning/planner.h"
#include "tests/testing/trace_reader.h"
#include "tools/trainer/inference.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void WriteBigEndian(std::ofstream& out, uint32_t v) {
  unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                        static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  out.write(reinterpret_cast<char*>(b), 4);
}

// Images whose brightest quadrant is the label (0..3): learnable quickly.
void WriteIdx(const fs::path& dir, const std::string& prefix, int count, uint64_t seed) {
  std::ofstream images(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary);
  std::ofstream labels(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  WriteBigEndian(images, 2051);
  WriteBigEndian(images, count);
  WriteBigEndian(images, 28);
  WriteBigEndian(images, 28);
  WriteBigEndian(labels, 2049);
  WriteBigEndian(labels, count);
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(Mix64(seed + i) % 4);
    for (int y = 0; y < 28; ++y) {
      for (int x = 0; x < 28; ++x) {
        int quadrant = (y >= 14) * 2 + (x >= 14);
        int base = quadrant == label ? 160 : 40;
        images.put(static_cast<char>(
            base + static_cast<int>(Mix64(seed * 7 + i * 784 + y * 28 + x) % 60)));
      }
    }
    labels.put(static_cast<char>(label));
  }
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spill_trainer_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    WriteIdx(dir_ / "data", "train", 320, 1);
    WriteIdx(dir_ / "data", "t10k", 96, 2);
    Trainer::ClearStop();
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig Config(const std::string& extra_run = "") {
    auto config = ParseTrainConfig(ConfigText(extra_run), "test_config.yaml", dir_.string());
    SPILL_CHECK(config.ok()) << config.status().ToString();
    return *config;
  }

  std::string ConfigText(const std::string& extra_run = "") {
    return R"(
model:
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: conv, type: convolution, filters: 4, kernel: 3, stride: 2}
    - {name: bn, type: batch_norm}
    - {name: relu, type: relu}
    - {name: pool, type: max_pool, kernel: 2}
    - {name: fc, type: fully_connected, outputs: 16}
    - {name: drop, type: dropout, ratio: 0.2}
    - {name: out, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: )" +
           (dir_ / "data").string() + R"(, batch: 32, workers: 2,
       augment: {crop: 28, pad: 2, random_crop: true}}
solver: {type: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 1e-4,
         schedule: {type: cosine, warmup: 3, unit: step}}
run: {epochs: 3, seed: 5, output: )" +
           (dir_ / "run").string() + extra_run + "}\n";
  }

  static TrainOptions Quiet() {
    TrainOptions options;
    options.progress = false;
    options.verbose = false;
    return options;
  }

  // A trainer of Config(run_extra): at most `max_steps` steps (0: all),
  // resumed from `resume`, or started afresh over any earlier run.
  StatusOr<std::unique_ptr<Trainer>> Train(const std::string& run_extra, int64_t max_steps,
                                           const std::string& resume) {
    TrainOptions options = Quiet();
    options.max_steps = max_steps;
    options.resume = resume;
    options.overwrite = resume.empty();
    return Trainer::Create(Config(run_extra), options);
  }

  // The losses of a run of `run_extra` stopped after step 13, checkpointed
  // there, and resumed from the checkpoint (run/checkpoint.npz).
  std::vector<double> StoppedAndResumed(const std::string& run_extra) {
    std::vector<double> pieced;
    {
      auto trainer = Train(run_extra + ", checkpoint_every: 13", 13, "");
      EXPECT_TRUE(trainer.ok() && (*trainer)->Run().ok());
      if (!trainer.ok()) return pieced;
      pieced = (*trainer)->report().losses;
    }
    auto trainer = Train(run_extra, 0, (dir_ / "run" / "checkpoint.npz").string());
    EXPECT_TRUE(trainer.ok()) << trainer.status().ToString();
    if (!trainer.ok()) return pieced;
    const Status ran = (*trainer)->Run();
    EXPECT_TRUE(ran.ok()) << ran.ToString();
    for (double loss : (*trainer)->report().losses) pieced.push_back(loss);
    return pieced;
  }

  // `checkpoint` evaluates in the precision it was trained in, to the test
  // figures training gave.
  void ExpectEvaluatesAsTrained(const std::string& checkpoint, Precision precision,
                                const TrainReport& trained) {
    auto inference = Inference::Create(Config(), checkpoint);
    ASSERT_TRUE(inference.ok()) << inference.status().ToString();
    EXPECT_EQ((*inference)->net().precision(), precision);
    auto eval = (*inference)->Evaluate();
    ASSERT_TRUE(eval.ok()) << eval.status().ToString();
    EXPECT_EQ(eval->accuracy, trained.test_accuracy);
    EXPECT_EQ(eval->loss, trained.test_loss);
  }

  fs::path dir_;
};

TEST_F(TrainerTest, TrainsEvaluatesAndReports) {
  auto trainer = Trainer::Create(Config(), Quiet());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  const TrainReport& r = (*trainer)->report();
  EXPECT_EQ(r.steps, 30);  // 3 epochs of 10 batches
  EXPECT_TRUE(r.evaluated);
  EXPECT_GT(r.test_accuracy, 0.6);  // chance is 0.25
  EXPECT_GT(r.peak_device_bytes, 0u);
  EXPECT_LT(r.losses.back(), r.losses.front());
  EXPECT_THAT(r.ToJson(MemoryOptions()), HasSubstr("\"peak_device_memory_bytes\": "));
  std::ifstream log(dir_ / "run" / "log.jsonl");
  std::string line;
  int train_lines = 0, eval_lines = 0;
  while (std::getline(log, line)) {
    train_lines += line.find("\"kind\":\"train\"") != std::string::npos;
    eval_lines += line.find("\"kind\":\"eval\"") != std::string::npos;
  }
  EXPECT_EQ(train_lines, 30);
  EXPECT_EQ(eval_lines, 3);
}

// Stochastic depth: the log gives each step's dropped branches, which add
// up to the report's, and evaluation runs every branch (scaled).
TEST_F(TrainerTest, StochasticDepthIsLoggedAndReported) {
  const std::string text = R"(
model:
  layers:
    - {name: data, type: input, shape: [1, 28, 28]}
    - {name: stem, type: convolution, filters: 4, kernel: 3, stride: 2}
    - {name: conv1, type: convolution, filters: 4, kernel: 3, pad: 1}
    - {name: relu1, type: relu}
    - {name: conv2, type: convolution, filters: 4, kernel: 3, pad: 1}
    - {name: unit1, type: add, inputs: [conv2, stem], survival: 0.5}
    - {name: conv3, type: convolution, filters: 4, kernel: 3, pad: 1}
    - {name: unit2, type: add, inputs: [conv3, unit1], survival: 0.75}
    - {name: pool, type: global_avg_pool}
    - {name: out, type: fully_connected, outputs: 10}
    - {name: loss, type: softmax_loss}
data: {dataset: fashion_mnist, path: )" +
                           (dir_ / "data").string() +
                           R"(, batch: 32}
solver: {type: sgd, lr: 0.05, momentum: 0.9}
run: {epochs: 2, seed: 5, output: )" +
                           (dir_ / "run").string() + "}\n";
  auto config = ParseTrainConfig(text, "depth.yaml", dir_.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  TrainOptions options = Quiet();
  options.trace_dir = (dir_ / "trace").string();
  auto trainer = Trainer::Create(*config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  const TrainReport& r = (*trainer)->report();
  ASSERT_EQ(r.steps, 20);
  EXPECT_GT(r.dropped_branches, 0);
  EXPECT_LT(r.dropped_branches, 2 * r.steps);
  EXPECT_GT(r.skipped_computations, 0);
  EXPECT_THAT(r.ToJson(MemoryOptions()), HasSubstr("\"dropped_branches\": "));
  std::ifstream log(dir_ / "run" / "log.jsonl");
  std::string line;
  int64_t logged = 0;
  int train_lines = 0;
  while (std::getline(log, line)) {
    const size_t at = line.find("\"dropped\":");
    if (line.find("\"kind\":\"train\"") == std::string::npos) continue;
    ++train_lines;
    ASSERT_NE(at, std::string::npos) << line;
    logged += std::stoll(line.substr(at + 10));
  }
  EXPECT_EQ(train_lines, 20);
  EXPECT_EQ(logged, r.dropped_branches);
  EXPECT_TRUE(r.evaluated);
  EXPECT_TRUE(std::isfinite(r.test_loss));
  // The trace gives each step's pattern (the input each layer left out, in
  // route order) for a replay elsewhere.
  auto trace = ReadNpz((dir_ / "trace" / "trace.npz").string());
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_TRUE(trace->count("dropped"));
  const NpyArray& dropped = trace->at("dropped");
  ASSERT_EQ(dropped.shape, (std::vector<int64_t>{20, (*trainer)->net().num_layers()}));
  int64_t traced = 0;
  for (int64_t i = 0; i < dropped.numel(); ++i) {
    EXPECT_TRUE(dropped.floats()[i] == -1 || dropped.floats()[i] == 0) << i;
    traced += dropped.floats()[i] == 0;
  }
  EXPECT_EQ(traced, r.dropped_branches);
}

// train --timeline: the second iteration as a Chrome trace, with one
// compute slice per step, the copies on their own track (offload mode over a
// throttled link) and the memory counters.
TEST_F(TrainerTest, TimelineTracesTheSecondIteration) {
  TrainConfig config = Config();
  ASSERT_TRUE(ApplyMemoryMode("offload", &config.memory).ok());
  TrainOptions options = Quiet();
  options.max_steps = 3;
  options.link_gbps = 0.5;
  options.timeline = (dir_ / "timeline.json").string();
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  std::ifstream in(options.timeline);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const testing::TraceContents trace = testing::ReadTrace(text);
  ASSERT_TRUE(trace.valid) << trace.error;
  int active = 0;
  for (const Step& step : (*trainer)->net().schedule().steps) active += step.active;
  EXPECT_EQ(trace.Slices("compute queue", "forward") + trace.Slices("compute queue", "backward"),
            active);
  EXPECT_EQ(trace.Slices("compute queue", "update"), 1);
  EXPECT_GT(trace.Slices("copy queue to host", "offload"), 0);
  EXPECT_EQ(trace.Slices("copy queue to host", "offload"),
            trace.Slices("copy queue to device", "prefetch"));
  EXPECT_TRUE(trace.durations_valid);
  EXPECT_GT(trace.counter_samples, 2 * active);
  EXPECT_EQ(trace.counters.at("device memory").count("activations"), 1u);
  EXPECT_EQ(trace.counters.at("host memory").count("offloaded"), 1u);
  EXPECT_THAT(trace.other.value("title", ""), HasSubstr("(measured)"));
}

TEST_F(TrainerTest, ResumingGivesTheLossesOfAnUninterruptedRun) {
  std::vector<double> uninterrupted;
  {
    TrainConfig config = Config();
    config.run.output = (dir_ / "whole").string();
    auto trainer = Trainer::Create(config, Quiet());
    ASSERT_TRUE(trainer.ok());
    ASSERT_TRUE((*trainer)->Run().ok());
    uninterrupted = (*trainer)->report().losses;
  }
  ASSERT_EQ(uninterrupted.size(), 30u);
  // Stop mid-epoch (step 13 of 30), then resume from the checkpoint.
  std::vector<double> pieced;
  TrainConfig config = Config(", checkpoint_every: 13");
  {
    TrainOptions options = Quiet();
    options.max_steps = 13;
    auto trainer = Trainer::Create(config, options);
    ASSERT_TRUE(trainer.ok());
    ASSERT_TRUE((*trainer)->Run().ok());
    pieced = (*trainer)->report().losses;
  }
  {
    TrainOptions options = Quiet();
    options.resume = (dir_ / "run" / "checkpoint.npz").string();
    auto trainer = Trainer::Create(config, options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    ASSERT_TRUE((*trainer)->Run().ok());
    for (double loss : (*trainer)->report().losses) pieced.push_back(loss);
  }
  ASSERT_EQ(pieced.size(), uninterrupted.size());
  for (size_t i = 0; i < pieced.size(); ++i)
    EXPECT_EQ(pieced[i], uninterrupted[i]) << "step " << i + 1;
}

// bf16: activations and their gradients in 16 bits train to about the
// float32 run's accuracy on the same schedule, resume bit-exactly, and a
// checkpoint resumes only in the precision it was trained in.
TEST_F(TrainerTest, Bf16TrainsLikeFloat32ResumesExactlyAndKeepsItsPrecision) {
  TrainReport fp32, bf16;
  {
    auto trainer = Train("", 0, "");
    ASSERT_TRUE(trainer.ok() && (*trainer)->Run().ok());
    fp32 = (*trainer)->report();
  }
  {
    auto trainer = Train(", precision: bf16", 0, "");
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    ASSERT_TRUE((*trainer)->Run().ok());
    bf16 = (*trainer)->report();
  }
  ASSERT_EQ(bf16.losses.size(), fp32.losses.size());
  EXPECT_NE(bf16.losses.back(), fp32.losses.back());  // it did round
  EXPECT_NEAR(bf16.test_accuracy, fp32.test_accuracy, 0.05);
  EXPECT_GT(bf16.test_accuracy, 0.6);

  // Stopped at step 13 and resumed: the uninterrupted bf16 run's losses.
  EXPECT_EQ(StoppedAndResumed(", precision: bf16"), bf16.losses);
  const std::string checkpoint = (dir_ / "run" / "checkpoint.npz").string();

  // Evaluation runs in the checkpoint's precision unless told otherwise: in
  // bf16 it gives the figures training gave.
  ExpectEvaluatesAsTrained(checkpoint, Precision::kBf16, bf16);
  auto fp32_eval = Inference::Create(Config(), checkpoint, true, Precision::kFp32);
  ASSERT_TRUE(fp32_eval.ok()) << fp32_eval.status().ToString();
  EXPECT_EQ((*fp32_eval)->net().precision(), Precision::kFp32);

  auto other = Train("", 0, checkpoint);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("was trained in bf16 (meta/precision)"));
  EXPECT_THAT(other.status().message(), HasSubstr("this run is fp32"));
}

// The train lines of a run's log.jsonl.
std::vector<std::string> TrainLines(const std::filesystem::path& run) {
  std::ifstream log(run / "log.jsonl");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(log, line)) {
    if (line.find("\"kind\":\"train\"") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

bool Skipped(const std::string& line) { return line.find("\"skipped\":true") != std::string::npos; }

// fp16: activations and their gradients in IEEE half, the loss scaled so
// that small gradients do not flush to zero: the float32 run's accuracy on
// the same schedule, each step's scale in the log, and a resumed run takes
// up the scale where it was (here it grows every 5 clean steps).
TEST_F(TrainerTest, Fp16ScalesTheLossTrainsLikeFloat32AndResumesExactly) {
  TrainReport fp32, fp16;
  {
    auto trainer = Train("", 0, "");
    ASSERT_TRUE(trainer.ok() && (*trainer)->Run().ok());
    fp32 = (*trainer)->report();
  }
  const std::string fp16_run = ", precision: fp16, loss_scale: 1024, loss_scale_growth: 5";
  {
    auto trainer = Train(fp16_run, 0, "");
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    const Status ran = (*trainer)->Run();
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    fp16 = (*trainer)->report();
  }
  ASSERT_EQ(fp16.losses.size(), fp32.losses.size());
  EXPECT_NE(fp16.losses.back(), fp32.losses.back());  // it did round
  EXPECT_NEAR(fp16.test_accuracy, fp32.test_accuracy, 0.05);
  EXPECT_GT(fp16.test_accuracy, 0.6);
  const std::vector<std::string> lines = TrainLines(dir_ / "run");
  ASSERT_EQ(lines.size(), 30u);
  EXPECT_THAT(lines[0], HasSubstr("\"loss_scale\":1024"));
  EXPECT_THAT(lines[5], HasSubstr("\"loss_scale\":2048"));  // after 5 clean steps
  for (const std::string& line : lines) EXPECT_FALSE(Skipped(line)) << line;

  // Stopped at step 13 and resumed: the uninterrupted run's losses.
  EXPECT_EQ(StoppedAndResumed(fp16_run), fp16.losses);

  // Evaluation reads the checkpoint in fp16 (no loss to scale there) and
  // gives the figures training gave.
  ExpectEvaluatesAsTrained((dir_ / "run" / "checkpoint.npz").string(), Precision::kFp16, fp16);
}

// A scale too large overflows the 16-bit gradients: those steps change
// nothing and halve the scale until the gradients fit. A run whose
// gradients are never finite stops with the reason once the scale
// underflows, instead of skipping every step.
TEST_F(TrainerTest, Fp16SkipsOverflowingStepsAndStopsWhenTheScaleUnderflows) {
  {
    TrainOptions options = Quiet();
    options.max_steps = 12;
    auto trainer = Trainer::Create(Config(", precision: fp16, loss_scale: 16777216"), options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    const Status ran = (*trainer)->Run();
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    const std::vector<std::string> lines = TrainLines(dir_ / "run");
    ASSERT_EQ(lines.size(), 12u);
    EXPECT_TRUE(Skipped(lines[0])) << lines[0];
    EXPECT_FALSE(Skipped(lines.back())) << lines.back();
    int skipped = 0;
    for (const std::string& line : lines) skipped += Skipped(line);
    EXPECT_LT(skipped, 12);
    EXPECT_EQ((*trainer)->report().skipped_steps, skipped);
    // Skipped steps whose loss was not finite add nothing to the mean.
    EXPECT_TRUE(std::isfinite((*trainer)->report().train_loss));
  }
  {
    // A learning rate that throws the weights far out (the largest
    // solver.lr takes): every later gradient is inf or NaN at every scale.
    std::string text = ConfigText(", precision: fp16");
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"lr: 0.05", "lr: 1000"},
                                   {"epochs: 3", "steps: 60"}}) {
      const size_t at = text.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      text.replace(at, from.size(), to);
    }
    auto config = ParseTrainConfig(text, "storm.yaml", dir_.string());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    TrainOptions options = Quiet();
    options.overwrite = true;
    auto trainer = Trainer::Create(*config, options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    const Status ran = (*trainer)->Run();
    ASSERT_FALSE(ran.ok());
    EXPECT_THAT(ran.message(), HasSubstr("the loss scale fell below 2^-24"));
    EXPECT_THAT(ran.message(), HasSubstr("steps in a row whose gradients held inf or NaN"));
  }
}

// Gradient accumulation trains (its bit-identity with data-parallel ranks
// is data_parallel_test's); what it cannot split or combine with is refused
// by name.
TEST_F(TrainerTest, MicroBatchesTrainAndWhatTheyCannotDoIsRefused) {
  {
    TrainOptions options = Quiet();
    options.max_steps = 3;
    auto trainer = Trainer::Create(Config(", micro_batches: 4"), options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    EXPECT_EQ((*trainer)->net().batch(), 8);  // a quarter of data.batch
    const Status ran = (*trainer)->Run();
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    EXPECT_EQ(TrainLines(dir_ / "run").size(), 3u);
    EXPECT_TRUE(std::isfinite((*trainer)->report().train_loss));
  }
  const std::pair<std::string, std::string> refused[] = {
      {", micro_batches: 3", "run.micro_batches 3 does not divide the batch 32"},
      {", micro_batches: 2, precision: fp16", "does not combine with run.precision fp16"},
  };
  TrainOptions over = Quiet();
  over.overwrite = true;
  for (const auto& [extra, message] : refused) {
    auto bad = Trainer::Create(Config(extra), over);
    ASSERT_FALSE(bad.ok()) << extra;
    EXPECT_THAT(bad.status().message(), HasSubstr(message));
  }
}

// Settings that cannot work are refused by name, with the reason.
TEST_F(TrainerTest, PrecisionSettingsThatCannotRunAreRefused) {
  auto tf32 = Trainer::Create(Config(", precision: tf32"), Quiet());
  ASSERT_FALSE(tf32.ok());
  EXPECT_THAT(tf32.status().message(), HasSubstr("run.precision: tf32"));
  EXPECT_THAT(tf32.status().message(), HasSubstr("the cpu device"));
  auto bad = ParseTrainConfig(ConfigText(", precision: fp8"), "bad.yaml", dir_.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().ToString(), HasSubstr("run.precision"));
  EXPECT_THAT(bad.status().ToString(), HasSubstr("fp32, bf16, fp16, tf32"));
  auto odd = ParseTrainConfig(ConfigText(", precision: fp16, loss_scale: 1000"), "odd.yaml",
                              dir_.string());
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().ToString(), HasSubstr("run.loss_scale"));
  EXPECT_THAT(odd.status().ToString(), HasSubstr("not a power of two"));
  auto unused = ParseTrainConfig(ConfigText(", precision: bf16, loss_scale: 1024"), "bf16.yaml",
                                 dir_.string());
  ASSERT_FALSE(unused.ok());
  EXPECT_THAT(unused.status().ToString(), HasSubstr("applies to run.precision fp16 only"));
  TrainConfig host = Config(", precision: fp16");
  host.memory.params = *ParseParamPlacement("host");
  auto on_host = Trainer::Create(host, Quiet());
  ASSERT_FALSE(on_host.ok());
  EXPECT_THAT(on_host.status().message(), HasSubstr("fp16 with memory.params host"));
  EXPECT_THAT(on_host.status().message(), HasSubstr("needs memory.update: host"));
}

// fp16 with the parameters in host memory: each gradient waits there until
// the iteration is over and every gradient has been checked, and the solver
// step runs there after it. Overflowing steps are skipped as on the device,
// and every loss and weight is the device's, bit for bit - with the tensor
// cache holding the parameters too.
TEST_F(TrainerTest, Fp16WithParametersInHostMemoryTrainsTheBitsOfTheDevice) {
  auto run = [&](const std::string& params, bool update_on_host, const std::string& output) {
    TrainConfig config = Config(", precision: fp16, loss_scale: 16777216, loss_scale_growth: 4");
    config.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
    config.memory.params = *ParseParamPlacement(params);
    config.memory.update_on_host = update_on_host;
    if (params == "cache") SPILL_CHECK(ApplyMemoryMode("superneurons", &config.memory).ok());
    config.run.output = (dir_ / output).string();
    TrainOptions options = Quiet();
    options.max_steps = 14;
    auto trainer = Trainer::Create(config, options);
    SPILL_CHECK(trainer.ok()) << trainer.status().ToString();
    const Status ran = (*trainer)->Run();
    SPILL_CHECK(ran.ok()) << ran.ToString();
    // The weights and the solver state, as the checkpoint holds them.
    auto archive = ReadNpz((dir_ / output / "checkpoint.npz").string());
    SPILL_CHECK(archive.ok()) << archive.status().ToString();
    std::map<std::string, std::vector<char>> weights;
    for (const auto& [name, array] : *archive) {
      if (name.rfind("params/", 0) == 0 || name.rfind("state/", 0) == 0) {
        weights[name] = array.data;
      }
    }
    return std::make_pair((*trainer)->report(), weights);
  };
  const auto [device, device_weights] = run("device", false, "device");
  const std::vector<std::string> lines = TrainLines(dir_ / "device");
  ASSERT_EQ(lines.size(), 14u);
  ASSERT_TRUE(Skipped(lines[0])) << lines[0];
  ASSERT_GT(device.skipped_steps, 0);
  ASSERT_LT(device.skipped_steps, 14);
  ASSERT_GT(device_weights.size(), 2u);
  for (const auto& [params, output] : {std::pair<std::string, std::string>{"host", "host"},
                                       {"above:1KiB", "above"},
                                       {"cache", "cache"}}) {
    const auto [report, weights] = run(params, params != "cache", output);
    EXPECT_EQ(report.losses, device.losses) << params;
    EXPECT_EQ(report.skipped_steps, device.skipped_steps) << params;
    EXPECT_EQ(TrainLines(dir_ / output).size(), lines.size()) << params;
    EXPECT_TRUE(weights == device_weights) << params;
  }
}

// Parameters, gradients and solver state in host memory, updated there as
// each layer's gradient arrives: the same losses as on the device, and
// checkpoints gather the state from host memory and restore it there.
TEST_F(TrainerTest, ParametersInHostMemoryTrainAndResumeLikeOnTheDevice) {
  auto run = [&](TrainConfig config, const std::string& output, int64_t max_steps,
                 const std::string& resume) {
    config.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
    config.run.output = (dir_ / output).string();
    TrainOptions options = Quiet();
    options.max_steps = max_steps;
    options.resume = resume;
    auto trainer = Trainer::Create(config, options);
    SPILL_CHECK(trainer.ok()) << trainer.status().ToString();
    Status status = (*trainer)->Run();
    SPILL_CHECK(status.ok()) << status.ToString();
    return (*trainer)->report().losses;
  };
  const std::vector<double> on_device = run(Config(), "device", 0, "");
  ASSERT_EQ(on_device.size(), 30u);
  for (bool update_on_host : {false, true}) {
    TrainConfig config = Config(", checkpoint_every: 13");
    config.memory.params = *ParseParamPlacement("host");
    config.memory.update_on_host = update_on_host;
    const std::string output = update_on_host ? "host_update_host" : "host_update_device";
    std::vector<double> pieced = run(config, output, 13, "");
    for (double loss : run(config, output, 0, (dir_ / output / "checkpoint.npz").string())) {
      pieced.push_back(loss);
    }
    ASSERT_EQ(pieced.size(), on_device.size());
    for (size_t i = 0; i < pieced.size(); ++i) {
      EXPECT_EQ(pieced[i], on_device[i])
          << "update on " << (update_on_host ? "host" : "device") << ", step " << i + 1;
    }
  }
}

// Through the whole training program (data pipeline, solver, schedule):
// with memory.chunk auto the smallest budget is below SuperNeurons' floor
// (the largest step on top of the persistent tensors), and at that budget,
// where steps stream through host memory, training gives the losses of the
// whole batch on the device bit for bit.
TEST_F(TrainerTest, StreamedStepsTrainLikeTheWholeBatchBelowTheLargestStep) {
  auto config_for = [&](const std::string& chunk) {
    TrainConfig config = Config();
    SPILL_CHECK(ApplyMemoryMode("superneurons", &config.memory).ok());
    config.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
    config.memory.batch_chunk = *ParseBatchChunk(chunk);
    config.run.output = (dir_ / ("run_" + chunk)).string();
    return config;
  };
  int streamed_steps = 0;
  auto losses = [&](const TrainConfig& config) {
    auto trainer = Trainer::Create(config, Quiet());
    SPILL_CHECK(trainer.ok()) << trainer.status().ToString();
    Status status = (*trainer)->Run();
    SPILL_CHECK(status.ok()) << status.ToString();
    streamed_steps = (*trainer)->report().streamed_steps;
    return (*trainer)->report().losses;
  };
  auto minimum = [&](TrainConfig config) {
    config.run.output += "_planned";  // a fresh folder: nothing runs there
    auto trainer = Trainer::Create(config, Quiet());
    SPILL_CHECK(trainer.ok()) << trainer.status().ToString();
    auto bytes = MinimumBudget((*trainer)->net().view(), config.memory, kPoolBlockBytes);
    SPILL_CHECK(bytes.ok()) << bytes.status().ToString();
    return *bytes;
  };
  const std::vector<double> whole = losses(config_for("off"));
  EXPECT_EQ(streamed_steps, 0);
  TrainConfig streamed = config_for("auto");
  const size_t floor = minimum(config_for("off"));
  streamed.memory.device_budget = minimum(streamed);
  EXPECT_LT(streamed.memory.device_budget, floor);
  const std::vector<double> sliced = losses(streamed);
  EXPECT_GT(streamed_steps, 0);
  ASSERT_EQ(sliced.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(sliced[i], whole[i]) << "step " << i + 1;
}

// Below the smallest budget of the default workspace policy's own plan, the
// trainer trains the leaner build (plain layouts, least-workspace
// algorithms: tools/common/net_options.h) that fits, and its peak is that
// build's plan.
TEST_F(TrainerTest, WhereTheDefaultsPlanDoesNotFitALeanerBuildTrains) {
  auto config_for = [&](const std::string& workspace, const std::string& output) {
    TrainConfig config = Config();
    config.run.epochs = 0;
    config.run.steps = 4;  // past the schedule's warmup
    SPILL_CHECK(ApplyMemoryMode("greedy", &config.memory).ok());
    config.memory.workspace = *ParseWorkspacePolicy(workspace);
    config.run.output = (dir_ / output).string();
    return config;
  };
  auto minimum = [&](const TrainConfig& config) {
    auto trainer = Trainer::Create(config, Quiet());
    SPILL_CHECK(trainer.ok()) << trainer.status().ToString();
    auto bytes = MinimumBudget((*trainer)->net().view(), config.memory, kPoolBlockBytes);
    SPILL_CHECK(bytes.ok()) << bytes.status().ToString();
    return *bytes;
  };
  const size_t as_configured = minimum(config_for("dynamic", "planned_dynamic"));
  const size_t least = minimum(config_for("memory_optimal", "planned_optimal"));
  if (least >= as_configured) {
    GTEST_SKIP() << "memory_optimal needs no less than the default here (" << least
                 << " >= " << as_configured << " bytes)";
  }
  TrainConfig config = config_for("dynamic", "run_lean");
  config.memory.device_budget = least;
  auto trainer = Trainer::Create(config, Quiet());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  EXPECT_EQ((*trainer)->report().steps, 4);
  EXPECT_LE((*trainer)->report().peak_device_bytes, least);
}

TEST_F(TrainerTest, StopRequestSavesACheckpointAndResumes) {
  TrainConfig config = Config();
  {
    auto trainer = Trainer::Create(config, Quiet());
    ASSERT_TRUE(trainer.ok());
    Trainer::RequestStop();  // as Ctrl-C during the first step
    Status status = (*trainer)->Run();
    EXPECT_EQ(status.code(), StatusCode::kCancelled);
    EXPECT_TRUE((*trainer)->report().interrupted);
    EXPECT_EQ((*trainer)->report().steps, 1);
  }
  Trainer::ClearStop();
  auto archive = ReadNpz((dir_ / "run" / "checkpoint.npz").string());
  ASSERT_TRUE(archive.ok()) << archive.status().ToString();
  EXPECT_EQ(archive->at("meta/step").int64(), 1);
  EXPECT_EQ(archive->at("params/conv/weight").shape, (std::vector<int64_t>{4, 1, 3, 3}));
  EXPECT_TRUE(archive->count("state/conv/weight.momentum"));
  TrainOptions options = Quiet();
  options.resume = (dir_ / "run" / "checkpoint.npz").string();
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Run().ok());
  EXPECT_EQ((*trainer)->report().steps, 30);
  EXPECT_EQ((*trainer)->report().losses.size(), 29u);
}

TEST_F(TrainerTest, CheckpointFromAnotherNetworkIsRejectedByName) {
  TrainConfig config = Config();
  {
    TrainOptions options = Quiet();
    options.max_steps = 1;
    auto trainer = Trainer::Create(config, options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    ASSERT_TRUE((*trainer)->Run().ok());
  }
  std::string text = config.text;
  text.replace(text.find("outputs: 16"), 11, "outputs: 17");
  auto other = ParseTrainConfig(text, "other.yaml", dir_.string());
  ASSERT_TRUE(other.ok());
  TrainOptions options = Quiet();
  options.resume = (dir_ / "run" / "checkpoint.npz").string();
  auto trainer = Trainer::Create(*other, options);
  ASSERT_FALSE(trainer.ok());
  EXPECT_THAT(trainer.status().message(), HasSubstr("params/fc/weight"));
  EXPECT_THAT(trainer.status().message(), HasSubstr("16x144x1x1"));
}

TEST_F(TrainerTest, ConfigErrorsNameFileLineAndKey) {
  auto bad = ParseTrainConfig(
      "solver: {lr: fast}\ndata: {path: x}\nrun: {epochs: 1}\nmodel: {file: m.yaml}\n", "bad.yaml",
      ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("bad.yaml:1: solver.lr: must be a number in (0, 1000] (got 'fast')"));
  bad = ParseTrainConfig("model: {file: m.yaml}\ndata: {path: x, batchsize: 3}\nrun: {epochs: 1}\n",
                         "bad.yaml", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.yaml:2: unknown key 'data.batchsize'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("batch"));
  bad = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {mode: lazy}\n",
      "bad.yaml", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown memory mode 'lazy'"));
  bad = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {mode: dymem, release: "
      "soon}\n",
      "bad.yaml", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("memory.release"));
  EXPECT_THAT(bad.status().message(), HasSubstr("lazy"));
  // memory.chunk counts images; the va allocator's bytes are memory.va_chunk.
  bad = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {chunk: 2MiB}\n",
      "bad.yaml", ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.yaml:4: memory.chunk"));
  EXPECT_THAT(bad.status().message(), HasSubstr("memory.va_chunk"));
  bad = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {chunk: 0}\n", "bad.yaml",
      ".");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("off, auto or images per slice"));
  auto sliced = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\n"
      "memory: {chunk: 8, allocator: va, va_chunk: 64KiB}\n",
      "sliced.yaml", ".");
  ASSERT_TRUE(sliced.ok()) << sliced.status().ToString();
  EXPECT_EQ(sliced->memory.batch_chunk, 8);
  EXPECT_EQ(sliced->memory.settings.Bytes("va_chunk"), size_t{64} * 1024);
  // The searching planners' settings, and their ranges.
  auto dqn = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\n"
      "memory: {mode: dqn, planner: {limit: 1GiB, episodes: 40, seed: 7, embedding: 16, gamma: "
      "0.9, lr: 0.01, profile: k40-pcie3, cache: runs/p}}\n",
      "dqn.yaml", ".");
  ASSERT_TRUE(dqn.ok()) << dqn.status().ToString();
  EXPECT_EQ(dqn->memory.scheduler, "dqn");
  const PlannerSettings p = ReadPlannerSettings(dqn->memory.settings);
  EXPECT_EQ(p.limit, size_t{1} << 30);
  EXPECT_EQ(p.episodes, 40);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.embedding, 16);
  EXPECT_DOUBLE_EQ(p.gamma, 0.9);
  EXPECT_DOUBLE_EQ(p.lr, 0.01);
  EXPECT_EQ(p.profile, "k40-pcie3");
  EXPECT_EQ(p.cache, "runs/p");
  auto memonger = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\n"
      "memory: {mode: memonger, planner: {segment: 5}}\n",
      "memonger.yaml", ".");
  ASSERT_TRUE(memonger.ok()) << memonger.status().ToString();
  EXPECT_EQ(ReadPlannerSettings(memonger->memory.settings).segment, 5);
  auto lms = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\n"
      "memory: {mode: lms, lms_count: 3, lms_order: earliest}\n",
      "lms.yaml", ".");
  ASSERT_TRUE(lms.ok()) << lms.status().ToString();
  EXPECT_EQ(lms->memory.settings.Int("lms_count"), 3);
  EXPECT_EQ(lms->memory.settings.Text("lms_order"), "earliest");
  for (const auto& [section, message] : std::vector<std::pair<std::string, std::string>>{
           {"planner: {gamma: 2}", "bad.yaml:4: memory.planner.gamma"},
           {"planner: {profile: tpu9}", "memory.planner.profile"},
           {"planner: {episodes: 0}", "memory.planner.episodes"},
           {"planner: {speed: 3}", "unknown key 'memory.planner.speed'"},
           {"lms_order: biggest", "memory.lms_order"}}) {
    bad = ParseTrainConfig(
        "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {" + section + "}\n",
        "bad.yaml", ".");
    ASSERT_FALSE(bad.ok()) << section;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << section;
  }
  auto dymem = ParseTrainConfig(
      "model: {file: m.yaml}\ndata: {path: x}\nrun: {epochs: 1}\nmemory: {mode: dymem, release: "
      "eager, prefetch: ahead, offload_set: conv, barrier: true, min_offload: 64KiB}\n",
      "dymem.yaml", ".");
  ASSERT_TRUE(dymem.ok()) << dymem.status().ToString();
  EXPECT_EQ(dymem->memory.scheduler, "dymem");
  EXPECT_EQ(dymem->memory.allocator, "gtbm");
  EXPECT_FALSE(dymem->memory.compact);
  EXPECT_EQ(dymem->memory.settings.Text("release"), "eager");
  EXPECT_EQ(dymem->memory.settings.Text("prefetch"), "ahead");
  EXPECT_EQ(dymem->memory.settings.Text("offload_set"), "conv");
  EXPECT_TRUE(dymem->memory.settings.Bool("barrier"));
  EXPECT_EQ(dymem->memory.settings.Bytes("min_offload"), 64u << 10);
  TrainConfig missing = Config();
  missing.data.path = (dir_ / "nowhere").string();
  auto trainer = Trainer::Create(missing, Quiet());
  ASSERT_FALSE(trainer.ok());
  EXPECT_THAT(trainer.status().message(), HasSubstr((dir_ / "nowhere").string()));
}

// A small U-Net (models/unet.yaml) on the data of `dataset`, padded to 32x32.
std::string UNetConfig(const fs::path& dir, const std::string& dataset) {
  return "model: {file: " + fs::absolute("models/unet.yaml").string() +
         ", params: {classes: 11, size: 32, width: 4}}\n"
         "data: {dataset: " +
         dataset + ", path: " + (dir / "data").string() + ", masks: " + (dir / "masks").string() +
         ", batch: 32, augment: {pad: 2}, test_augment: {pad: 2}}\n"
         "solver: {type: adam, lr: 0.01}\n"
         "run: {epochs: 3, seed: 3, output: " +
         (dir / "run").string() + "}\n";
}

// Segmentation end to end: the masks are made from the images on first use
// (a class per pixel, background 0), the U-Net trains on them with its
// softmax per pixel, its loss falls, and the test accuracy, counted per
// pixel, beats calling every pixel the most frequent class.
TEST_F(TrainerTest, UNetTrainsOnPixelLabels) {
  auto config =
      ParseTrainConfig(UNetConfig(dir_, "fashion_mnist_segmentation"), "unet.yaml", dir_.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto trainer = Trainer::Create(*config, Quiet());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  const TrainReport& r = (*trainer)->report();
  EXPECT_EQ(r.steps, 30);
  EXPECT_TRUE(fs::exists(dir_ / "masks" / "train-masks-idx3-ubyte"));
  EXPECT_TRUE(fs::exists(dir_ / "masks" / "t10k-masks-idx3-ubyte"));
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front());

  auto test = OpenIdxSegmentation((dir_ / "data").string(), (dir_ / "masks").string(), Split::kTest,
                                  config->data.test_augment);
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  std::vector<int64_t> counts(11, 0);
  std::vector<float> labels((*test)->label_shape().sample_size());
  for (int64_t i = 0; i < (*test)->size(); ++i) {
    ASSERT_TRUE((*test)->GetPixelLabels(i, labels.data()).ok());
    for (float label : labels) counts[static_cast<int>(label)]++;
  }
  const double majority = static_cast<double>(*std::max_element(counts.begin(), counts.end())) /
                          static_cast<double>((*test)->size() * labels.size());
  ASSERT_TRUE(r.evaluated);
  EXPECT_GT(r.test_accuracy, majority);
}

// A classifier given per-pixel labels, or a U-Net given a class per image,
// is refused before training, saying what the other expects.
TEST_F(TrainerTest, PixelLabelsAndImageLabelsDoNotMix) {
  TrainConfig config = Config();
  config.data.dataset = "fashion_mnist_segmentation";
  config.data.masks = (dir_ / "masks").string();
  config.data.augment = Augmentation();
  auto trainer = Trainer::Create(config, Quiet());
  ASSERT_FALSE(trainer.ok());
  EXPECT_THAT(trainer.status().message(), HasSubstr("labels: pixels"));
  auto unet = ParseTrainConfig(UNetConfig(dir_, "fashion_mnist"), "unet.yaml", dir_.string());
  ASSERT_TRUE(unet.ok()) << unet.status().ToString();
  trainer = Trainer::Create(*unet, Quiet());
  ASSERT_FALSE(trainer.ok());
  EXPECT_THAT(trainer.status().message(), HasSubstr("labels: pixels"));
}

// A config of the text dataset: its keys read, a relative vocabulary found
// beside the config, and keys of the wrong kind of dataset refused by name.
TEST(TextConfigTest, KeysAreReadAndCheckedAgainstTheDataset) {
  const fs::path dir =
      fs::temp_directory_path() / ("spill_text_config_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "vocab.txt") << "abc";
  const std::string head = "model: {file: m.yaml}\nrun: {epochs: 1}\n";
  auto parse = [&](const std::string& data) {
    return ParseTrainConfig(head + "data: {" + data + "}\n", "text.yaml", dir.string());
  };
  auto text = parse(
      "dataset: text, path: corpus, batch: 4, sequence: 16, test_fraction: 0.1, streams: true, "
      "shuffle: false, vocabulary: vocab.txt");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->data.dataset, "text");
  EXPECT_EQ(text->data.sequence, 16);
  EXPECT_DOUBLE_EQ(text->data.test_fraction, 0.1);
  EXPECT_TRUE(text->data.streams);
  EXPECT_EQ(text->data.vocabulary, (dir / "vocab.txt").string());
  text = parse("dataset: text, path: corpus, sequence: 8");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_DOUBLE_EQ(text->data.test_fraction, 0.05);
  EXPECT_FALSE(text->data.streams);
  for (const auto& [data, message] : std::vector<std::pair<std::string, std::string>>{
           {"dataset: text, path: c, sequence: 8, streams: true",
            "text.yaml:3: data.shuffle: must be false with data.streams"},
           {"dataset: text, path: c, sequence: 8, streams: true, shuffle: true",
            "text.yaml:3: data.shuffle: must be false with data.streams"},
           {"dataset: text, path: c", "data.sequence: is required"},
           {"dataset: text, path: c, sequence: 0", "data.sequence: must be an integer in [1, "},
           {"dataset: text, path: c, sequence: 8, test_fraction: 0.6",
            "data.test_fraction: must be a number in (0, 0.5]"},
           {"dataset: text, path: c, sequence: 8, augment: {crop: 4}",
            "data.augment: dataset 'text' does not read it"},
           {"dataset: fashion_mnist, path: c, sequence: 8",
            "data.sequence: is read only by dataset 'text' (this config's dataset is "
            "'fashion_mnist')"},
           {"dataset: cifar10, path: c, streams: false", "data.streams: is read only by dataset"},
       }) {
    auto bad = parse(data);
    ASSERT_FALSE(bad.ok()) << data;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << data;
  }
  fs::remove_all(dir);
}

// A text config's data opens as the trainer opens it - both splits, a
// stream per row of the batch - and a model's `sequence` and `classes` come
// from it; a per-position classifier (a 1x1 convolution scoring every
// position, labels: pixels) trains on it with its loss falling.
TEST(TextConfigTest, TextDataFeedsTheModelAndTrains) {
  const fs::path dir =
      fs::temp_directory_path() / ("spill_text_train_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "corpus");
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "aaaab"[i % 5];  // mostly a: a learnable prior
  std::ofstream(dir / "corpus" / "part1") << text.substr(0, 2000);
  std::ofstream(dir / "corpus" / "part2") << text.substr(2000);
  std::ofstream(dir / "corpus" / "part2.dat") << "xyz";
  const std::string config_text = R"(
model:
  params: {sequence: 4, classes: 2}
  layers:
    - {name: data, type: input, shape: [1, 1, $sequence], labels: pixels}
    - {name: score, type: convolution, filters: $classes, kernel: 1}
    - {name: loss, type: softmax_loss}
data: {dataset: text, path: corpus, batch: 8, sequence: 16, streams: true, shuffle: false}
solver: {type: adam, lr: 0.05}
run: {steps: 20, seed: 3, output: )" +
                                  (dir / "run").string() + "}\n";
  auto config = ParseTrainConfig(config_text, "char.yaml", dir.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::unique_ptr<Dataset> train, test;
  Status opened = OpenDatasets(config->data, &train, &test);
  ASSERT_TRUE(opened.ok()) << opened.ToString();
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(train->num_classes(), 2);  // a and b; the .dat file's bytes are not read
  EXPECT_THAT(train->Describe(), HasSubstr("train split: 3800 bytes"));
  EXPECT_THAT(train->Describe(), HasSubstr("8 streams of"));
  EXPECT_THAT(test->Describe(), HasSubstr("test split: 200 bytes"));
  auto spec = LoadModel(*config, *train);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->params.at("sequence").as<int>(), 16);
  EXPECT_EQ(spec->params.at("classes").as<int>(), 2);

  TrainOptions options;
  options.progress = false;
  options.verbose = false;
  auto trainer = Trainer::Create(*config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  const TrainReport& r = (*trainer)->report();
  EXPECT_EQ(r.steps, 20);
  EXPECT_LT(r.losses.back(), r.losses.front());
  fs::remove_all(dir);
}

// A pairs config: its corpus keys read (files resolved beside the config),
// `path` not required, and keys of the wrong kind of dataset refused by name.
TEST(PairsConfigTest, KeysAreReadAndCheckedAgainstTheDataset) {
  const fs::path dir =
      fs::temp_directory_path() / ("spill_pairs_config_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "train.src") << "ab\n";
  std::ofstream(dir / "train.tgt") << "ba\n";
  const std::string head = "model: {file: m.yaml}\nrun: {epochs: 1}\n";
  auto parse = [&](const std::string& data) {
    return ParseTrainConfig(head + "data: {" + data + "}\n", "pairs.yaml", dir.string());
  };
  auto files = parse(
      "dataset: pairs, source: train.src, target: train.tgt, max_length: 12, skip_longer: true, "
      "test_fraction: 0.2");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->data.dataset, "pairs");
  EXPECT_EQ(files->data.pairs.source, (dir / "train.src").string());
  EXPECT_EQ(files->data.pairs.target, (dir / "train.tgt").string());
  EXPECT_EQ(files->data.pairs.max_length, 12);
  EXPECT_TRUE(files->data.pairs.skip_longer);
  EXPECT_DOUBLE_EQ(files->data.test_fraction, 0.2);
  EXPECT_TRUE(files->data.path.empty());
  auto synthetic = parse(
      "dataset: pairs, synthetic: add, synthetic_pairs: 100, synthetic_min_length: 3, "
      "synthetic_max_length: 7, synthetic_seed: 9, max_length: 9");
  ASSERT_TRUE(synthetic.ok()) << synthetic.status().ToString();
  EXPECT_EQ(synthetic->data.pairs.synthetic, "add");
  EXPECT_EQ(synthetic->data.pairs.synthetic_pairs, 100);
  EXPECT_EQ(synthetic->data.pairs.synthetic_min_length, 3);
  EXPECT_EQ(synthetic->data.pairs.synthetic_max_length, 7);
  EXPECT_EQ(synthetic->data.pairs.seed, 9u);
  auto catalogs = parse("dataset: pairs, catalogs: [a.mo, locale], max_length: 40");
  ASSERT_TRUE(catalogs.ok()) << catalogs.status().ToString();
  EXPECT_EQ(catalogs->data.pairs.catalogs, (std::vector<std::string>{"a.mo", "locale"}));
  const std::string reverse =
      "dataset: pairs, synthetic: reverse, synthetic_pairs: 10, synthetic_max_length: 4";
  for (const auto& [data, message] : std::vector<std::pair<std::string, std::string>>{
           {reverse, "data.max_length: is required"},
           {reverse + ", max_length: 6, sequence: 6",
            "data.sequence: is read only by dataset 'text' (this config's dataset is 'pairs')"},
           {reverse + ", max_length: 6, path: x", "data.path: dataset 'pairs' does not read it"},
           {reverse + ", max_length: 6, augment: {crop: 4}",
            "data.augment: dataset 'pairs' does not read it"},
           {"dataset: fashion_mnist, path: c, source: a.txt",
            "data.source: is read only by dataset 'pairs' (this config's dataset is "
            "'fashion_mnist')"},
           {"dataset: text, path: c, sequence: 8, max_length: 8",
            "data.max_length: is read only by dataset 'pairs'"},
           {"dataset: cifar10, path: c, vocabulary: v",
            "data.vocabulary: is read only by datasets 'text' and 'pairs'"},
           {"dataset: pairs, max_length: 6", "needs exactly one corpus"},
           {"dataset: pairs, source: a, max_length: 6", "data.target: is required with"},
           {reverse + ", source: a, target: b, max_length: 6", "needs exactly one corpus"},
           {"dataset: pairs, source: a, target: b, synthetic_pairs: 3, max_length: 6",
            "data.synthetic_pairs: is read only with data.synthetic"},
           {"dataset: pairs, synthetic: rotate, synthetic_pairs: 3, max_length: 6",
            "data.synthetic: must be one of: reverse, add"},
           {"dataset: pairs, catalogs: {a: b}, max_length: 6", "data.catalogs: must be a list"},
       }) {
    auto bad = parse(data);
    ASSERT_FALSE(bad.ok()) << data;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << data;
  }
  fs::remove_all(dir);
}

// A small encoder-decoder over packed pairs, the shape of models/seq2seq.yaml.
std::string PairsModel(const std::string& loss =
                           "{name: loss, type: softmax_loss, "
                           "ignore_label: -1}") {
  return R"(
model:
  params: {classes: 4, sequence: 4}
  layers:
    - {name: data, type: input, shape: [2, 1, $sequence], labels: pixels}
    - {name: source, type: slice, inputs: [data], begin: 0, end: 1}
    - {name: target_input, type: slice, inputs: [data], begin: 1, end: 2}
    - {name: source_embed, type: embedding, inputs: [source], vocabulary: $classes, size: 8}
    - {name: encoder, type: lstm, inputs: [source_embed], hidden: 16, final: true}
    - {name: target_embed, type: embedding, inputs: [target_input], vocabulary: $classes, size: 8}
    - {name: decoder, type: lstm, inputs: [target_embed, encoder:1], hidden: 16, initial: input}
    - {name: scores, type: convolution, filters: $classes, kernel: 1}
    - )" +
         loss + "\n";
}

class PairsTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spill_pairs_train_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  StatusOr<TrainConfig> Parse(const std::string& data, const std::string& loss) {
    const std::string text = PairsModel(loss) + "data: {dataset: pairs, batch: 8, " + data +
                             "}\nsolver: {type: adam, lr: 0.01}\nrun: {steps: 6, seed: 3, "
                             "output: " +
                             (dir_ / "run").string() + "}\n";
    return ParseTrainConfig(text, "pairs.yaml", dir_.string());
  }

  // Trains the config's few steps, with finite losses, and evaluates.
  void TrainsAndEvaluates(const std::string& data) {
    auto config = Parse(data, "{name: loss, type: softmax_loss, ignore_label: -1}");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    TrainOptions options;
    options.progress = false;
    options.verbose = false;
    auto trainer = Trainer::Create(*config, options);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    ASSERT_TRUE((*trainer)->Run().ok());
    const TrainReport& r = (*trainer)->report();
    EXPECT_EQ(r.steps, 6);
    for (double loss : r.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
    EXPECT_TRUE(r.evaluated);
    EXPECT_TRUE(std::isfinite(r.test_loss));
    EXPECT_GE(r.test_accuracy, 0.0);
    EXPECT_LE(r.test_accuracy, 1.0);
  }

  fs::path dir_;
};

// The packed examples and their labels, as the trainer opens them: the
// model's `sequence` and `classes` come from max_length and the vocabulary.
TEST_F(PairsTrainTest, SyntheticReverseOpensPacksAndTrains) {
  const std::string data =
      "synthetic: reverse, synthetic_pairs: 200, synthetic_max_length: 5, max_length: 6, "
      "test_fraction: 0.1";
  auto config = Parse(data, "{name: loss, type: softmax_loss, ignore_label: -1}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::unique_ptr<Dataset> train, test;
  ASSERT_TRUE(OpenDatasets(config->data, &train, &test).ok());
  EXPECT_EQ(train->size(), 180);
  EXPECT_EQ(test->size(), 20);
  EXPECT_EQ(train->example_shape(), Shape(1, 2, 1, 6));
  EXPECT_EQ(train->label_shape(), Shape(1, 1, 1, 6));
  EXPECT_EQ(train->num_classes(), 3 + 26);
  EXPECT_THAT(train->Describe(), HasSubstr("synthetic reverse"));
  std::vector<float> image(12), labels(6);
  auto first = train->Get(0, 0, image.data());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(train->GetPixelLabels(0, labels.data()).ok());
  EXPECT_EQ(*first, static_cast<int>(labels[0]));
  EXPECT_EQ(image[6], kBosId);
  int length = 0;  // the source's tokens
  while (length < 6 && image[length] != kPadId) ++length;
  for (int t = 0; t < 6; ++t) {
    if (t < length) {  // reversed: label t is source position length-1-t
      EXPECT_EQ(labels[t], image[length - 1 - t]) << t;
      EXPECT_EQ(image[6 + t + 1], labels[t]) << t;  // the decoder input: <bos>, the target
    } else {
      EXPECT_EQ(labels[t], t == length ? kEosId : kPairPaddingLabel) << t;
    }
  }
  auto spec = LoadModel(*config, *train);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->params.at("sequence").as<int>(), 6);
  EXPECT_EQ(spec->params.at("classes").as<int>(), 29);
  TrainsAndEvaluates(data);
}

TEST_F(PairsTrainTest, LineAlignedFilesTrain) {
  std::ofstream source(dir_ / "train.src"), target(dir_ / "train.tgt");
  for (int i = 0; i < 40; ++i) {
    const std::string word = std::string("abcd").substr(i % 4) + "x";
    source << word << "\n";
    target << std::string(word.rbegin(), word.rend()) << "\n";
  }
  source.close();
  target.close();
  TrainsAndEvaluates("source: train.src, target: train.tgt, max_length: 6, test_fraction: 0.2");
}

// data.buckets: each batch cut to its bucket's bound, the network and its
// memory plan following; eval cuts the test batches as train's evaluation
// does, and reproduces its figures.
TEST_F(PairsTrainTest, BucketsCutEachBatchToItsLengthAndEvalAgrees) {
  const std::string data =
      "synthetic: reverse, synthetic_pairs: 300, synthetic_max_length: 10, max_length: 12, "
      "test_fraction: 0.1, buckets: true";
  auto config = Parse(data, "{name: loss, type: softmax_loss, ignore_label: -1}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  config->run.steps = 30;
  // One algorithm: train's evaluation and eval's compute alike, and a plan
  // is made only for a new length (a timed choice could differ per batch).
  config->memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  TrainOptions options;
  options.progress = false;
  options.verbose = false;
  auto trainer = Trainer::Create(*config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  ASSERT_TRUE((*trainer)->Run().ok());
  const TrainReport& r = (*trainer)->report();
  EXPECT_EQ(r.steps, 30);
  for (double loss : r.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  // Buckets [3, 6, 9, 12]: 30 batches visit them all, and only the first
  // batch of each length shorter than the network's 12 plans anew.
  EXPECT_EQ(r.lengths_planned, 4);
  EXPECT_EQ(r.replanned_iterations, 3);
  ASSERT_TRUE(r.evaluated);
  // The network is built at max_length; a plan of the epoch's batches.
  EXPECT_EQ((*trainer)->net().batch(), 8);
  auto inference = Inference::Create(*config, (*trainer)->checkpoint_path());
  ASSERT_TRUE(inference.ok()) << inference.status().ToString();
  auto eval = (*inference)->Evaluate();
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  EXPECT_EQ(eval->accuracy, r.test_accuracy);
  EXPECT_EQ(eval->loss, r.test_loss);
  // A trace keeps the dataset's batches at max_length and the length each
  // step was cut to (crosscheck_torch cuts them again).
  options.trace_dir = (dir_ / "trace").string();
  config->run.output = (dir_ / "traced").string();
  config->run.steps = 5;
  auto traced = Trainer::Create(*config, options);
  ASSERT_TRUE(traced.ok()) << traced.status().ToString();
  ASSERT_TRUE((*traced)->Run().ok());
  auto trace = ReadNpz((dir_ / "trace" / "trace.npz").string());
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->at("images").shape, (std::vector<int64_t>{5, 8, 2, 1, 12}));
  EXPECT_EQ(trace->at("labels").shape, (std::vector<int64_t>{5, 8, 1, 1, 12}));
  ASSERT_EQ(trace->at("lengths").shape, (std::vector<int64_t>{5}));
  for (int step = 0; step < 5; ++step) {
    const float length = trace->at("lengths").floats()[step];
    EXPECT_TRUE(length == 3 || length == 6 || length == 9 || length == 12) << length;
    // Past its length every label of the step is padding.
    for (int n = 0; n < 8; ++n) {
      for (int t = static_cast<int>(length); t < 12; ++t) {
        EXPECT_EQ(trace->at("labels").floats()[(step * 8 + n) * 12 + t], kPairPaddingLabel);
      }
    }
  }
}

TEST_F(PairsTrainTest, ALossThatScoresThePaddingIsRefused) {
  auto config = Parse(
      "synthetic: reverse, synthetic_pairs: 50, synthetic_max_length: 3, "
      "max_length: 4",
      "{name: loss, type: softmax_loss}");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  TrainOptions options;
  options.progress = false;
  options.verbose = false;
  auto trainer = Trainer::Create(*config, options);
  ASSERT_FALSE(trainer.ok());
  EXPECT_THAT(trainer.status().message(), HasSubstr("give softmax_loss ignore_label: -1"));
  EXPECT_THAT(trainer.status().message(), HasSubstr("loss layer 'loss'"));
}

TEST(ConfigsTest, EveryShippedConfigParsesAndItsModelBuilds) {
  for (const auto& entry : fs::directory_iterator("configs")) {
    auto config = LoadTrainConfig(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    ASSERT_FALSE(config->model_file.empty()) << entry.path();
    auto spec = LoadNetFile(config->model_file, config->model_params);
    ASSERT_TRUE(spec.ok()) << entry.path() << ": " << spec.status().ToString();
    auto net = Net::Build(*spec, {2, DeviceType::kCpu});
    EXPECT_TRUE(net.ok()) << entry.path() << ": " << net.status().ToString();
  }
  EXPECT_TRUE(DefaultTrainConfig().model_file.empty());
}

TEST(SolverTest, SgdNesterovAndAdamMatchTheirFormulas) {
  SolverKernels& k = SolverKernelsFor(DeviceType::kCpu);
  CpuDevice device;
  float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, v[2] = {0.1f, 0.0f};
  k.Sgd(device, 2, w, g, v, 0.1f, 0.9f, 0.01f, /*nesterov=*/true);
  // d = g + wd*w; v = 0.9 v + d; w -= lr (d + 0.9 v)
  const float d0 = 0.5f + 0.01f, v0 = 0.9f * 0.1f + d0;
  EXPECT_FLOAT_EQ(v[0], v0);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.1f * (d0 + 0.9f * v0));
  float a[1] = {1.0f}, ga[1] = {0.5f}, m[1] = {0}, s[1] = {0};
  k.Adam(device, 1, a, ga, m, s, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);
  // First Adam step moves by lr * sign(g) (bias corrected).
  EXPECT_NEAR(a[0], 1.0f - 0.01f, 1e-6);
}

TEST(LrScheduleTest, ShapesOfTheSchedules) {
  LrSchedule s;
  s.lr = 1.0;
  s.type = "step";
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(s.At(9), 1.0);
  EXPECT_DOUBLE_EQ(s.At(10), 0.5);
  s.type = "multistep";
  s.milestones = {5, 8};
  EXPECT_DOUBLE_EQ(s.At(4), 1.0);
  EXPECT_DOUBLE_EQ(s.At(5), 0.5);
  EXPECT_DOUBLE_EQ(s.At(8), 0.25);
  s.type = "cosine";
  s.total_steps = 100;
  EXPECT_DOUBLE_EQ(s.At(0), 1.0);
  EXPECT_NEAR(s.At(50), 0.5, 1e-12);
  EXPECT_NEAR(s.At(100), 0.0, 1e-12);
  s.warmup = 10;
  s.warmup_factor = 0.1;
  EXPECT_NEAR(s.At(0), 0.1, 1e-12);
  EXPECT_NEAR(s.At(5), 0.55, 1e-12);
  EXPECT_TRUE(s.Validate().ok());
  s.total_steps = 5;
  EXPECT_FALSE(s.Validate().ok());
}

TEST(NpzTest, RoundTripAndZip64) {
  const std::string path = (fs::temp_directory_path() / "spill_npz_test.npz").string();
  NpzArchive archive;
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  archive["a/weight"] = NpyArray::Floats({2, 3}, values.data());
  archive["meta/step"] = NpyArray::Int64(42);
  archive["meta/config"] = NpyArray::Text("model: {}\n");
  // Enough entries to need zip64's entry count.
  for (int i = 0; i < 70000; ++i) archive["many/" + std::to_string(i)] = NpyArray::Int64(i);
  ASSERT_TRUE(WriteNpzAtomically(path, archive).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto read = ReadNpz(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->size(), archive.size());
  EXPECT_EQ(read->at("a/weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::vector<float>(read->at("a/weight").floats(), read->at("a/weight").floats() + 6),
            values);
  EXPECT_EQ(read->at("meta/step").int64(), 42);
  EXPECT_EQ(read->at("many/69999").int64(), 69999);
  EXPECT_EQ(read->at("meta/config").text(), "model: {}\n");
  // A truncated file is an error naming the file, not a crash.
  fs::resize_file(path, fs::file_size(path) / 2);
  auto broken = ReadNpz(path);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr(path));
  fs::remove(path);
}

}  // namespace
}  // namespace spill
