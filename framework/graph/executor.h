// The executor runs a network's step schedule: for each step it asks the
// tensor store to make the step's tensors available, calls the layer's
// forward or backward on views of them, and reports the step done.
//
// Random streams are derived from (seed, iteration, layer), never from a
// stateful generator, so recomputation, resumption from a checkpoint and
// every memory mode see identical dropout masks.
//
// When the store asks for slices of the batch (memory.chunk), each
// computation runs slice by slice - every sweep the layer needs over all the
// slices - on views of the batch-major tensors (activations, their
// gradients, per-image saved tensors); the layers' reductions run in image
// order, so the results are the bits of the whole-batch computation. A
// streamed step (TensorStore::StreamImages) runs the same way, with the
// store copying each slice in and out around the call and the views of its
// staged tensors in the store's staging blocks.
#ifndef SPILL_FRAMEWORK_GRAPH_EXECUTOR_H_
#define SPILL_FRAMEWORK_GRAPH_EXECUTOR_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/device/device.h"
#include "framework/graph/net.h"
#include "framework/schedule/tensor_store.h"

namespace spill {

struct LossResult {
  double loss = 0;      // mean over the batch, summed over loss layers
  int64_t correct = 0;  // top-1 hits of the first loss layer
  int64_t count = 0;    // samples (pixels, for a loss per pixel)
};

// Adds the cross-entropy (-log p[label], p floored at FLT_MIN) of `images`
// images' scores to `*loss` and their top-1 hits to `*correct`: `classes`
// scores per image, or per pixel of `pixels` (each pixel a sample, its
// scores `pixels` apart). One label per sample, each within the classes or
// `ignored` (Layer::ignored_label: left out). Returns the samples scored.
int64_t AddScoreLosses(const float* scores, const float* labels, int64_t images, int64_t classes,
                       int64_t pixels, double* loss, int64_t* correct,
                       int64_t ignored = kNoIgnoredLabel);

class Executor : public StepRunner {
 public:
  // `device` is null when planning (the store then computes nothing).
  Executor(const Net& net, Device* device, TensorStore& store);

  // One forward pass (and, for kTrain, the backward pass) over `batch`.
  // Parameter gradients are left in the store for the solver.
  StatusOr<LossResult> Run(const HostBatch& batch, Phase phase, uint64_t iteration_seed);

  Status Recompute(int layer) override;

  // Called after each backward computation of a training iteration, while
  // the step's tensors are still in place: the layer's parameter gradients
  // are complete and store.Data() reaches them (data parallelism reduces
  // them from here while backward goes on).
  using BackwardHook = std::function<void(int layer)>;
  void set_backward_hook(BackwardHook hook) { backward_hook_ = std::move(hook); }

  // Per-layer-type compute time, when profiling is on: the device's time
  // (its compute queue drained around each layer, which serialises copies
  // with compute - per-layer costs, not throughput), and the CPU seconds of
  // the whole process meanwhile (ProcessCpuSeconds).
  struct ProfileEntry {
    double forward_seconds = 0;
    double backward_seconds = 0;
    double forward_cpu_seconds = 0;
    double backward_cpu_seconds = 0;
    int64_t calls = 0;
  };
  void set_profiling(bool on) { profiling_ = on; }
  // The factor the losses' gradients carry from the next Run on
  // (BackwardArgs::loss_scale): fp16's loss scaling.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  float loss_scale() const { return loss_scale_; }
  const std::map<std::string, ProfileEntry>& profile() const { return profile_; }
  // The profile as a table: layer type, forward and backward seconds, share.
  std::string ProfileTable() const;

  // One computation as it ran, on the MonotonicSeconds clock (for traces).
  struct ComputeSpan {
    int step = -1;  // the step being run (a recomputation: the step that needed it)
    int layer = -1;
    Pass pass = Pass::kForward;
    bool recompute = false;
    double begin = 0;
    double end = 0;
  };
  // Records every computation of each Run (cleared when a Run starts).
  void set_recording(bool on) { recording_ = on; }
  const std::vector<ComputeSpan>& spans() const { return spans_; }

