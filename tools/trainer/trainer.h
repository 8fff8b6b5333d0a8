// The training loop behind `train`: data loaders, network, memory runtime,
// solver, evaluation, logs and checkpoints.
//
// Reproducibility: batch order, augmentation, dropout masks and the learning
// rate depend only on (seed, epoch, step), and checkpoints hold parameters,
// solver state and the position in the data, so a run resumed from a
// checkpoint produces exactly the losses of an uninterrupted one.
//
// The output folder belongs to one run at a time: the trainer holds an
// exclusive flock(2) on <output>/train.lock for its lifetime (the kernel drops
// it when the process ends, even by kill -9, so it never goes stale), and a
// fresh run refuses to start over a checkpoint unless asked to (overwrite).
#ifndef SPILL_TOOLS_TRAINER_TRAINER_H_
#define SPILL_TOOLS_TRAINER_TRAINER_H_

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "framework/base/files.h"
#include "framework/graph/executor.h"
#include "framework/io/checkpoint.h"
#include "framework/solver/solver.h"
#include "memory/runtime/runtime.h"
#include "tools/common/timeline_tools.h"
#include "tools/trainer/data_parallel.h"
#include "tools/trainer/length_buckets.h"
#include "tools/trainer/progress.h"
#include "tools/trainer/train_config.h"

namespace spill {

struct TrainOptions {
  int64_t max_steps = 0;   // stop after this many steps in this run (0: no limit)
  std::string resume;      // checkpoint to continue from ("" = fresh start)
  std::string memory_log;  // write per-step memory accounting here (.csv or .jsonl)
  bool progress = true;    // progress bar on stderr
  bool verbose = true;     // summary lines on stderr
  bool profile = false;    // time each layer type; see Trainer::ProfileTable
  // Record the network, initial weights, batches, learning rates and losses
  // here, for tools/bench/crosscheck_torch.py.
  std::string trace_dir;
  // Throttle host<->device copies of the CPU device (GB/s; 0 = memcpy speed).
  double link_gbps = 0;
  // Start afresh even though the output folder holds a checkpoint.
  bool overwrite = false;
  // Write the second training iteration of this run (the first, when it is
  // the only one) as a Chrome/Perfetto trace here; on the CPU device its
  // step times also go to the step time cache.
  std::string timeline;
  // Write the memory page of that iteration here (memory/report/memory_page.h):
  // its step records, event log and measured queues.
  std::string html;
};

struct TrainReport {
  double train_loss = 0;  // mean over the last epoch's steps (or all steps of this run)
  double train_accuracy = 0;
  bool evaluated = false;
  double test_loss = 0;
  double test_accuracy = 0;
  double images_per_second = 0;  // training throughput, evaluation excluded
  size_t peak_device_bytes = 0;
  // Device memory held between iterations: parameters (or this rank's
  // pieces of them), gradients kept, solver state.
  size_t persistent_device_bytes = 0;
  // Steps of the last training iteration computed in slices through host
  // memory because they did not fit the device (memory.chunk).
  int streamed_steps = 0;
  // Stochastic depth over this run: residual branches dropped, and the layer
  // computations (forward and backward each) skipped with them.
  int64_t dropped_branches = 0;
  int64_t skipped_computations = 0;
  // fp16's loss scaling over this run: steps skipped because a gradient was
  // not finite.
  int64_t skipped_steps = 0;
  // data.buckets: the lengths the memory runtime planned for, and the
  // iterations of this run that planned anew (a length not seen before, or
  // the allocator leaving its profile - the static allocator after a
  // larger request).
  int64_t lengths_planned = 0;
  int64_t replanned_iterations = 0;
  int64_t steps = 0;  // total updates so far (including before a resume)
  double epochs = 0;
  double seconds = 0;
  bool interrupted = false;
  std::vector<double> losses;  // each step of this run
  int ranks = 1;               // processes training together (mpirun)
  ReducerStats communication;  // of the gradient allreduces, with ranks > 1
  std::string ToJson(const MemoryOptions& memory) const;
};

class Trainer {
 public:
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainConfig& config,
                                                   const TrainOptions& options);
  ~Trainer();

  // Trains until the configured length or --max-steps. Returns kCancelled
  // (after saving a checkpoint) when a stop was requested.
  Status Run();
  const TrainReport& report() const { return report_; }
  const Net& net() const { return *net_; }
  std::string checkpoint_path() const;
  // What run.init (--init) loaded and what it left freshly initialized.
  const PartialLoad& init_load() const { return init_load_; }
  // Per-layer-type compute time of the training steps (with --profile).
  std::string ProfileTable() const;

