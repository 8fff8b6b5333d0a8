// MemoryRuntime: the tensor store that runs a network inside a fixed device
// memory budget.
//
// Mechanisms: an allocator over the device region (every byte of device
// memory goes through it; memory/allocators/), a HeapPool over the host
// region, and the residency state machine, which alone moves and frees
// tensors. Policies decide what the state machine does:
//   * the transfer plan (memory/transfer_plan.h), made once by a scheduler
//     (memory/schedulers/): releases after last use (liveness), offloads,
//     prefetches, drops, around each step;
//   * on demand, when a step reads a tensor that is not on the device: it is
//     brought back from the host or rebuilt by recomputation;
//   * the tensor cache, when an allocation does not fit: compaction where
//     the allocator can move blocks, then eviction of the tensor the
//     eviction rule picks (memory/eviction/), dropped when it can be
//     recomputed, offloaded otherwise;
//   * the workspace selector: the algorithms of each step under the free
//     memory left once its tensors are in place; a recomputation reruns the
//     algorithms its forward ran, so a rebuilt tensor is bit for bit the
//     original.
// Persistent tensors (parameters, gradients, solver state) are allocated when
// the runtime is created and stay for its lifetime.
//
// The runtime is an orchestrator: its state lives in parts it owns, each
// with its own file (the tensor cache and pins, deferred releases, parameter
// updates, the step's workspace, staging, the records, overdraft; see
// memory/README.md), and what its decisions do to memory goes through the
// Backing chosen when it is created (memory/backing.h): a device, or
// accounting only when planning.
//
// Every decision is made from the schedule and the pools alone, never from
// timing: copies run asynchronously, but the runtime waits for a copy at a
// fixed point of the schedule before reusing its memory. So running it
// without a device (`plan`) yields exactly the per-step memory, transfers and
// recomputations of a real run.
#ifndef SPILL_MEMORY_RUNTIME_RUNTIME_H_
#define SPILL_MEMORY_RUNTIME_RUNTIME_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/device/device.h"
#include "framework/schedule/network_view.h"
#include "framework/schedule/tensor_store.h"
#include "memory/allocators/allocator.h"
#include "memory/backing.h"
#include "memory/eviction/eviction.h"
#include "memory/heap_pool.h"
#include "memory/memory_events.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"
#include "memory/phase_plans.h"
#include "memory/residency.h"
#include "memory/runtime/chosen_workspace.h"
#include "memory/runtime/deferred_releases.h"
#include "memory/runtime/overdraft.h"
#include "memory/runtime/parameter_updates.h"
#include "memory/runtime/runtime_records.h"
#include "memory/runtime/staging.h"
#include "memory/runtime/tensor_cache.h"
#include "memory/transfer_plan.h"

namespace spill {

// A plan to run instead of the scheduler's (memory/transfer_plan.h), made
// by hand or by a planner that searches; the parameter transfers of
// memory.params are added to it as MakeTransferPlans adds them.
struct GivenPlans {
  PhasePlans plans;
  // Planning only: a request no room can be made for is placed past the
  // budget (DeviceAllocator::set_overdraft) and counted as the step's
  // overshoot, so that a plan that does not fit still plays to the end.
  bool overdraft = false;
  // A runtime's own plans, run again in a profile of its iterations: made by
  // its scheduler, with memory.params' transfers, they run as they are.
  bool complete = false;
};

class MemoryRuntime : public TensorStore {
 public:
  // `device` null: plan only (no memory is reserved, no kernel runs). The
  // view's schedule and algorithm catalog must outlive the runtime.
  // `given`: the plans to run (null: the scheduler's).
  static StatusOr<std::unique_ptr<MemoryRuntime>> Create(const NetworkView& view,
                                                         const MemoryOptions& options,
                                                         Device* device,
                                                         const GivenPlans* given = nullptr);
  ~MemoryRuntime() override;

  // Variable-length sequences: the network's sizes changed between
  // iterations (Net::SetSequenceLength), `view` the network's new view of the
  // same schedule. The plans are those made before for these sizes, or made
  // now - a re-plan, counted; tensors kept from one iteration to the next
  // (without liveness) are given back, to be placed again at their new
  // sizes. The allocator is told nothing: a profile-guided one serves a
  // smaller request in its profiled slot and profiles again when one is
  // larger (its mismatches). Plans given at creation hold for their sizes
  // only: another size is an error.
  Status Reshape(const NetworkView& view);
  // Plans made for sizes not seen before, since creation (not counting the
  // first).
  int64_t replans() const { return replans_; }