  // Number of forward computations rerun for recomputation so far.
  int64_t recomputations() const { return recomputations_; }

  // Stochastic depth (Layer::DroppedInput) over every Run so far: branches
  // dropped, and the forward computations skipped because of them (each
  // skipped layer's backward is skipped too).
  struct DepthStats {
    int64_t dropped_branches = 0;
    int64_t skipped_layers = 0;
  };
  const DepthStats& depth_stats() const { return depth_stats_; }
  // The layers the last Run did not compute, and the input each layer left
  // out (-1: none), by layer id.
  const std::vector<char>& skipped() const { return skipped_; }
  const std::vector<int>& dropped_inputs() const { return dropped_input_; }
  // Scores (loss layer outputs) of the last forward pass, in host memory.
  const std::vector<float>& scores() const { return scores_; }

 private:
  Status RunStep(const Step& step);
  // The random stream of `layer` in this iteration (ForwardArgs::seed).
  uint64_t LayerSeed(int layer) const;
  // Draws this iteration's dropped inputs and the layers they leave out.
  void DrawDrops();
  // The layers that reach the losses only through input `input` of `layer`.
  const std::vector<int>& Branch(int layer, int input);
  // A skipped layer's backward: zero parameter gradients, and zero input
  // gradients where it would have written the first of them.
  void ZeroGradients(int layer, const BatchSlice& slice);
  void RunForward(int layer, bool recompute);
  void RunBackward(int layer);
  void ForwardCall(int layer, bool recompute, const BatchSlice& slice);
  void BackwardCall(int layer, const BatchSlice& slice);
  // Images per slice for `pass` of `layer`; 0: the whole batch.
  int64_t SliceImages(int layer, Pass pass) const;
  // Runs `call` over every sweep and slice the layer needs in `pass`.
  template <typename Call>
  void OverSlices(int layer, Pass pass, Call call);
  // An error when slices are asked for (memory.chunk) and a layer cannot
  // compute them.
  Status CheckSlices() const;
  Tensor View(TensorId id);
  std::vector<Tensor> Views(const std::vector<TensorId>& ids);
  void ReadLoss(int layer, LossResult* result);
  // A moment on the wall clock and, when profiling, in the process's CPU
  // time; after the device's queued work, when profiling.
  struct Stamp {
    double wall = 0, cpu = 0;
  };
  Stamp Now() const;
  // Adds the span of a computation that began at `begin` and ends now.
  void Finished(int layer, Pass pass, bool recompute, const Stamp& begin);

  const Net& net_;
  Device* device_;
  TensorStore& store_;
  const HostBatch* batch_ = nullptr;
  Phase phase_ = Phase::kTrain;
  uint64_t seed_ = 0;
  int64_t recomputations_ = 0;
  std::vector<float> scores_;
  bool profiling_ = false;
  bool recording_ = false;
  float loss_scale_ = 1.0f;
  int step_ = -1;  // the step being run
  std::vector<ComputeSpan> spans_;
  std::map<std::string, ProfileEntry> profile_;
  std::vector<float> labels_;
  // The slice the views are cut to (slice_images_ 0: the whole batch), and
  // the sums a layer carries from slice to slice.
  int64_t slice_begin_ = 0;
  int64_t slice_images_ = 0;
  std::vector<double> slice_sums_;
  BackwardHook backward_hook_;
  // Stochastic depth: who reads each layer's outputs ({reader, input slot}),
  // the branches met so far, and this iteration's draw.
  std::vector<std::vector<std::pair<int, int>>> readers_;
  std::map<std::pair<int, int>, std::vector<int>> branches_;
  std::vector<int> dropped_input_;
  std::vector<char> skipped_;
  DepthStats depth_stats_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_EXECUTOR_H_
