#include "tools/trainer/trainer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/pair_dataset.h"
#include "framework/base/checked_math.h"
#include "framework/base/clock.h"
#include "framework/base/files.h"
#include "framework/base/random.h"
#include "framework/device/cpu_device.h"
#include "framework/device/device_registry.h"
#include "framework/graph/initializer.h"
#include "framework/io/npz.h"
#include "layers/cpu/conv_timer.h"
#include "layers/embedding_layer.h"
#include "memory/planning/feasibility.h"
#include "memory/planning/planner.h"
#include "tools/common/checks.h"
#include "tools/common/net_options.h"
#include "tools/trainer/inference.h"
#include "tools/trainer/model_source.h"
#include "tools/trainer/rank_agreement.h"

namespace spill {
namespace {

std::atomic<bool> stop_requested{false};

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

constexpr char kLockFile[] = "train.lock";
constexpr size_t kNamesShown = 8;  // names printed per list of --init

// "a, b, c and 5 more".
std::string NameList(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    text += (i ? ", " : "") + names[i];
  }
  if (names.size() > kNamesShown) {
    text += " and " + std::to_string(names.size() - kNamesShown) + " more";
  }
  return text;
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Whether some layer may leave an input out of an iteration (Layer::DroppedInput).
bool HasStochasticDepth(const Net& net) {
  for (int id = 0; id < net.num_layers(); ++id) {
    if (net.layer(id).drop_probability() > 0) return true;
  }
  return false;
}

}  // namespace

void Trainer::RequestStop() { stop_requested = true; }
void Trainer::ClearStop() { stop_requested = false; }

std::string TrainReport::ToJson(const MemoryOptions& memory) const {
  // Non-finite numbers (a diverged loss) come out as null.
  Json report = {{"train_loss", train_loss},
                 {"train_accuracy", train_accuracy},
                 {"test_loss", evaluated ? Json(test_loss) : Json(nullptr)},
                 {"test_accuracy", evaluated ? Json(test_accuracy) : Json(nullptr)},
                 {"images_per_second", images_per_second},
                 {"peak_device_memory_bytes", peak_device_bytes},
                 {"persistent_device_memory_bytes", persistent_device_bytes},
                 {"streamed_steps", streamed_steps},
                 {"dropped_branches", dropped_branches},
                 {"skipped_computations", skipped_computations},
                 {"skipped_steps", skipped_steps},
                 {"lengths_planned", lengths_planned},
                 {"replanned_iterations", replanned_iterations},
                 {"steps", steps},
                 {"epochs", epochs},
                 {"seconds", seconds},
                 {"memory_mode", memory.mode},
                 {"device_budget_bytes", memory.device_budget},
                 {"interrupted", interrupted}};
  if (ranks > 1) {
    const ReducerStats& c = communication;
    const double per = 1.0 / std::max<int64_t>(c.iterations, 1);
    report["ranks"] = ranks;
    report["communication"] = {{"buckets", c.buckets},
                               {"allreduce_seconds_per_step", c.comm_seconds * per},
                               {"overlapped_seconds_per_step", c.overlap_seconds * per},
                               {"wait_seconds_per_step", c.wait_seconds * per},
                               {"backward_seconds_per_step", c.backward_seconds * per},
                               {"floats_sent_per_step", static_cast<double>(c.floats_sent) * per},
                               {"reduction_host_bytes", c.peak_host_bytes}};
  }
  return report.dump(2) + "\n";
}

Trainer::Trainer(const TrainConfig& config, const TrainOptions& options)
    : config_(config), options_(options), progress_(options.progress) {}

Trainer::~Trainer() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::string Trainer::checkpoint_path() const {
  return (std::filesystem::path(config_.run.output) / "checkpoint.npz").string();
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainConfig& config,
                                                   const TrainOptions& options) {
  std::unique_ptr<Trainer> trainer(new Trainer(config, options));
  SPILL_RETURN_IF_ERROR(trainer->Setup());
  return trainer;
}

Status Trainer::OpenData() { return OpenDatasets(config_.data, &train_data_, &test_data_); }

Status Trainer::ClaimOutput() {
  namespace fs = std::filesystem;
  const std::string& output = config_.run.output;
  SPILL_RETURN_IF_ERROR(CreateOutputFolder(output, "output folder (run.output)"));
  const std::string lock = (fs::path(output) / kLockFile).string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    return IoError("cannot create the lock file '" + lock + "': " + std::strerror(errno));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t got = ::pread(lock_fd_, pid, sizeof(pid) - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    const std::string holder = got > 0 ? " (process " + std::string(pid, got) + ")" : "";
    return InvalidArgument("output folder '" + output + "' is in use by another run" + holder +
                           ", which holds " + lock +
                           "; wait for it to finish or give this run another --output");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    return IoError("cannot write the lock file '" + lock + "': " + std::strerror(errno));
  }
  std::error_code error;
  if (options_.resume.empty() && !options_.overwrite && fs::exists(checkpoint_path(), error)) {
    return InvalidArgument("output folder '" + output + "' already holds a checkpoint (" +
                           checkpoint_path() +
                           "); continue that run with --resume or start over with --overwrite");
  }
  return Status::Ok();
}

// What needs only the config and the data's size, checked before anything
// that grows with the batch (building, calibrating and planning the network).
Status Trainer::CheckDataSize() const {
  if (train_data_->size() >= config_.data.batch) return Status::Ok();
  return InvalidArgument("the training set (" + std::to_string(train_data_->size()) +
                         " examples) is smaller than one batch of " +
                         std::to_string(config_.data.batch));
}

Status Trainer::CheckData() const {
  // Pairs are padded to max_length: the padding's label must be left out of
  // the loss, or the network learns to predict padding.
  if (config_.data.dataset == "pairs" && !net_->loss_layers().empty() &&
      net_->layer(net_->loss_layers()[0]).ignored_label() != kPairPaddingLabel) {
    return InvalidArgument("model '" + net_->name() + "': dataset 'pairs' labels padding " +
                           std::to_string(kPairPaddingLabel) + ", which loss layer '" +
                           net_->layer(net_->loss_layers()[0]).name() +
                           "' does not leave out (give softmax_loss ignore_label: " +
                           std::to_string(kPairPaddingLabel) + ")");
  }
  const Shape want = net_->input_shape(), have = train_data_->example_shape();
  if (want.c() != have.c() || want.h() != have.h() || want.w() != have.w()) {
    return InvalidArgument("model '" + net_->name() + "' takes " + std::to_string(want.c()) + "x" +
                           std::to_string(want.h()) + "x" + std::to_string(want.w()) +
                           " images but the data gives " + std::to_string(have.c()) + "x" +
                           std::to_string(have.h()) + "x" + std::to_string(have.w()) +
                           " (set model.params or data.augment.crop)");
  }
  for (const Dataset* data : {train_data_.get(), test_data_.get()}) {
    if (data == nullptr) continue;
    if (data->example_shape() != have) {
      return InvalidArgument("the test split gives " + data->example_shape().ToString() +
                             " images but the training split " + have.ToString() +
                             " (set data.test_augment)");
    }
    if (net_->label_shape().sample_size() != data->label_shape().sample_size()) {
      return InvalidArgument("model '" + net_->name() + "' takes labels of " +
                             net_->label_shape().ToString() + " per batch but " + data->Describe() +
                             " labels " + data->label_shape().ToString() +
                             " per example (an input layer with labels: pixels takes a class " +
                             "per pixel, of a segmentation dataset)");
    }
    if (net_->num_classes() < data->num_classes()) {
      return InvalidArgument("model '" + net_->name() + "' scores " +
                             std::to_string(net_->num_classes()) + " classes but " +
                             data->Describe() + " has " + std::to_string(data->num_classes()) +
                             " (set model.params.classes)");
    }
    // A text's ids are its symbols, a pair corpus's its reserved ids and
    // symbols: every one must have a row in the tables that embed them (an id
    // past the table would embed as zeros). Embeddings reading a packed pair
    // through slices of the input count.
    const int64_t vocabulary = InputVocabulary(*net_);
    const bool ids = config_.data.dataset == "text" || config_.data.dataset == "pairs";
    if (ids && vocabulary > 0 && vocabulary < data->num_classes()) {
      return InvalidArgument("model '" + net_->name() + "' embeds " + std::to_string(vocabulary) +
                             " symbols but " + data->Describe() + " has " +
                             std::to_string(data->num_classes()) +
                             " (set the embedding's vocabulary, or model.params.classes)");
    }
  }
  return Status::Ok();
}

// Turns the schedule's epochs into steps, without overflow.
Status Trainer::StartSchedule() {
  const std::string where = config_.file + ": ";
  if (config_.run.steps > 0) {
    total_steps_ = config_.run.steps;
  } else if (!CheckedMul(config_.run.epochs, steps_per_epoch_, &total_steps_)) {
    return InvalidArgument(where + "run.epochs: too many steps");
  }
  schedule_ = config_.schedule.schedule;
  const int64_t unit = config_.schedule.unit == "epoch" ? steps_per_epoch_ : 1;
  bool fits = CheckedMul(schedule_.step_size, unit, &schedule_.step_size) &&
              CheckedMul(schedule_.warmup, unit, &schedule_.warmup);
  for (auto& m : schedule_.milestones) fits = fits && CheckedMul(m, unit, &m);
  if (!fits) return InvalidArgument(where + "solver.schedule: lengths too large in steps");
  schedule_.total_steps = total_steps_;
  return schedule_.Validate().WithContext(where + "solver.schedule");
}

TensorStore& Trainer::solver_store() {
  return parallel_ ? parallel_->solver_store() : static_cast<TensorStore&>(*runtime_);
}

Status Trainer::Setup() {
  leader_ = Communicator::World().rank() == 0;
  report_.ranks = Communicator::World().size();
  if (leader_) SPILL_RETURN_IF_ERROR(ClaimOutput());
  DeviceConfig device_config;
  device_config.ordinal = config_.run.gpu;
  device_config.link_bytes_per_second = options_.link_gbps * 1e9;
  device_config.tensor_math = config_.run.precision == Precision::kTf32;
  SPILL_ASSIGN_OR_RETURN(device_, CreateDevice(config_.run.device, device_config));
  SPILL_RETURN_IF_ERROR(CheckPrecision(config_.run.precision, device_->type(), "run.precision"));
  SPILL_RETURN_IF_ERROR(CheckLossScaling());
  ApplyPrecision(config_.run.precision, &config_.memory);
  cpu::SetConvTiming(
      {config_.timing.measure ? cpu::ConvTimingMode::kMeasure : cpu::ConvTimingMode::kModel,
       config_.timing.cache});
  SPILL_RETURN_IF_ERROR(OpenData());
  SPILL_RETURN_IF_ERROR(CheckDataSize());
  SPILL_ASSIGN_OR_RETURN(NetSpec spec, LoadModel(config_, *train_data_));
  SPILL_ASSIGN_OR_RETURN(const int64_t rank_batch, DataParallel::RankBatch(config_));
  SPILL_RETURN_IF_ERROR(CheckMicroBatches(rank_batch));
  const NetOptions net_options =
      NetOptionsFor(rank_batch / config_.run.micro_batches, device_->type(),
                    config_.memory.workspace, config_.run.precision);
  SPILL_ASSIGN_OR_RETURN(solver_, Solver::Create(config_.solver));
  SPILL_RETURN_IF_ERROR(BuildNet(spec, net_options));
  if (Communicator::World().size() > 1) {  // before any collective
    SPILL_ASSIGN_OR_RETURN(
        auto agreement, RankAgreement(config_, options_.max_steps, !options_.resume.empty(), *net_,
                                      *train_data_, test_data_.get()));
    SPILL_RETURN_IF_ERROR(CheckRanksAgree(Communicator::World(), agreement));
  }
  const bool traced = !options_.timeline.empty() || !options_.html.empty();
  if (traced) config_.memory.record_events = true;
  if (config_.distributed.zero >= 2 && Communicator::World().size() > 1) {
    if (!options_.trace_dir.empty()) {
      return InvalidArgument(config_.file +
                             ": --trace saves every gradient after the iteration, and with "
                             "distributed.zero 2 they have left the device by then; trace with "
                             "zero 0 or 1");
    }
    if (config_.distributed.zero >= 3 && config_.distributed.check_replicas) {
      return InvalidArgument(config_.file +
                             ": distributed.check_replicas compares the parameters every rank "
                             "holds whole; at zero 3 each rank holds its own piece of them");
    }
    config_.memory.gradients_leave = true;
    config_.memory.params_gathered = config_.distributed.zero >= 3;
    config_.memory.ranks = Communicator::World().size();
    SPILL_RETURN_IF_ERROR(config_.memory.Validate().WithContext(config_.file));
  }
  SPILL_RETURN_IF_ERROR(GiveMeasuredProfile(options_.link_gbps, &config_.memory));
  // Where the plan does not fit, leaner builds of the same network may.
  const std::vector<LeanerBuild> leaner =
      LeanerBuilds(*net_, net_options, config_.memory.workspace);
  Status chosen = ChooseLayoutBudget(/*explain=*/leaner.empty());
  for (size_t i = 0; i < leaner.size() && chosen.code() == StatusCode::kOutOfMemory; ++i) {
    config_.memory.workspace = leaner[i].workspace;
    SPILL_RETURN_IF_ERROR(BuildNet(spec, leaner[i].net));
    chosen = ChooseLayoutBudget(/*explain=*/i + 1 == leaner.size());
    if (chosen.ok() && leader_) std::fprintf(stderr, "memory: %s\n", leaner[i].note.c_str());
  }
  SPILL_RETURN_IF_ERROR(chosen);
  auto runtime = MemoryRuntime::Create(net_->view(), config_.memory, device_.get());
  if (!runtime.ok()) return ExplainOutOfMemory(runtime.status(), net_->view(), config_.memory);
  runtime_ = std::move(runtime).value();
  executor_ = std::make_unique<Executor>(*net_, device_.get(), *runtime_);
  executor_->set_profiling(options_.profile);
  lengths_ = LengthBuckets::For(*train_data_);
  if (lengths_ && config_.run.micro_batches > 1) {
    return InvalidArgument(config_.file +
                           ": run.micro_batches does not combine with data.buckets (each batch "
                           "is cut to one length)");
  }
  if (traced) {
    recorder_ = std::make_unique<RunRecorder>(*executor_, *runtime_, *device_);
  }
  SPILL_ASSIGN_OR_RETURN(
      parallel_, DataParallel::Create(config_, *net_, device_.get(), *runtime_, *executor_));

  LoaderOptions lo;
  lo.batch = config_.data.batch;
  lo.shuffle = config_.data.shuffle;
  lo.seed = config_.run.seed;
  lo.workers = config_.data.workers;
  if (parallel_) {
    lo.shard = parallel_->rank();
    lo.shards = parallel_->size();
  }
  train_loader_ = std::make_unique<Loader>(*train_data_, lo);
  steps_per_epoch_ = train_loader_->batches_per_epoch();
  SPILL_RETURN_IF_ERROR(StartSchedule());
  WholeState whole;  // the solver state read, when the ranks each hold a shard of it
  // Rank 0 reads a checkpoint for every rank; with sharded parameters each
  // rank reads its own pieces of it.
  const bool own_pieces = solver_->shard().shards_params();
  if (!options_.resume.empty() && (leader_ || own_pieces)) {
    SPILL_ASSIGN_OR_RETURN(position_, LoadCheckpoint(options_.resume, *net_, *runtime_, *device_,
                                                     solver_.get(), own_pieces ? nullptr : &whole));
    saved_step_ = position_.step;
    SPILL_RETURN_IF_ERROR(CheckPosition());
  } else {
    SPILL_RETURN_IF_ERROR(InitializeParameters(*net_, *runtime_, config_.run.seed));
    SPILL_RETURN_IF_ERROR(solver_->ResetState(*net_, *runtime_));
    if (!config_.run.init.empty()) SPILL_RETURN_IF_ERROR(InitFrom(config_.run.init));
  }
  if (parallel_) {
    const bool resumed = !options_.resume.empty() && leader_ && !own_pieces;
    SPILL_RETURN_IF_ERROR(parallel_->Synchronize(*net_, *runtime_, solver_.get(), &position_,
                                                 resumed ? &whole : nullptr));
    if (!options_.resume.empty()) SPILL_RETURN_IF_ERROR(CheckPosition());
  }
  StartLossScaling();
  if (!options_.trace_dir.empty()) SPILL_RETURN_IF_ERROR(StartTrace());
  const std::string log = (std::filesystem::path(config_.run.output) / "log.jsonl").string();
  // Other ranks write nowhere: rank 0's log has the global batch's figures.
  return log_.Open(leader_ ? log : "", !options_.resume.empty(), "the training log");
}

// More memory never fails (memory/planning/feasibility.h): where the mode's own plan
// at the budget does not fit but a smaller budget's does, the run uses that
// layout inside the budget - the choice `plan --device-memory` shows.
Status Trainer::BuildNet(const NetSpec& spec, const NetOptions& options) {
  SPILL_ASSIGN_OR_RETURN(net_, Net::Build(spec, options));
  SPILL_RETURN_IF_ERROR(CalibrateNet(*net_, *device_));
  SPILL_RETURN_IF_ERROR(CheckData());
  SPILL_RETURN_IF_ERROR(CheckPinnedAlgorithm(*net_, config_.memory.workspace)
                            .WithContext(config_.file + ": memory.workspace"));
  solver_->AddState(*net_, DataParallel::ShardFor(config_));
  return Status::Ok();
}

Status Trainer::ChooseLayoutBudget(bool explain) {
  auto runnable = PlanRunnable(net_->view(), config_.memory);
  if (!runnable.ok()) return runnable.status();
  if (!runnable->plan.fits) {
    const Status failed = OutOfMemory(runnable->plan.failure);
    return explain ? ExplainOutOfMemory(failed, net_->view(), config_.memory) : failed;
  }
  if (runnable->fallback() && leader_ && options_.verbose) {
    std::fprintf(stderr, "memory: %s\n", DescribeFallback(*runnable).c_str());
  }
  config_.memory.device_budget = runnable->layout_budget;
  return Status::Ok();
}

// Fine-tuning: parameters that match the checkpoint by name and shape are
// loaded, the rest keep the fresh initialization; the solver starts afresh.
Status Trainer::InitFrom(const std::string& path) {
  auto loaded = LoadInitialParameters(path, *net_, *runtime_);
  if (!loaded.ok()) return loaded.status().WithContext("run.init (--init)");
  init_load_ = std::move(loaded).value();
  if (!options_.verbose) return Status::Ok();
  const PartialLoad& l = init_load_;
  std::fprintf(stderr, "initialized from %s: %zu of %zu parameters loaded: %s\n", path.c_str(),
               l.loaded.size(), l.loaded.size() + l.fresh.size(), NameList(l.loaded).c_str());
  if (!l.fresh.empty()) {
    std::fprintf(stderr, "  %zu freshly initialized: %s\n", l.fresh.size(),
                 NameList(l.fresh).c_str());
  }
  if (!l.unused.empty()) {
    std::fprintf(stderr, "  %zu checkpoint parameters not in the network: %s\n", l.unused.size(),
                 NameList(l.unused).c_str());
  }
  return Status::Ok();
}

// A checkpoint's position must be one this configuration could have reached.
Status Trainer::CheckPosition() const {
  const TrainingPosition& p = position_;
  int64_t step = 0;
  if (p.batch >= steps_per_epoch_ || !CheckedMul(p.epoch, steps_per_epoch_, &step) ||
      !CheckedAdd(step, p.batch, &step) || step != p.step) {
    return InvalidArgument("checkpoint '" + options_.resume + "' is at step " +
                           std::to_string(p.step) + " (epoch " + std::to_string(p.epoch) +
                           ", batch " + std::to_string(p.batch) + "), which does not fit the " +
                           std::to_string(steps_per_epoch_) +
                           " batches per epoch of this configuration (was it saved with another "
                           "batch size or dataset?)");
  }
  return Status::Ok();
}

void Trainer::AdvancePosition() {
  position_.step++;
  position_.solver_steps = solver_->steps();
  if (++position_.batch == steps_per_epoch_) {
    position_.batch = 0;
    position_.epoch++;
  }
}

// fp16's loss scaling checks every gradient before any parameter changes, and
// skips the step when one is not finite: parameters living in host memory
// are then updated there after the iteration (memory.updates_after_iteration).
Status Trainer::CheckLossScaling() const {
  const ParamPlacement& params = config_.memory.params;
  if (config_.run.precision != Precision::kFp16 || params.kind == ParamPlacement::Kind::kDevice ||
      params.kind == ParamPlacement::Kind::kCache) {
    return Status::Ok();
  }
  const std::string key =
      config_.file + ": run.precision fp16 with memory.params " + params.ToString();
  if (!config_.memory.update_on_host) {
    return InvalidArgument(
        key +
        " needs memory.update: host (fp16's loss scaling checks every gradient before any "
        "parameter changes: the gradients wait in host memory and the solver step runs "
        "there after the iteration)");
  }
  if (Communicator::World().size() > 1) {
    return InvalidArgument(key +
                           " runs in one process: data-parallel ranks reduce and update "
                           "parameters in host memory layer by layer during backward, "
                           "before the check; use memory.params: device, or bf16");
  }
  return Status::Ok();
}

Status Trainer::CheckMicroBatches(int64_t rank_batch) const {
  const int64_t k = config_.run.micro_batches;
  if (k == 1) return Status::Ok();
  const std::string key = config_.file + ": run.micro_batches " + std::to_string(k);
  if (rank_batch % k != 0) {
    return InvalidArgument(key + " does not divide the batch " +
                           (Communicator::World().size() > 1 ? "of a rank, " : "") +
                           std::to_string(rank_batch) + "; give a divisor of it");
  }
  // Each refusal: what the accumulated step would break.
  const std::pair<bool, const char*> refusals[] = {
      {config_.memory.params.kind != ParamPlacement::Kind::kDevice,
       "needs memory.params: device (parameters elsewhere are updated during backward, before "
       "the last micro-batch)"},
      {config_.run.precision == Precision::kFp16,
       "does not combine with run.precision fp16 (its loss scaling checks one iteration's "
       "gradients); use bf16"},
      {Communicator::World().size() > 1,
       "runs in one process; data-parallel ranks compute the batch's parts at once"},
      {!options_.trace_dir.empty() || !options_.timeline.empty() || !options_.html.empty(),
       "does not combine with --trace, --timeline or --html, which record one iteration"},
  };
  for (const auto& [refused, why] : refusals) {
    if (refused) return InvalidArgument(key + " " + why);
  }
  return Status::Ok();
}

StatusOr<LossResult> Trainer::RunMicroBatches(const Batch& batch, uint64_t seed) {
  const int64_t k = config_.run.micro_batches, n = net_->batch();
  const int64_t image = net_->input_shape().sample_size();
  const int64_t labels = static_cast<int64_t>(batch.labels.size()) / (k * n);
  const auto& slots = solver_->slots();
  std::vector<std::vector<float>> sums(slots.size());
  std::vector<float> values;
  LossResult total;
  double loss = 0;
  for (int64_t m = 0; m < k; ++m) {
    HostBatch host{batch.images.data() + m * n * image, batch.labels.data() + m * n * labels};
    SPILL_ASSIGN_OR_RETURN(LossResult result, executor_->Run(host, Phase::kTrain, seed));
    loss += result.loss;
    total.correct += result.correct;
    total.count += result.count;
    // The sums in micro-batch order, as a reduction adds ranks in rank order.
    for (size_t i = 0; i < slots.size(); ++i) {
      std::vector<float>& sum = sums[i];
      if (m == 0) {
        sum.resize(slots[i].numel);
        SPILL_RETURN_IF_ERROR(runtime_->ReadTensor(slots[i].grad, sum.data()));
        continue;
      }
      values.resize(slots[i].numel);
      SPILL_RETURN_IF_ERROR(runtime_->ReadTensor(slots[i].grad, values.data()));
      for (size_t e = 0; e < sum.size(); ++e) sum[e] += values[e];
    }
  }
  const float scale = 1.0f / static_cast<float>(k);
  for (size_t i = 0; i < slots.size(); ++i) {
    for (float& x : sums[i]) x *= scale;
    SPILL_RETURN_IF_ERROR(runtime_->WriteTensor(slots[i].grad, sums[i].data()));
  }
  total.loss = loss / static_cast<double>(k);
  return total;
}

void Trainer::StartLossScaling() {
  if (config_.run.precision != Precision::kFp16) return;
  scaler_ = std::make_unique<LossScaler>(config_.run.loss_scale);
  if (!options_.resume.empty()) {
    scaler_->Restore(position_.loss_scale, position_.loss_scale_clean_steps);
  }
  if (leader_ && options_.verbose && device_->type() == DeviceType::kCpu) {
    std::fprintf(stderr,
                 "precision: fp16 on the cpu device stores activations in IEEE half and "
                 "computes in float32 (this processor has no fp16 arithmetic spill uses)\n");
  }
}

// Data-parallel ranks decide together from the averaged gradients (a rank
// whose loss is not finite has gradients that are not either, and they
// reach every average); one process also looks at its loss.
Status Trainer::Unscale(const LossResult& result, bool* skipped) {
  const float factor = static_cast<float>(1.0 / scaler_->scale());
  if (parallel_) {
    SPILL_ASSIGN_OR_RETURN(const bool finite, parallel_->Unscale(factor));
    *skipped = !finite;
    return Status::Ok();
  }
  SPILL_ASSIGN_OR_RETURN(const bool finite,
                         solver_->UnscaleGradients(*net_, solver_store(), *device_, factor));
  *skipped = !finite || !std::isfinite(result.loss);
  return Status::Ok();
}

Status Trainer::ScaledUpdate(double lr, bool skipped) {
  if (!skipped) SPILL_RETURN_IF_ERROR(solver_->Update(*net_, solver_store(), *device_, lr));
  report_.skipped_steps += skipped;
  return scaler_->Update(!skipped, position_.step + 1);
}

Status Trainer::LogStep(const LossResult& result, double lr, double seconds, int64_t dropped,
                        double loss_scale, bool skipped) {
  Json line = {
      {"kind", "train"},
      {"step", position_.step},
      {"epoch", static_cast<double>(position_.step) / steps_per_epoch_},
      {"loss", result.loss},
      {"accuracy", static_cast<double>(result.correct) / std::max<int64_t>(result.count, 1)},
      {"lr", lr},
      {"seconds", seconds}};
  if (HasStochasticDepth(*net_)) line["dropped"] = dropped;
  if (scaler_) {
    line["loss_scale"] = loss_scale;
    line["skipped"] = skipped;
  }
  return log_.Append(line.dump());
}

Status Trainer::TrainStep(Batch& batch) {
  auto start = Clock::now();
  const int64_t replans = runtime_->replans();
  const int64_t mismatches = runtime_->allocator().mismatches();
  // A trace keeps the batch as the dataset gave it, with the length it was cut to.
  if (!options_.trace_dir.empty()) {
    trace_images_.insert(trace_images_.end(), batch.images.begin(), batch.images.end());
    trace_labels_.insert(trace_labels_.end(), batch.labels.begin(), batch.labels.end());
  }
  if (lengths_) SPILL_RETURN_IF_ERROR(lengths_->Fit(&batch, *net_, *runtime_));
  if (!options_.trace_dir.empty() && lengths_) {
    trace_lengths_.push_back(static_cast<float>(net_->sequence_length()));
  }
  HostBatch host{batch.images.data(), batch.labels.data()};
  const double lr = schedule_.At(position_.step);
  // The store may apply the update during backward, where each parameter
  // lives; fp16's loss scaling updates after the iteration, once every
  // gradient is known to be finite.
  const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
  if (scaler_) {
    executor_->set_loss_scale(static_cast<float>(loss_scale));
  } else {
    solver_->BeginStep(*net_, solver_store(), *device_, lr);
  }
  if (Tracing()) recorder_->Begin();
  const uint64_t seed = MixSeed(config_.run.seed, static_cast<uint64_t>(position_.step));
  SPILL_ASSIGN_OR_RETURN(LossResult result, config_.run.micro_batches > 1
                                                ? RunMicroBatches(batch, seed)
                                                : executor_->Run(host, Phase::kTrain, seed));
  if (!std::isfinite(result.loss) && !scaler_) {
    return Diverged("the loss of step " + std::to_string(position_.step + 1) + " is " +
                    std::to_string(result.loss));
  }
  bool skipped = false;
  if (scaler_) SPILL_RETURN_IF_ERROR(Unscale(result, &skipped));
  if (!options_.trace_dir.empty() && trace_loss_.empty()) {
    SPILL_RETURN_IF_ERROR(SaveGradients());
  }
  const double update_begin = MonotonicSeconds();
  if (scaler_) {
    SPILL_RETURN_IF_ERROR(ScaledUpdate(lr, skipped));
  } else {
    SPILL_RETURN_IF_ERROR(solver_->FinishStep(solver_store()));
  }
  if (parallel_) {
    bool stop = false;
    SPILL_RETURN_IF_ERROR(parallel_->FinishStep(*net_, *runtime_, *solver_, position_.step + 1,
                                                stop_requested, &result, &stop));
    stop_agreed_ = stop;  // every rank stops after the same step
  }
  if (Tracing()) {
    device_->compute_queue().Synchronize();
    SPILL_RETURN_IF_ERROR(FinishTimeline(update_begin, MonotonicSeconds()));
  }
  const double seconds = Since(start);
  if (!options_.trace_dir.empty()) {
    trace_lr_.push_back(static_cast<float>(lr));
    trace_loss_.push_back(static_cast<float>(result.loss));
    for (int id : net_->schedule().route) {
      trace_dropped_.push_back(static_cast<float>(executor_->dropped_inputs()[id]));
    }
  }
  report_.losses.push_back(result.loss);
  report_.peak_device_bytes = std::max(report_.peak_device_bytes, runtime_->run_peak());
  report_.persistent_device_bytes = runtime_->log().persistent;
  report_.streamed_steps = runtime_->log().streamed;
  const int64_t dropped = executor_->depth_stats().dropped_branches - report_.dropped_branches;
  report_.dropped_branches = executor_->depth_stats().dropped_branches;
  report_.skipped_computations = 2 * executor_->depth_stats().skipped_layers;
  if (lengths_) {
    report_.lengths_planned = runtime_->replans() + 1;
    report_.replanned_iterations +=
        runtime_->replans() > replans || runtime_->allocator().mismatches() > mismatches;
  }
  // A step fp16 skipped for a loss that is not finite adds nothing to the
  // epoch's mean (it changed no parameter either).
  if (std::isfinite(result.loss)) {
    epoch_loss_ += result.loss;
    epoch_correct_ += static_cast<double>(result.correct);
    epoch_count_ += static_cast<double>(result.count);
    epoch_steps_++;
  }
  AdvancePosition();
  SPILL_RETURN_IF_ERROR(LogStep(result, lr, seconds, dropped, loss_scale, skipped));
  if (report_.losses.size() == 2 && !options_.memory_log.empty()) {
    SPILL_RETURN_IF_ERROR(WriteMemoryLog());
  }
  return Status::Ok();
}

Status Trainer::Evaluate() {
  if (!test_data_) return Status::Ok();
  progress_.Break();
  std::unique_ptr<Dataset> shard = parallel_ ? parallel_->TestShard(*test_data_) : nullptr;
  const int64_t sent = parallel_ ? parallel_->floats_sent() : 0;
  SPILL_ASSIGN_OR_RETURN(
      EvalResult result,
      EvaluateDataset(*executor_, *net_, shard ? *shard : *test_data_, config_.data.workers,
                      lengths_
                          ? [this](Batch* batch) { return lengths_->Fit(batch, *net_, *runtime_); }
                          : std::function<Status(Batch*)>(),
                      parallel_ ? parallel_->TestBatches(*test_data_, net_->batch()) : 0));
  if (parallel_) {
    parallel_->NotAStep(parallel_->floats_sent() - sent);
    SPILL_RETURN_IF_ERROR(parallel_->ReduceEval(&result));
  }
  const int64_t count = result.count;
  report_.evaluated = true;
  report_.test_loss = result.loss;
  report_.test_accuracy = result.accuracy;
  const Json line = {{"kind", "eval"},
                     {"step", position_.step},
                     {"test_loss", report_.test_loss},
                     {"test_accuracy", report_.test_accuracy}};
  SPILL_RETURN_IF_ERROR(log_.Append(line.dump()));
  if (options_.verbose) {
    std::fprintf(stderr, "step %ld: test loss %.4f, test accuracy %.2f%% (%ld images)\n",
                 position_.step, report_.test_loss, 100 * report_.test_accuracy, count);
  }
  return Status::Ok();
}

Status Trainer::SaveCheckpoint() {
  position_.solver_steps = solver_->steps();
  if (scaler_) {
    position_.loss_scale = scaler_->scale();
    position_.loss_scale_clean_steps = scaler_->clean_steps();
  }
  WholeState whole;        // each rank holds a shard of the solver state: rank 0 gathers it
  WholeParameters params;  // and at zero 3 of the parameters
  const bool sharded = solver_->shard().sharded();
  if (sharded) SPILL_RETURN_IF_ERROR(parallel_->GatherState(*net_, *runtime_, *solver_, &whole));
  if (solver_->shard().shards_params()) {
    SPILL_RETURN_IF_ERROR(parallel_->GatherWholeParameters(*net_, *runtime_, *solver_, &params));
  }
  if (!leader_) return Status::Ok();  // every rank holds the same parameters
  StatusOr<NpzArchive> archive =
      CheckpointArchive(*net_, *runtime_, solver_.get(), position_, config_.text,
                        sharded ? &whole : nullptr, params.empty() ? nullptr : &params);
  // Values that are not finite are refused before anything is written; a
  // path that cannot be written is the writer's error, not a divergence.
  if (archive.status().code() == StatusCode::kInvalidArgument) {
    return Diverged("after step " + std::to_string(position_.step) + " " +
                    archive.status().message());
  }
  SPILL_RETURN_IF_ERROR(archive.status());
  SPILL_RETURN_IF_ERROR(WriteNpzAtomically(checkpoint_path(), *archive));
  saved_step_ = position_.step;
  return Status::Ok();
}

// Training cannot go on: it says so, and where the last good checkpoint is.
Status Trainer::Diverged(const std::string& what) const {
  std::string kept = "no checkpoint of this run was written";
  if (saved_step_ >= 0) {
    kept = "the checkpoint of step " + std::to_string(saved_step_) + " is kept in " +
           checkpoint_path();
  }
  return InvalidArgument("training diverged: " + what + "; " + kept + " (try a lower solver.lr)");
}

std::string Trainer::ProfileTable() const { return executor_->ProfileTable(); }
bool Trainer::Tracing() const { return recorder_ && !timeline_written_; }

Status Trainer::Run() {
  const auto start = Clock::now();
  const int64_t epochs = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  train_loader_->Start(position_.epoch, position_.batch);
  int64_t ran = 0;
  bool evaluated_last = false;
  while (position_.step < total_steps_ && (options_.max_steps == 0 || ran < options_.max_steps)) {
    auto step_start = Clock::now();
    SPILL_ASSIGN_OR_RETURN(Batch batch, train_loader_->Next());
    SPILL_RETURN_IF_ERROR(TrainStep(batch));
    train_seconds_ += Since(step_start);
    train_images_ += batch.size * report_.ranks;  // the global batch
    ++ran;
    const double rate = train_images_ / std::max(train_seconds_, 1e-9);
    const double left =
        (std::min<int64_t>(total_steps_ - position_.step,
                           options_.max_steps ? options_.max_steps - ran : INT64_MAX)) *
        config_.data.batch / std::max(rate, 1e-9);
    const int64_t in_epoch = position_.batch == 0 ? steps_per_epoch_ : position_.batch;
    progress_.Update(position_.epoch + (position_.batch == 0 ? 0 : 1), epochs, in_epoch,
                     steps_per_epoch_, epoch_loss_ / std::max<int64_t>(epoch_steps_, 1),
                     epoch_correct_ / std::max(epoch_count_, 1.0), rate, left);
    const bool epoch_end = EpochEnded();
    if (epoch_end) {
      report_.train_loss = epoch_loss_ / std::max<int64_t>(epoch_steps_, 1);
      report_.train_accuracy = epoch_correct_ / std::max(epoch_count_, 1.0);
      epoch_loss_ = epoch_correct_ = epoch_count_ = 0;
      epoch_steps_ = 0;
    }
    const int64_t every = config_.run.eval_every;
    evaluated_last = false;
    if ((every > 0 && position_.step % every == 0) || (every == 0 && epoch_end)) {
      SPILL_RETURN_IF_ERROR(Evaluate());
      evaluated_last = true;
    }
    const int64_t save = config_.run.checkpoint_every;
    if ((save > 0 && position_.step % save == 0) || (save == 0 && epoch_end)) {
      SPILL_RETURN_IF_ERROR(SaveCheckpoint());
    }
    if (parallel_ ? stop_agreed_ : stop_requested.load()) {
      progress_.Break();
      SPILL_RETURN_IF_ERROR(SaveCheckpoint());
      report_.interrupted = true;
      break;
    }
  }
  progress_.Break();
  if (recorder_) SPILL_RETURN_IF_ERROR(WriteTimeline());
  if (epoch_steps_ > 0) {
    report_.train_loss = epoch_loss_ / epoch_steps_;
    report_.train_accuracy = epoch_correct_ / std::max(epoch_count_, 1.0);
  }
  if (!report_.interrupted) {
    if (!evaluated_last) SPILL_RETURN_IF_ERROR(Evaluate());
    SPILL_RETURN_IF_ERROR(SaveCheckpoint());
  }
  if (!options_.trace_dir.empty()) SPILL_RETURN_IF_ERROR(FinishTrace());
  report_.steps = position_.step;
  report_.epochs = static_cast<double>(position_.step) / steps_per_epoch_;
  report_.seconds = Since(start);
  report_.images_per_second = train_images_ / std::max(train_seconds_, 1e-9);
  if (parallel_) report_.communication = parallel_->stats();
  if (report_.interrupted) {
    return Cancelled("stopped at step " + std::to_string(position_.step) +
                     "; checkpoint saved to " + checkpoint_path());
  }
  return Status::Ok();
}

}  // namespace spill
