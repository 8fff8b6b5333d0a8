// MemoryRuntime: the tensor store that runs a network inside a fixed device
// memory budget.
//
// Mechanisms: one HeapPool over the device region (every byte of device
// memory goes through it), one over the host region, and the residency state
// machine, which alone moves and frees tensors. Policies decide, around each
// step, what the state machine does:
//   * baseline: every tensor is allocated once and kept;
//   * liveness: a transient tensor gets memory at its first step and gives it
//     back after its last (memory/liveness.h);
//   * offload: checkpoint tensors go to host memory during forward and come
//     back ahead of use in backward (memory/offload_policy.h);
//   * recompute: cheap layers' outputs are dropped after forward and rebuilt
//     in backward, cost-aware per segment (memory/recompute_policy.h);
//   * cache: offload and recompute become lazy - tensors leave the device
//     only when an allocation does not fit, least recently used first
//     (memory/tensor_cache.h).
// Persistent tensors (parameters, gradients, solver state) are allocated when
// the runtime is created and stay for its lifetime.
//
// Every decision is made from the schedule and the pools alone, never from
// timing: copies run asynchronously, but the runtime waits for a copy at a
// fixed point of the schedule before reusing its memory. So running it
// without a device (`plan`) yields exactly the per-step memory, transfers and
// recomputations of a real run.
#ifndef SPILL_MEMORY_RUNTIME_H_
#define SPILL_MEMORY_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "framework/device.h"
#include "framework/net.h"
#include "framework/tensor_store.h"
#include "memory/heap_pool.h"
#include "memory/liveness.h"
#include "memory/memory_log.h"
#include "memory/memory_options.h"
#include "memory/offload_policy.h"
#include "memory/recompute_policy.h"
#include "memory/residency.h"
#include "memory/tensor_cache.h"

namespace spill {

// What was live when an allocation failed.
struct OutOfMemoryInfo {
  int step = -1;
  std::string what;  // the request that failed
  size_t requested = 0;
  size_t in_use = 0;
  std::vector<TensorId> live;
};

class MemoryRuntime : public TensorStore {
 public:
  // `device` null: plan only (no memory is reserved, no kernel runs).
  static StatusOr<std::unique_ptr<MemoryRuntime>> Create(const Net& net,
                                                         const MemoryOptions& options,
                                                         Device* device);
  ~MemoryRuntime() override;

  Status BeginIteration(Phase phase) override;
  Status PrepareStep(const Step& step, StepRunner& runner) override;
  void FinishStep(const Step& step) override;
  Status EndIteration() override;
  float* Data(TensorId id) override;
  Workspace StepWorkspace() override { return workspace_; }
  std::vector<int> StepAlgorithms() override { return algorithms_; }
  bool computes() const override { return device_ != nullptr; }

  const MemoryOptions& options() const { return options_; }
  // Records of the last completed iteration.
  const MemoryLog& log() const { return log_; }
  const HeapPool& device_pool() const { return device_pool_; }
  const HeapPool& host_pool() const { return host_pool_; }
  const ResidencyManager& residency() const { return *residency_; }
  const RecomputePlan& recompute_plan() const { return recompute_; }
  // Set when a step failed with kOutOfMemory.
  const OutOfMemoryInfo& oom() const { return oom_; }
  // Highest device bytes in use at any moment since creation.
  size_t run_peak() const { return run_peak_; }
  // Forward computations rerun to rebuild dropped tensors, since creation.
  int64_t recomputations() const { return recomputations_; }

 private:
  MemoryRuntime(const Net& net, const MemoryOptions& options, Device* device);
  Status Reserve();
  void PlanPolicies();
  Status AllocatePersistent();
  Status AllocateAllTransient();
  Status Fail(const Status& status, const std::string& what, size_t bytes);
  std::vector<TensorId> LiveTransient() const;
  void Record(const Step& step);
  void RunEagerPolicies(const Step& step);
  void Release(TensorId id);
  void Drop(TensorId id);
  void Unreference(TensorId id);

  // Making tensors resident (runtime_residency.cc).
  Status EnsureOnDevice(TensorId id, StepRunner& runner);
  Status Rebuild(TensorId id, StepRunner& runner);
  void ReleaseSources(TensorId id, const std::vector<TensorId>& rebuilt);
  Status AllocateTensor(TensorId id);
  Status AllocateWorkspace(size_t bytes, const std::string& what);
  // Chooses the algorithms of `layer`'s `pass` under the free memory and
  // allocates their workspace (workspace_selector.h).
  Status ChooseWorkspace(int layer, Pass pass, std::string* choice);
  void FreeWorkspace();
  bool EvictOne();
  bool MakeRoom(size_t bytes);
  bool Evictable(TensorId id) const;
  bool Droppable(TensorId id) const;
  void Prefetch(const std::vector<TensorId>& ids);
  void Pin(TensorId id);
  void UnpinAll();

  const Net& net_;
  const Schedule& schedule_;
  MemoryOptions options_;
  Device* device_;
  void* device_base_ = nullptr;
  void* host_base_ = nullptr;
  HeapPool device_pool_;
  HeapPool host_pool_;
  std::unique_ptr<ResidencyManager> residency_;
  Liveness train_liveness_;
  Liveness eval_liveness_;
  const Liveness* liveness_ = nullptr;
  OffloadPlan offload_;
  RecomputePlan recompute_;
  TensorCache cache_;
  // Dropped tensors that will be rebuilt from each tensor; a tensor past its
  // last use stays (deferred) until none are left.
  std::vector<int> rebuild_refs_;
  std::vector<bool> holds_sources_;  // a dropped tensor counts in its sources' refs
  std::vector<bool> deferred_;
  Phase phase_ = Phase::kTrain;
  bool eager_ = false;  // this iteration offloads and drops on a schedule
  bool all_allocated_ = false;

  int step_ = -1;                 // the step being prepared or run
  std::vector<TensorId> pinned_;  // locked for the current step
  Workspace workspace_;
  AllocationId workspace_id_ = -1;
  std::vector<int> algorithms_;  // of the step (or recomputation) being run
  int64_t recomputations_ = 0;
  int capture_step_ = -1;  // step whose live tensors are listed
  size_t run_peak_ = 0;
  size_t step_to_host_ = 0, step_to_device_ = 0, step_compacted_ = 0;
  int64_t step_recomputed_ = 0;
  MemoryLog current_;
  MemoryLog log_;
  OutOfMemoryInfo oom_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_H_
