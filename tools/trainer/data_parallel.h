// Data-parallel training: what the trainer does differently when mpirun
// starts several ranks (see README, "Several GPUs or machines").
//
//   * data.batch is the global batch. Each rank builds the network for
//     batch / ranks and reads its own contiguous slice of every global batch
//     (Loader shards), in the same seeded order as one process;
//   * rank 0's parameters, solver state and position in the data replace
//     every other rank's before the first step - its fresh initialization,
//     or the checkpoint that rank 0 alone reads on --resume;
//   * gradients are averaged in buckets during backward (gradient_reducer.h)
//     before every rank applies the same update;
//   * with distributed.zero: 1, each rank holds the solver state of its own
//     range of the parameters (Solver's StateShard) and updates only that
//     range, and the ranks then all-gather the updated parameters; rank 0
//     gathers the state for checkpoints, which hold it whole, so a run
//     resumes on any number of ranks and at any stage;
//   * with zero: 3 each rank keeps its range of the parameters alone
//     (ParameterSlot::master): the memory runtime asks for a parameter
//     before each step that reads it, and the ranks all-gather it from their
//     pieces (GatherParameter); nothing is gathered after the update. Every
//     rank reads its own pieces of a checkpoint on --resume, and rank 0
//     gathers the parameters with the state for the checkpoints it writes;
//   * per-step figures (loss, hits, a stop request) are reduced, so every
//     rank logs the global batch's loss and all ranks stop at the same step;
//   * evaluation is sharded: each rank scores a contiguous slice of the test
//     split, and the sums are reduced;
//   * batch norm uses each rank's own statistics unless
//     distributed.sync_batch_norm is set (framework/distributed/replica_sum.h);
//   * rank 0 alone prints, writes the log, the report and checkpoints.
// A rank that fails prints its error and aborts the MPI job, which ends every
// other rank, even one blocked in a collective (tools/train_main.cc).
#ifndef SPILL_TOOLS_TRAINER_DATA_PARALLEL_H_
#define SPILL_TOOLS_TRAINER_DATA_PARALLEL_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "data/dataset.h"
#include "framework/distributed/distributed.h"
#include "framework/graph/executor.h"
#include "framework/io/checkpoint.h"
#include "framework/solver/solver.h"
#include "memory/runtime/runtime.h"
#include "tools/trainer/gradient_reducer.h"
#include "tools/trainer/inference.h"
#include "tools/trainer/train_config.h"

namespace spill {

class DataParallel : public MemoryRuntime::ParameterGatherer {
 public:
  // Null (and Ok) when this process trains alone.
  static StatusOr<std::unique_ptr<DataParallel>> Create(const TrainConfig& config, const Net& net,
                                                        Device* device, MemoryRuntime& runtime,
                                                        Executor& executor);
  // The per-rank batch of `config`'s global batch; an error when the ranks
  // do not divide it.
  static StatusOr<int64_t> RankBatch(const TrainConfig& config);
  ~DataParallel() override;

  // Zero 3: the memory runtime's gatherer. Begin copies this rank's piece
  // of `param` out (behind the compute queue) and queues the all-gather
  // for the gather thread, which first checks that every rank gathers the
  // same parameter; Finish waits for it and copies the parameter into the
  // device memory the runtime placed for it.
  void Begin(TensorId param) override;
  Status Finish(TensorId param, float* data) override;

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  // The store the solver updates through: it reads averaged gradients.
  TensorStore& solver_store() { return *solver_store_; }

  // The solver-state shard of this rank under `config` (whole at zero 0).
  static StateShard ShardFor(const TrainConfig& config);