  Status BeginIteration(Phase phase) override;
  Status PrepareStep(const Step& step, StepRunner& runner) override;
  void FinishStep(const Step& step) override;
  Status EndIteration() override;
  float* Data(TensorId id) override;
  Status ReadTensor(TensorId id, void* out) override;
  Status WriteTensor(TensorId id, const void* in) override;
  void BeginUpdate(SlotUpdate update) override;
  Status FinishUpdate() override;
  bool OnDevice(TensorId id) override { return residency_->on_device(id); }
  Workspace StepWorkspace() override { return workspace_.workspace(); }
  std::vector<int> StepAlgorithms() override { return workspace_.algorithms(); }
  bool computes() const override { return backing_->computes(); }
  int64_t BatchChunk() const override {
    return options_.batch_chunk > 0 ? options_.batch_chunk : 0;
  }
  bool ImageOrder() const override {
    return options_.workspace.kind == WorkspacePolicy::Kind::kPin;
  }
  // Streamed steps (runtime_streaming.cc).
  int64_t StreamImages() const override { return staging_.images(); }
  void BeginSlice(int64_t begin, int64_t images, bool last_sweep) override;
  void EndSlice(int64_t begin, int64_t images, bool last_sweep) override;
  float* StagedData(TensorId id) override;

  // Sharded parameters (memory.params_gathered): who gathers a parameter
  // from every rank's piece. The runtime calls Begin and Finish at the same
  // points of the same plan on every rank; without one (planning) a
  // parameter gets its memory alone.
  class ParameterGatherer {
   public:
    virtual ~ParameterGatherer() = default;
    // Starts gathering `param` (kGather, ahead of the step that reads it):
    // the ranks' collectives run in the order of these calls.
    virtual void Begin(TensorId param) = 0;
    // Waits for `param`'s gather and copies it into device memory `data`
    // (null: the step that would read it did not run; the values go
    // unused). Every Begin has one Finish.
    virtual Status Finish(TensorId param, float* data) = 0;
  };
  void set_parameter_gatherer(ParameterGatherer* gatherer) { gatherer_ = gatherer; }

  const MemoryOptions& options() const { return options_; }
  const NetworkView& view() const { return view_; }
  // Records of the last completed iteration.
  const MemoryLog& log() const { return records_.log(); }
  const DeviceAllocator& allocator() const { return *allocator_; }
  const HeapPool& host_pool() const { return host_pool_; }
  const ResidencyManager& residency() const { return *residency_; }
  const PhasePlans& plans() const { return plans_; }
  // Events of the last completed iteration (with options.record_events).
  const std::vector<MemoryEvent>& events() const { return records_.events(); }
  // Timestamps every recorded event with `clock` (timelines of real runs).
  void set_event_clock(std::function<double()> clock) { log_events_.set_clock(std::move(clock)); }
  // Set when a step failed with kOutOfMemory.
  const OutOfMemoryInfo& oom() const { return records_.oom(); }
  // Highest device bytes in use at any moment since creation.
  size_t run_peak() const { return records_.run_peak(); }
  // Forward computations rerun to rebuild dropped tensors, since creation.
  int64_t recomputations() const { return records_.recomputations(); }

 private:
  // `host_memory`: whether anything goes to host memory (the host pool
  // gets memory.host_budget, else nothing).
  MemoryRuntime(const NetworkView& view, const MemoryOptions& options,
                std::unique_ptr<Backing> backing, bool host_memory);
  Status Reserve();
  Status PlanPolicies(const GivenPlans* given);
  Status AllocatePersistent();
  Status AllocateAllTransient();
  Status Fail(const Status& status, const std::string& what, size_t bytes);
  // `allocate` run past the budget (memory/runtime/overdraft.h), when that may be.
  Status Overdraw(const std::function<Status()>& allocate);
  std::vector<TensorId> LiveTransient() const;
  void Record(const Step& step);
  Status RunActions(const std::vector<TransferAction>& actions, StepRunner* runner);
  // Every tensor of the step whole on the device, and its workspace.
  Status PrepareOnDevice(const Step& step, StepRunner& runner, std::string* choice);
  // A tensor the step writes: device memory for it (pinned).
  Status PrepareWrite(TensorId id);
  void RunAfterStep(const TransferAction& action);
  void Release(TensorId id);
  // Release's frees, once the tensor's sources are unreferenced.
  void FreeReleased(TensorId id);
  void Retire(TensorId id);
  void Drop(TensorId id);
  void Unreference(TensorId id);

