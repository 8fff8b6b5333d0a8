// TensorStore: what the executor asks of the memory runtime (memory/).
//
// The executor walks the step schedule; around each step it asks the store to
// make the step's tensors available and afterwards tells it the step is done.
// Where bytes live in between - device, host, nowhere (dropped for
// recomputation) - is the store's business alone.
#ifndef SPILL_FRAMEWORK_SCHEDULE_TENSOR_STORE_H_
#define SPILL_FRAMEWORK_SCHEDULE_TENSOR_STORE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "framework/base/status.h"
#include "framework/schedule/declarations.h"
#include "framework/schedule/schedule.h"

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

// A solver step for one parameter. The pointers are all in device memory
// (`host` false: enqueue the arithmetic on the device's compute queue) or all
// in host memory (`host` true: compute it on the calling thread).
using SlotUpdate = std::function<void(const ParameterSlot& slot, float* w, const float* g,
                                      const std::vector<float*>& state, bool host)>;

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

  // Device address of a tensor that is on the device now (transient ones
  // between PrepareStep and FinishStep; persistent ones unless the memory
  // policy keeps them in host memory).
  virtual float* Data(TensorId id) = 0;
  // Whether `id` is on the device now (so that Data may be asked for it).
  virtual bool OnDevice(TensorId id) { return true; }
  // Copies a tensor's bytes out of, or into, wherever it lives now - device
  // or host memory - once the copies in flight that concern it are done.
  // Writing replaces every copy. For parameters, gradients, solver state and
  // results; an error when the tensor holds no data.
  virtual Status ReadTensor(TensorId id, void* out) = 0;
  virtual Status WriteTensor(TensorId id, const void* in) = 0;

  // The solver step of one training iteration. `update` is applied to every
  // trainable parameter (Schedule::parameters) exactly once, where the
  // parameter lives and as early as the memory policy allows - when
  // parameters live in host memory, during the iteration's backward pass,
  // as soon as a layer's gradient is complete - and at the latest in
  // FinishUpdate. BeginUpdate goes before the iteration's steps, FinishUpdate
  // after them.
  virtual void BeginUpdate(SlotUpdate update) = 0;
  virtual Status FinishUpdate() = 0;
  virtual Workspace StepWorkspace() = 0;
  // The algorithm chosen for each of the step's operations (may be empty).
  virtual std::vector<int> StepAlgorithms() = 0;
  // Images per slice of the batch a step computes at a time (memory.chunk);
  // 0: the whole batch at once.
  virtual int64_t BatchChunk() const { return 0; }
  // Whether layers reduce over the batch image by image even when a step
  // computes the whole batch at once (a convolution algorithm is pinned), so
  // that slices give the same bits; otherwise the fastest order.
  virtual bool ImageOrder() const { return false; }

  // Streamed steps: a step whose tensors do not fit the device at once keeps
  // its batch-major tensors in host memory and computes slices of the batch,
  // each brought into staging blocks on the device and its results sent back
  // (memory.chunk). Images per slice of the step being prepared and run; 0:
  // the step is not streamed.
  virtual int64_t StreamImages() const { return 0; }
  // Around each call of a streamed step: the slice's staged inputs are copied
  // in before it, its outputs out after it. `last_sweep`: the call writes
  // the step's outputs (Layer::slice_sweeps; gradients added into are then
  // also brought in).
  virtual void BeginSlice(int64_t begin, int64_t images, bool last_sweep) {}
  virtual void EndSlice(int64_t begin, int64_t images, bool last_sweep) {}
  // The device address of the current slice of a tensor the streamed step
  // stages; null for the step's other tensors (they are whole on the device).
  virtual float* StagedData(TensorId id) { return nullptr; }
  // False when planning: no memory exists and no kernel may run.
  virtual bool computes() const = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SCHEDULE_TENSOR_STORE_H_