  // Rank 0's parameters, solver state and position replace every rank's.
  // With sharded state, `whole` is rank 0's whole state read from a
  // checkpoint (null on a fresh start, where every rank zeroed its own).
  Status Synchronize(const Net& net, TensorStore& store, Solver* solver, TrainingPosition* position,
                     const WholeState* whole);
  // fp16's loss scaling, before the solver step: unscales the averaged
  // gradients (GradientReducer::Unscale) and says whether every rank's were
  // all finite - the same answer on every rank, so all skip a step or none.
  StatusOr<bool> Unscale(float factor);
  // After the solver step: checks the reduction, all-gathers the parameters
  // updated in pieces (zero 1), makes `result` the global batch's, and
  // returns in `stop` whether any rank asked to stop. With
  // distributed.check_replicas, verifies that every rank holds the same
  // parameters (and, unsharded, solver state).
  Status FinishStep(const Net& net, TensorStore& store, const Solver& solver, int64_t step,
                    bool stop_here, LossResult* result, bool* stop);
  // Every rank's pieces of the sharded solver state, whole, on rank 0 (for
  // its checkpoint); other ranks send theirs and get nothing. Collective.
  Status GatherState(const Net& net, TensorStore& store, const Solver& solver, WholeState* whole);
  // Zero 3: every rank's pieces of the parameters, whole, on rank 0, by
  // parameter (others get nothing). Collective.
  Status GatherWholeParameters(const Net& net, TensorStore& store, const Solver& solver,
                               WholeParameters* whole);
  // This rank's slice of the test split.
  std::unique_ptr<Dataset> TestShard(const Dataset& data) const;
  // Batches of `batch` every rank evaluates: the most any rank's slice of
  // `data` needs. With sharded parameters every rank runs as many (a
  // parameter is gathered by all ranks or none); 0 otherwise.
  int64_t TestBatches(const Dataset& data, int64_t batch) const;
  // Floats sent outside the training steps (evaluation's gathers): not
  // counted in the per-step figures.
  void NotAStep(int64_t floats) { outside_steps_floats_ += floats; }
  int64_t floats_sent() const { return comm_.floats_sent(); }
  // The figures of every rank's slice, combined.
  Status ReduceEval(EvalResult* result);

  // The reductions' figures, and the floats this rank sent per step.
  ReducerStats stats() const;
  int64_t buckets() const { return reducer_->bucket_count(); }

 private:
  DataParallel(Communicator& comm, const DistributedConfig& config)
      : comm_(comm), config_(config) {}
  Status CheckReplicas(const Net& net, TensorStore& store, const Solver& solver, int64_t step);
  // Every rank's packed pieces, `own` (`times` x its range of `total`
  // elements), to rank 0, where `arrived` gets them by rank (its own moved
  // in). Collective, on the control channel.
  Status SendToRankZero(std::vector<float> own, int64_t total, int times, int tag,
                        std::vector<std::vector<float>>* arrived);
  // One all-gather of a sharded parameter, from Begin to Finish.
  struct Gathering {
    TensorId param = kNoTensor;
    std::vector<float> values;          // the whole parameter, as it arrives
    std::shared_ptr<Event> piece_read;  // this rank's piece copied into `values`
    std::shared_ptr<Event> copied;      // Finish's copy to the device read `values`
    bool done = false;
    Status status;
  };
  // The gather thread: the all-gathers in the order Begin queued them.
  void GatherLoop();
  Status AllGather(Gathering& g);
  // Every rank's updated pieces of every parameter to every rank.
  Status GatherParameters(const Net& net, TensorStore& store, const Solver& solver);
  // A piece of a parameter and where it is, or goes, in host memory.
  struct PieceCopy {
    size_t slot = 0;
    Piece piece;
    float* host = nullptr;
  };
  // Copies the pieces (in slot order) out of, or into, the parameters: in
  // one round trip of the compute queue where the parameters stay on the
  // device, else through the store a parameter at a time.
  Status ReadPieces(TensorStore& store, const Solver& solver, const std::vector<PieceCopy>& copies);
  Status WritePieces(TensorStore& store, const Solver& solver,
                     const std::vector<PieceCopy>& copies);

  Communicator& comm_;
  DistributedConfig config_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ReducingStore> solver_store_;
  int64_t outside_steps_floats_ = 0;  // sent for checkpoints and evaluation, not by the steps
  Device* device_ = nullptr;
  bool params_on_device_ = false;  // memory.params: device (store.Data is theirs for good)
  // Zero 3: the runtime that holds the pieces, each sharded parameter's slot
  // and first element, and the all-gathers under way.
  MemoryRuntime* runtime_ = nullptr;
  const Schedule* schedule_ = nullptr;
  struct Sharded {
    size_t slot = 0;     // in Schedule::parameters
    int64_t offset = 0;  // its first element among all trainable ones
  };
  std::unordered_map<TensorId, Sharded> sharded_;  // by parameter
  int64_t trainable_ = 0;
  std::mutex gather_mutex_;
  std::condition_variable gather_work_;                               // queued, or stopping
  std::condition_variable gather_done_;                               // an all-gather ended
  std::deque<std::shared_ptr<Gathering>> gather_queue_;               // for the thread
  std::unordered_map<TensorId, std::shared_ptr<Gathering>> gathers_;  // begun, not finished
  std::vector<std::shared_ptr<Gathering>> retiring_;  // copies to the device in flight
  bool gather_stopping_ = false;
  std::thread gather_thread_;
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_DATA_PARALLEL_H_