  // Streamed steps (runtime_streaming.cc): a step whose tensors do not fit
  // keeps its batch-major tensors in host memory and computes the batch in
  // slices through staging blocks.
  bool BatchMajor(TensorId id) const;
  bool CanStream(const Step& step) const;
  // Whether `step` could stream at all, whoever decides it (memory.chunk
  // aside): liveness, host memory, a computing step of a layer that
  // computes in slices, a tensor over the batch.
  bool Streamable(const Step& step) const;
  // The step's transient tensors alone exceed the memory the persistent ones
  // leave: no point in trying it whole.
  bool MustStream(const Step& step) const;
  // Whether the plan's streaming of `step` can run (an error naming it).
  Status CheckPlannedStream(const Step& step) const;
  Status PrepareStreamed(const Step& step, StepRunner& runner, std::string* choice);
  Status StageRead(TensorId id, bool accumulated, StepRunner& runner);
  Status StageWrite(TensorId id);
  // The tensor's value in host memory alone (rebuilt first if dropped).
  Status MoveToHost(TensorId id, StepRunner& runner);
  // Staging blocks for the largest slice that fits (memory.chunk: auto) or
  // for the configured one, then the step's workspace.
  // `recompute`: the layer's forward rerun, in the workspace and algorithms
  // its forward step had.
  Status AllocateStaging(int layer, Pass pass, bool recompute, std::string* choice);
  int Sweeps(int layer, Pass pass) const;
  // Records the step's copies in and out (all its slices, `sweeps` sweeps).
  void CountStaged(int sweeps);
  bool CanStreamRebuild(int layer) const;
  // Recomputes `layer` streamed: its outputs end in host memory.
  Status RebuildStreamed(int layer, StepRunner& runner);
  // Staging blocks of `buffers` slices of `images` images each.
  Status TryStaging(int64_t images, int buffers);
  int64_t AutoStreamImages(size_t image_bytes) const;
  void FinishStreamed();
  // A compute event of a streamed step: its slices and buffers.
  void NoteSlices(MemoryEvent* e) const;

  // Making tensors resident (runtime_residency.cc).
  Status EnsureOnDevice(TensorId id, StepRunner& runner);
  // A sharded parameter on the device, from every rank's piece: the
  // gather begun ahead (kGather), or begun now.
  Status Gather(TensorId id);
  void BeginGather(TensorId id);
  // Gathers begun for steps that did not run (a dropped branch's layers).
  Status FinishUnusedGathers();
  // A collective's event: what this rank sends or receives of `bytes`.
  MemoryEvent RankShare(MemoryEventType type, TensorId id, size_t bytes) const;
  Status Rebuild(TensorId id, StepRunner& runner);
  struct RebuildFrame;
  RebuildFrame StartRebuild(TensorId id) const;
  Status FinishRebuild(const RebuildFrame& f, const Status& on_device, StepRunner& runner);
  // Device memory for a rebuilt layer's outputs, listing those placed here
  // with the state each had.
  Status PlaceOutputs(const LayerTensors& lt, std::vector<std::pair<TensorId, Residency>>* placed);
  Status RecomputeOnDevice(const RebuildFrame& f, StepRunner& runner);
  Status RecomputeLayer(int layer, StepRunner& runner);
  Status AsideFromStep(const std::function<Status()>& body);
  void CountRecomputation(int layer);
  void ReleaseSources(TensorId id, const std::vector<TensorId>& rebuilt);
  Status AllocateTensor(TensorId id);
  // A tensor the step overwrites: a device block (its host copy, if any,
  // stops being current).
  Status AllocateForWrite(TensorId id);
  // Both: `allocate` retried while the cache can make room.
  Status AllocateWithRoom(TensorId id, const std::function<Status()>& allocate);
  // Whether the tensor cache manages the tensor (transient ones, and
  // persistent ones with memory.params: cache).
  bool Cached(TensorId id) const;
  // The solver step of parameter slot `slot` (Schedule::parameters) where
  // the plan says: kUpdate after its layer's backward.
  void ApplyUpdate(int slot);
  // The same on the device, for a slot not updated during the iteration.
  Status UpdateOnDevice(int slot);
  void UpdateInHostMemory(int slot);
  Status AllocateWorkspace(size_t bytes, const std::string& what);
  // Chooses the algorithms of `layer`'s `pass` under the free memory and
  // allocates their workspace (workspace_selector.h), for calls of `images`
  // images (the batch, or a streamed step's slices).
  Status ChooseWorkspace(int layer, Pass pass, int64_t images, std::string* choice);
  // Allocates the workspace of `layer`'s forward as its forward step chose
  // it (for a recomputation), or chooses anew when it never ran.
  Status ReuseForwardWorkspace(int layer, int64_t images);
  // The candidates of an operation for calls of `images` images; when the
  // batch does not divide by it, each workspace is also enough for the
  // last, smaller slice.
  std::vector<AlgorithmCandidate> CandidatesFor(int layer, Pass pass, int op, int64_t images) const;
  void FreeWorkspace();
  bool EvictOne();
  bool MakeRoom(size_t bytes);
  bool Evictable(TensorId id) const;
  bool Droppable(TensorId id) const;
  // Every tensor `id` is rebuilt from still holds its data (or can be rebuilt).
  bool SourcesKept(TensorId id) const;
  // A rebuilt tensor of a memory-centric segment: dropped again after use.
  bool MemoryCentric(TensorId id) const;
  // False when `id` is on the host and there is no room for it.
  bool Prefetch(TensorId id);
  // Gives back the device block of the oldest lazily released offload still
  // in flight; false when there is none.
  bool FinishOldestLazyOffload();
  void Pin(TensorId id);
  void UnpinAll();
  const RecomputePlan& recompute() const { return plans_.train.recompute; }
  // The plan of the current phase.
  const TransferPlan& plan() const { return phase_ == Phase::kTrain ? plans_.train : plans_.eval; }

