// MemoryRuntime: the tensor store that runs a network inside a fixed device
// memory budget.
//
// Mechanisms: one HeapPool over the device region (every byte of device
// memory goes through it), one over the host region, and the residency state
// machine, which alone moves and frees tensors. Policies decide, around each
// step, what the state machine does:
//   * baseline: every tensor is allocated once and kept;
//   * liveness: a transient tensor gets memory at its first step and gives it
//     back after its last (memory/liveness.h).
// Persistent tensors (parameters, gradients, solver state) are allocated when
// the runtime is created and stay for its lifetime.
//
// The runtime makes every decision from the schedule and the pools alone,
// never from timing, so running it without a device (`plan`) yields exactly
// the per-step memory of a real run.
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
#include "memory/residency.h"

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
  bool computes() const override { return device_ != nullptr; }

  const MemoryOptions& options() const { return options_; }
  // Records of the last completed iteration.
  const MemoryLog& log() const { return log_; }
  const HeapPool& device_pool() const { return device_pool_; }
  const HeapPool& host_pool() const { return host_pool_; }
  const ResidencyManager& residency() const { return *residency_; }
  // Set when a step failed with kOutOfMemory.
  const OutOfMemoryInfo& oom() const { return oom_; }
  // Highest device bytes in use at any moment since creation.
  size_t run_peak() const { return run_peak_; }

 private:
  MemoryRuntime(const Net& net, const MemoryOptions& options, Device* device);
  Status Reserve();
  Status AllocatePersistent();
  Status AllocateAllTransient();
  Status Allocate(TensorId id, int step);
  Status AllocateWorkspace(const Step& step);
  Status Fail(const Status& status, int step, const std::string& what, size_t bytes);
  std::vector<TensorId> LiveTransient() const;
  void Record(const Step& step);

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
  Phase phase_ = Phase::kTrain;
  bool all_allocated_ = false;

  Workspace workspace_;
  AllocationId workspace_id_ = -1;
  int capture_step_ = -1;  // step whose live tensors are listed
  size_t run_peak_ = 0;
  MemoryLog current_;
  MemoryLog log_;
  OutOfMemoryInfo oom_;
};

}  // namespace spill

#endif  // SPILL_MEMORY_RUNTIME_H_
