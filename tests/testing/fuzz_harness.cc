#include "tests/testing/fuzz_harness.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "data/loader.h"
#include "framework/base/units.h"
#include "framework/device/device_registry.h"
#include "framework/graph/initializer.h"
#include "framework/io/checkpoint.h"
#include "memory/planning/planner.h"
#include "tools/common/checks.h"
#include "tools/trainer/train_config.h"

namespace spill {
namespace fuzz {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDefaultSeed = 0x5eed2026;

// Ends the process when the armed case runs past kHangSeconds.
class Watchdog {
 public:
  static Watchdog& Get() {
    static Watchdog* watchdog = new Watchdog();  // never destroyed: the thread outlives tests
    return *watchdog;
  }
  void Arm(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = name;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(kHangSeconds));
    armed_ = true;
  }
  void Disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }

 private:
  Watchdog() : thread_([this] { Watch(); }) { thread_.detach(); }
  void Watch() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::lock_guard<std::mutex> lock(mutex_);
      if (armed_ && Clock::now() > deadline_) {
        std::fprintf(stderr, "fuzz: case '%s' ran past %.0f s (seed %llu): a hang\n", name_.c_str(),
                     kHangSeconds, static_cast<unsigned long long>(Seed()));
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }
  std::mutex mutex_;
  std::string name_;
  Clock::time_point deadline_;
  bool armed_ = false;
  std::thread thread_;
};

// A dataset that holds nothing but shapes and a class count, for loading a
// config's model the way the trainer does.
class ShapeOnlyDataset : public Dataset {
 public:
  ShapeOnlyDataset(Shape shape, Shape labels, int classes)
      : shape_(shape), labels_(labels), classes_(classes) {}
  int64_t size() const override { return 1; }
  int num_classes() const override { return classes_; }
  Shape example_shape() const override { return shape_; }
  Shape label_shape() const override { return labels_; }
  std::string Describe() const override { return "shape-only dataset"; }
  StatusOr<int> Get(int64_t, uint64_t, float*) const override {
    return Internal("shape-only dataset");
  }

 private:
  Shape shape_, labels_;
  int classes_;
};

// The shapes of a config's kind of data: images of 10 classes, windows of
// data.sequence bytes (256 symbols) labeled per position, or pairs packed
// in two channels of data.max_length (3 reserved ids + 256 symbols).
ShapeOnlyDataset DataOfKind(const DataConfig& d) {
  if (d.dataset == "text") {
    const Shape window(1, 1, 1, d.sequence);
    return ShapeOnlyDataset(window, window, 256);
  }
  if (d.dataset == "pairs") {
    const int64_t length = d.pairs.max_length;
    return ShapeOnlyDataset(Shape(1, 2, 1, length), Shape(1, 1, 1, length), 3 + 256);
  }
  const bool color = d.dataset == "cifar10" || d.dataset == "image_folder";
  const int side = d.augment.crop > 0 ? d.augment.crop : color ? 32 : 28;
  return ShapeOnlyDataset(Shape(1, color ? 3 : 1, side, side), Shape(1, 1, 1, 1), 10);
}

void PutBigEndian(std::vector<uint8_t>* bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes->push_back((value >> shift) & 0xff);
}

// Reads every example of a split through a loader with two workers, and one
// index past the end directly.
Status ReadAll(const Dataset& data) {
  std::vector<float> image(data.example_shape().sample_size());
  if (data.Get(data.size(), 0, image.data()).ok()) return Internal("read past the end");
  LoaderOptions options;
  options.batch = std::min<int64_t>(2, data.size());
  options.workers = 2;
  options.drop_last = false;
  Loader loader(data, options);
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    SPILL_RETURN_IF_ERROR(loader.Next().status());
  }
  return Status::Ok();
}

}  // namespace

uint64_t Seed() {
  const char* text = std::getenv("SPILL_FUZZ_SEED");
  if (text == nullptr) return kDefaultSeed;
  auto seed = ParseInt64(text);
  return seed.ok() ? static_cast<uint64_t>(*seed) : kDefaultSeed;
}

int Scale() {
  const char* text = std::getenv("SPILL_FUZZ_SCALE");
  auto scale = ParseInt64(text == nullptr ? "1" : text);
  return scale.ok() && *scale >= 1 && *scale <= 1000 ? static_cast<int>(*scale) : 1;
}

Status RunCase(const std::string& name, const std::function<Status()>& body, Tally* tally) {
  Watchdog::Get().Arm(name);
  const auto start = Clock::now();
  Status status;
  try {
    status = body();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": an exception escaped: " << e.what();
    status = Internal(e.what());
  } catch (...) {
    ADD_FAILURE() << name << ": an unknown exception escaped";
    status = Internal("unknown exception");
  }
  Watchdog::Get().Disarm();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (seconds > tally->slowest_seconds) {
    tally->slowest_seconds = seconds;
    tally->slowest = name;
  }
  tally->cases++;
  (status.ok() ? tally->accepted : tally->rejected)++;
  if (std::getenv("SPILL_FUZZ_VERBOSE") != nullptr) {
    std::printf("%s: %s\n", name.c_str(), status.ok() ? "accepted" : status.message().c_str());
  }
  return status;
}