  // The schedule's sizes, one per tensor: what a plan was made for.
  std::vector<size_t> Sizes() const;

  NetworkView view_;
  const Schedule& schedule_;
  MemoryOptions options_;
  std::unique_ptr<DeviceAllocator> allocator_;
  HeapPool host_pool_;
  // Releases its regions through the allocator: declared after it.
  std::unique_ptr<Backing> backing_;
  std::unique_ptr<ResidencyManager> residency_;
  PhasePlans plans_;
  std::unique_ptr<EvictionPolicy> eviction_;
  TensorCache cache_;  // with the pins of the step being prepared or run
  MemoryEventLog log_events_;
  ParameterUpdates params_;
  ParameterGatherer* gatherer_ = nullptr;
  // Sharded parameters whose gather has begun and not yet finished.
  std::vector<TensorId> gathering_;
  DeferredReleases releases_;
  ChosenWorkspace workspace_;
  Staging staging_;
  RuntimeRecords records_;
  Overdraft overdraft_;
  Phase phase_ = Phase::kTrain;
  int step_ = -1;  // the step being prepared or run
  // Plans by the sizes they were made for (Reshape); empty with given plans.
  std::map<std::vector<size_t>, PhasePlans> plans_by_size_;
  bool given_plans_ = false;
  std::vector<size_t> given_sizes_;
  int64_t replans_ = 0;
  // Without liveness every transient tensor is allocated once, before the
  // first iteration's steps, and kept.
  enum class AllTransient { kNotYet, kAllocating, kAllocated };
  AllTransient all_transient_ = AllTransient::kNotYet;
};

// One iteration of `phase` as the executor runs it, without computing: the
// runtime's every decision on its backing (the planning backing makes no
// device call), the solver step's moves included. What planning and
// profiling run (memory/runtime/runtime_without_device.cc); `recomputations` counts
// the rebuilds the runtime asked for.
Status RunWithoutDevice(MemoryRuntime& runtime, Phase phase, int64_t* recomputations);

// The device requests of the first iteration of `phase` in a fresh runtime
// under the accounting-only `ideal` allocator at `budget`: the decisions
// (evictions, algorithms) a placement must then reproduce. The iteration
// runs `plans` (a runtime's own, memory.params' transfers included), or
// when null the scheduler's plans for `budget`. Profile-guided allocators
// are handed it through AllocatorContext::profiler.
StatusOr<AllocationProfile> ProfileAllocations(const NetworkView& view, MemoryOptions options,
                                               Phase phase, size_t budget,
                                               const PhasePlans* plans = nullptr);

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_RUNTIME_H_
