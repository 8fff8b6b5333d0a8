// Gradient averaging for data-parallel training, overlapped with backward.
//
// Layout: the trainable parameters, in the order backward produces their
// gradients, are cut into buckets of about `bucket_bytes` (DDP's and
// Horovod's tensor fusion). When parameters may be updated during backward
// (memory.params other than device: the store updates a layer as soon as its
// gradient is complete), a bucket never spans two layers, so a layer's
// update never waits for a gradient that backward has not produced yet. The
// layout depends on the schedule alone, so it is the same on every rank, as
// the allreduce of each bucket requires.
//
// Flow of one iteration: after each backward step (Executor's backward hook)
// the training thread copies the layer's gradients out of device memory into
// their bucket's host buffer; a bucket whose last gradient has arrived goes
// to the communication thread, which starts a non-blocking MPI allreduce
// (sum) on it, drives MPI's progress while backward goes on, and scales the
// sum by 1/ranks when it completes. The solver step of a parameter - wherever
// the store runs it: after the iteration, during backward, on the device or
// in host memory - first waits for its bucket and then reads the averaged
// gradient from it (ReducingStore below); on a GPU it is copied back to the
// device first.
//
// Every rank adds the same floats in the same allreduce, and every rank then
// applies the same solver arithmetic to the same result, so the parameters
// stay bit-identical across ranks.
#ifndef SPILL_TOOLS_TRAINER_GRADIENT_REDUCER_H_
#define SPILL_TOOLS_TRAINER_GRADIENT_REDUCER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "framework/device/device.h"
#include "framework/distributed/distributed.h"
#include "framework/graph/net.h"
#include "framework/schedule/tensor_store.h"

namespace spill {

// Communication figures, summed over the iterations so far.
struct ReducerStats {
  int64_t iterations = 0;
  int64_t buckets = 0;          // per iteration
  double comm_seconds = 0;      // wall time some allreduce was in flight
  double overlap_seconds = 0;   // of which while backward was still running
  double wait_seconds = 0;      // the training thread blocked on a bucket
  double backward_seconds = 0;  // first to last backward step
};

class GradientReducer {
 public:
  // `per_layer`: buckets end at every layer (updates during backward).
  GradientReducer(Communicator& comm, const Net& net, Device* device, TensorStore& store,
                  size_t bucket_bytes, bool per_layer);
  ~GradientReducer();

  // The executor's backward hook: gathers `layer`'s gradients.
  void OnBackward(int layer);
  // The averaged gradient of `param` in host memory, once its bucket is
  // reduced (blocks until then).
  StatusOr<const float*> Reduced(TensorId param);
  // After the iteration's solver step: every bucket was reduced and used.
  Status FinishIteration();

  const ReducerStats& stats() const { return stats_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  enum class State { kFilling, kQueued, kInFlight, kDone };
  struct Bucket {
    std::vector<float> data;
    int64_t slots = 0;   // gradients it holds
    int64_t filled = 0;  // of them, copied in this iteration
    State state = State::kFilling;
    Communicator::Request request;
    double begin = 0, end = 0;  // the allreduce, MonotonicSeconds
  };
  struct Place {
    int bucket = 0;
    int64_t offset = 0;  // floats
    int64_t numel = 0;
    TensorId grad = kNoTensor;
  };

  void Layout(size_t bucket_bytes, bool per_layer);
  void Loop();
  // Starts queued allreduces and completes finished ones; false when idle.
  bool Progress(std::unique_lock<std::mutex>& lock);
  void AccountIteration();

  Communicator& comm_;
  const Net& net_;
  Device* device_;
  TensorStore& store_;
  std::vector<Bucket> buckets_;
  std::unordered_map<TensorId, Place> places_;               // by parameter
  std::unordered_map<int, std::vector<TensorId>> of_layer_;  // layer -> its parameters

  std::mutex mutex_;
  std::condition_variable work_;  // a bucket was queued, or stopping
  std::condition_variable done_;  // a bucket was reduced, or failed
  std::deque<int> queue_;         // buckets waiting for the thread
  std::vector<int> in_flight_;
  Status error_;
  bool stopping_ = false;
  std::thread thread_;

  double backward_begin_ = -1, backward_end_ = 0;
  ReducerStats stats_;
};

// The tensor store seen by the solver in a data-parallel run: the runtime's,
// with every parameter's solver step reading the averaged gradient.
class ReducingStore : public TensorStore {
 public:
  ReducingStore(TensorStore& base, GradientReducer& reducer, const Schedule& schedule,
                Device* device)
      : base_(base), reducer_(reducer), schedule_(schedule), device_(device) {}

  Status BeginIteration(Phase phase) override { return base_.BeginIteration(phase); }
  Status PrepareStep(const Step& step, StepRunner& runner) override {
    return base_.PrepareStep(step, runner);
  }
  void FinishStep(const Step& step) override { base_.FinishStep(step); }
  Status EndIteration() override { return base_.EndIteration(); }
  float* Data(TensorId id) override { return base_.Data(id); }
  Status ReadTensor(TensorId id, void* out) override { return base_.ReadTensor(id, out); }
  Status WriteTensor(TensorId id, const void* in) override { return base_.WriteTensor(id, in); }
  void BeginUpdate(SlotUpdate update) override;
  Status FinishUpdate() override { return base_.FinishUpdate(); }
  Workspace StepWorkspace() override { return base_.StepWorkspace(); }
  std::vector<int> StepAlgorithms() override { return base_.StepAlgorithms(); }
  bool computes() const override { return base_.computes(); }

 private:
  TensorStore& base_;
  GradientReducer& reducer_;
  const Schedule& schedule_;
  Device* device_;
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_GRADIENT_REDUCER_H_
