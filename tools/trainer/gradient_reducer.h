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
// to the communication thread, which reduces it while backward goes on. The
// solver step of a parameter - wherever the store runs it: after the
// iteration, during backward, on the device or in host memory - first waits
// for its bucket and then reads the averaged gradient from it (ReducingStore
// below); on a GPU it is copied back to the device first.
//
// The reduction is spill's own, over point-to-point messages, so that its
// arithmetic is fixed: every element has an owner rank - the one whose piece
// of the parameter it is (Solver's StateShard layout, PieceOf) - and a
// bucket's reduce-scatter sends each owner the elements it owns; the owner
// adds the ranks' values in rank order, 0 + 1 + ... + (N-1), and scales the
// sum by 1/N. With distributed.zero 0 an all-gather then gives every rank
// every average (an allreduce); with zero 1 a rank keeps the averages of its
// own pieces, the only ones its solver updates. The sums are the same bits
// in both, whatever the bucket sizes, so every stage trains the same
// weights. Every rank applies the same solver arithmetic to the same result,
// so the parameters stay bit-identical across ranks.
#ifndef SPILL_TOOLS_TRAINER_GRADIENT_REDUCER_H_
#define SPILL_TOOLS_TRAINER_GRADIENT_REDUCER_H_

#include <atomic>
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
#include "framework/solver/solver.h"

namespace spill {

// Communication figures, summed over the iterations so far.
struct ReducerStats {
  int64_t iterations = 0;
  int64_t buckets = 0;          // per iteration
  double comm_seconds = 0;      // wall time some reduction was in flight
  double overlap_seconds = 0;   // of which while backward was still running
  double wait_seconds = 0;      // the training thread blocked on a bucket
  double backward_seconds = 0;  // first to last backward step
  int64_t floats_sent = 0;      // by this rank: gradients, and parameters at zero 1
  int64_t peak_host_bytes = 0;  // the reduction's buffers in host memory, at most
};

class GradientReducer {
 public:
  // `per_layer`: buckets end at every layer (updates during backward).
  // `gather`: every rank receives every average (zero 0), not only those of
  // its own pieces.
  GradientReducer(Communicator& comm, const Net& net, Device* device, TensorStore& store,
                  size_t bucket_bytes, bool per_layer, bool gather);
  ~GradientReducer();

  // The executor's backward hook: gathers `layer`'s gradients.
  void OnBackward(int layer);
  // The averaged gradient of `param` in host memory, once its bucket is
  // reduced (blocks until then): the elements `piece` of the parameter, at
  // `values` - all of them with `gather`, else this rank's piece.
  struct Reduction {
    const float* values = nullptr;
    Piece piece;
  };
  StatusOr<Reduction> Reduced(TensorId param);
  // fp16's loss scaling: waits for every bucket, multiplies the averages
  // this rank holds by `factor` (1 / the loss scale, a power of two: exact)
  // and says whether all of them were finite. Before the solver step.
  StatusOr<bool> Unscale(float factor);
  // After the iteration's solver step: every bucket was reduced and used.
  Status FinishIteration();

  const ReducerStats& stats() const { return stats_; }
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  enum class State { kFilling, kQueued, kInFlight, kDone };
  // Elements [begin, begin + count) of a bucket's data.
  struct Segment {
    int64_t begin = 0;
    int64_t count = 0;
  };
  struct Bucket {
    // The gradients as backward produced them; without `gather_` only while
    // the bucket fills and is reduced, then freed.
    std::vector<float> data;
    int64_t size = 0;             // floats of `data`
    std::vector<float> averages;  // without `gather_`: this rank's, packed
    int64_t slots = 0;            // gradients it holds
    int64_t filled = 0;           // of them, copied in this iteration
    State state = State::kFilling;
    double begin = 0, end = 0;                 // the reduction, MonotonicSeconds
    std::vector<std::vector<Segment>> owned;   // by rank: the elements it owns
    std::vector<std::vector<float>> messages;  // by rank: packed elements, reused
  };
  struct Place {
    int bucket = 0;
    int64_t offset = 0;  // floats
    int64_t numel = 0;
    TensorId grad = kNoTensor;
    Piece mine;            // this rank's piece of the parameter
    int64_t averaged = 0;  // where it starts in the bucket's `averages`
  };

  void Layout(size_t bucket_bytes, bool per_layer);
  // Which rank owns which elements of each bucket.
  void Owners();
  void Loop();
  // Reduce-scatter (and with `gather_`, all-gather) of one bucket; runs on
  // the communication thread.
  Status Reduce(int b);
  void AccountIteration();
  // Floats one bucket's buffers hold now.
  static int64_t HeldFloats(const Bucket& bucket);
  // The buffers grew or shrank by `floats`: the total and its peak.
  void Held(int64_t floats);

  Communicator& comm_;
  const Net& net_;
  Device* device_;
  TensorStore& store_;
  bool gather_;
  std::vector<Bucket> buckets_;
  std::unordered_map<TensorId, Place> places_;               // by parameter
  std::unordered_map<int, std::vector<TensorId>> of_layer_;  // layer -> its parameters

  std::mutex mutex_;
  std::condition_variable work_;  // a bucket was queued, or stopping
  std::condition_variable done_;  // a bucket was reduced, or failed
  std::deque<int> queue_;         // buckets waiting for the thread
  Status error_;
  bool stopping_ = false;
  std::thread thread_;

  std::atomic<int64_t> held_floats_{0};  // by every bucket's buffers
  std::atomic<int64_t> peak_floats_{0};
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
  bool OnDevice(TensorId id) override { return base_.OnDevice(id); }
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
