// TensorStore: what the executor asks of the memory runtime (memory/).
//
// The executor walks the step schedule; around each step it asks the store to
// make the step's tensors available and afterwards tells it the step is done.
// Where bytes live in between - device, host, nowhere (dropped for
// recomputation) - is the store's business alone.
#ifndef SPILL_FRAMEWORK_TENSOR_STORE_H_
#define SPILL_FRAMEWORK_TENSOR_STORE_H_

#include "framework/declarations.h"
#include "framework/schedule.h"
#include "framework/status.h"

namespace spill {

// Implemented by the executor: lets the store rebuild a dropped tensor by
// rerunning its layer's forward.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Reruns `layer`'s forward with recompute semantics. The store has made
  // its inputs, params and aux resident and allocated its outputs.
  virtual Status Recompute(int layer) = 0;
};

class TensorStore {
 public:
  virtual ~TensorStore() = default;

  virtual Status BeginIteration(Phase phase) = 0;
  // After this, every tensor `step` reads is on the device and will stay there
  // until FinishStep, every tensor it writes has device memory, and the
  // step's workspace is reserved. May rebuild dropped tensors via `runner`.
  virtual Status PrepareStep(const Step& step, StepRunner& runner) = 0;
  virtual void FinishStep(const Step& step) = 0;
  virtual Status EndIteration() = 0;

  // Device address of a tensor that is resident now (persistent tensors
  // always are; transient ones between PrepareStep and FinishStep).
  virtual float* Data(TensorId id) = 0;
  virtual Workspace StepWorkspace() = 0;
  // The algorithm chosen for each of the step's operations (may be empty).
  virtual std::vector<int> StepAlgorithms() = 0;
  // False when planning: no memory exists and no kernel may run.
  virtual bool computes() const = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_TENSOR_STORE_H_