std::string FreshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("spill_fuzz_" + name);
  std::error_code error;
  fs::remove_all(dir, error);
  fs::create_directories(dir);
  return dir.string();
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  const std::string text = ReadText(path);
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::vector<uint8_t> Gzip(const std::vector<uint8_t>& bytes) {
  z_stream stream = {};
  deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::vector<uint8_t> out(deflateBound(&stream, bytes.size()) + 64);
  stream.next_in = const_cast<Bytef*>(bytes.data());
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

Status NetworkPipeline(const std::string& path, const std::string& mode) {
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadNetFile(path));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net, Net::Build(spec, {2, DeviceType::kCpu}));
  MemoryOptions options;
  SPILL_RETURN_IF_ERROR(ApplyMemoryMode(mode, &options));
  options.device_budget = kUnlimitedBudget;
  return Plan(net->view(), options).status();
}

Status ConfigPipeline(const std::string& text, const std::string& label) {
  SPILL_ASSIGN_OR_RETURN(TrainConfig c, ParseTrainConfig(text, label, "configs"));
  const ShapeOnlyDataset data = DataOfKind(c.data);
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadModel(c, data));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Net> net,
                         Net::Build(spec, {c.data.batch, DeviceType::kCpu}));
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*net, c.memory.workspace));
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Solver> solver, Solver::Create(c.solver));
  solver->AddState(*net);
  return Plan(net->view(), c.memory).status();
}

Status IdxPipeline(const std::string& dir) {
  for (Split split : {Split::kTrain, Split::kTest}) {
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> data, OpenIdx(dir, split, Augmentation()));
    SPILL_RETURN_IF_ERROR(ReadAll(*data));
  }
  return Status::Ok();
}

Status CifarPipeline(const std::string& dir) {
  for (Split split : {Split::kTrain, Split::kTest}) {
    SPILL_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> data, OpenCifar10(dir, split, Augmentation()));
    SPILL_RETURN_IF_ERROR(ReadAll(*data));
  }
  return Status::Ok();
}

std::vector<uint8_t> IdxImages(uint32_t count, uint32_t rows, uint32_t cols, uint32_t magic) {
  std::vector<uint8_t> bytes;
  for (uint32_t value : {magic, count, rows, cols}) PutBigEndian(&bytes, value);
  for (uint32_t i = 0; i < count * rows * cols; ++i) bytes.push_back((i * 7) % 256);
  return bytes;
}

std::vector<uint8_t> IdxLabels(uint32_t count, uint32_t magic) {
  std::vector<uint8_t> bytes;
  PutBigEndian(&bytes, magic);
  PutBigEndian(&bytes, count);
  for (uint32_t i = 0; i < count; ++i) bytes.push_back(i % 10);
  return bytes;
}

std::vector<uint8_t> CifarRecords(int records, int salt) {
  std::vector<uint8_t> bytes;
  for (int r = 0; r < records; ++r) {
    bytes.push_back((r + salt) % 10);
    for (int i = 0; i < 3072; ++i) bytes.push_back((i + r + salt) % 256);
  }
  return bytes;
}

void WriteIdxSet(const std::string& dir) {
  WriteBytes(dir + "/train-images-idx3-ubyte", IdxImages(5, 4, 5));
  WriteBytes(dir + "/train-labels-idx1-ubyte", IdxLabels(5));
  WriteBytes(dir + "/t10k-images-idx3-ubyte.gz", Gzip(IdxImages(3, 4, 5)));
  WriteBytes(dir + "/t10k-labels-idx1-ubyte.gz", Gzip(IdxLabels(3)));
}

void WriteCifarSet(const std::string& dir) {
  for (int b = 1; b <= 5; ++b) {
    WriteBytes(dir + "/data_batch_" + std::to_string(b) + ".bin", CifarRecords(2, b));
  }
  WriteBytes(dir + "/test_batch.bin", CifarRecords(3, 0));
}

std::unique_ptr<CheckpointBench> CheckpointBench::Create() {
  auto bench = std::make_unique<CheckpointBench>();
  auto spec = ParseNetString(R"(
layers:
  - {name: data, type: input, shape: [1, 6, 6]}
  - {name: conv, type: convolution, filters: 3, kernel: 3}
  - {name: bn, type: batch_norm}
  - {name: relu, type: relu}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: loss, type: softmax_loss}
)",
                             "bench.yaml");
  SPILL_CHECK(spec.ok()) << spec.status().ToString();
  auto device = CreateDevice("cpu", {});
  SPILL_CHECK(device.ok()) << device.status().ToString();
  bench->device_ = std::move(device).value();
  auto net = Net::Build(*spec, {2, DeviceType::kCpu});
  SPILL_CHECK(net.ok()) << net.status().ToString();
  bench->net_ = std::move(net).value();
  SolverConfig sgd;
  sgd.momentum = 0.9;
  bench->solver_ = std::move(Solver::Create(sgd)).value();
  bench->solver_->AddState(*bench->net_);
  MemoryOptions memory;
  memory.device_budget = 16 * kMiB;
  auto runtime = MemoryRuntime::Create(bench->net_->view(), memory, bench->device_.get());
  SPILL_CHECK(runtime.ok()) << runtime.status().ToString();
  bench->runtime_ = std::move(runtime).value();
  SPILL_CHECK(InitializeParameters(*bench->net_, *bench->runtime_, 1).ok());
  SPILL_CHECK(bench->solver_->ResetState(*bench->net_, *bench->runtime_).ok());
  return bench;
}

Status CheckpointBench::Save(const std::string& path) {
  return SaveCheckpoint(path, *net_, *runtime_, *device_, solver_.get(), {7, 3, 1, 7}, "{}");
}

Status CheckpointBench::Load(const std::string& path) {
  return LoadCheckpoint(path, *net_, *runtime_, *device_, solver_.get()).status();
}

}  // namespace fuzz
}  // namespace spill