  // Asks every running trainer to stop after its current step (Ctrl-C).
  static void RequestStop();
  static void ClearStop();

 private:
  Trainer(const TrainConfig& config, const TrainOptions& options);
  Status Setup();
  Status ClaimOutput();
  Status OpenData();
  Status CheckDataSize() const;
  Status CheckData() const;
  Status StartSchedule();
  // net_ from `spec`, calibrated, checked against the data, with the
  // solver's state added.
  Status BuildNet(const NetSpec& spec, const NetOptions& options);
  // The budget the iteration is laid out in (memory/planning/feasibility.h);
  // out of memory, explained with the smallest budget that runs when
  // `explain`.
  Status ChooseLayoutBudget(bool explain = true);
  Status CheckPosition() const;
  Status InitFrom(const std::string& path);
  Status TrainStep(Batch& batch);
  // fp16: where loss scaling can run (a clear error where it cannot), and
  // the scaler, restored from a resumed checkpoint.
  Status CheckLossScaling() const;
  // run.micro_batches: what it splits and what it cannot combine with.
  Status CheckMicroBatches(int64_t rank_batch) const;
  // The step's batch in micro-batches: runs each, adds their gradients in
  // order in host memory and leaves their mean in the gradients.
  StatusOr<LossResult> RunMicroBatches(const Batch& batch, uint64_t seed);
  void StartLossScaling();
  // After an fp16 iteration: unscales the gradients; `skipped` when one (or
  // the loss) is not finite, and the step must be skipped.
  Status Unscale(const LossResult& result, bool* skipped);
  // Then the solver step unless skipped, and the scale's next value.
  Status ScaledUpdate(double lr, bool skipped);
  Status Evaluate();
  // Where the solver updates: the runtime, or its gradient-averaging wrapper.
  TensorStore& solver_store();
  Status SaveCheckpoint();
  Status Diverged(const std::string& what) const;
  // `dropped`: the residual branches stochastic depth left out of the step.
  Status LogStep(const LossResult& result, double lr, double seconds, int64_t dropped,
                 double loss_scale, bool skipped);
  Status WriteMemoryLog();
  Status StartTrace();
  Status FinishTrace();
  Status SaveGradients();
  // The timeline of iterations (with TrainOptions::timeline).
  bool Tracing() const;
  Status FinishTimeline(double update_begin, double update_end);
  Status WriteTimeline();
  std::string MemoryPageHtml() const;
  void AdvancePosition();
  bool EpochEnded() const { return position_.batch == 0; }

  TrainConfig config_;
  TrainOptions options_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Dataset> train_data_, test_data_;
  std::unique_ptr<Loader> train_loader_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<Solver> solver_;
  std::unique_ptr<MemoryRuntime> runtime_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LengthBuckets> lengths_;  // data.buckets; null without
  std::unique_ptr<RunRecorder> recorder_;
  std::unique_ptr<DataParallel> parallel_;  // null in a single process
  std::unique_ptr<LossScaler> scaler_;      // fp16's loss scaling; null otherwise
  bool leader_ = true;                      // rank 0: prints, logs, checkpoints
  bool stop_agreed_ = false;                // some rank asked to stop (data parallel)
  Timeline traced_;
  std::string traced_page_;      // its memory page (with TrainOptions::html)
  size_t traced_iteration_ = 0;  // of this run, from 1
  bool timeline_written_ = false;
  LrSchedule schedule_;
  TrainingPosition position_;
  int64_t saved_step_ = -1;  // of this run's last checkpoint (-1: none yet)
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  LineLog log_;       // <output>/log.jsonl
  int lock_fd_ = -1;  // <output>/train.lock, held while the trainer lives
  Progress progress_;
  TrainReport report_;
  PartialLoad init_load_;
  // Running figures of the current epoch.
  double epoch_loss_ = 0, epoch_correct_ = 0, epoch_count_ = 0;
  int64_t epoch_steps_ = 0;
  double train_seconds_ = 0;
  int64_t train_images_ = 0;
  bool memory_log_written_ = false;
  // Trace of this run's steps (with --trace).
  std::vector<float> trace_images_, trace_labels_, trace_lr_, trace_loss_;
  // Per step, in route order: the input each layer left out (-1: none).
  std::vector<float> trace_dropped_;
  // data.buckets: the length each step's batch was cut to (the trace's
  // batches are the dataset's, at max_length).
  std::vector<float> trace_lengths_;
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_TRAINER_H_
