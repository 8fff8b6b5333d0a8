// NetworkView: all the memory runtime (memory/) knows of a network - its step
// schedule, a summary of each layer, and the algorithms each operation can
// be computed with - and nothing more. No layer code, no network format, no
// device: memory/ plans and runs from this view, and its tests build views
// from hand-written schedules.
#ifndef SPILL_FRAMEWORK_SCHEDULE_NETWORK_VIEW_H_
#define SPILL_FRAMEWORK_SCHEDULE_NETWORK_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/schedule/declarations.h"
#include "framework/schedule/schedule.h"

namespace spill {

// What a memory policy may know of one layer besides its tensors.
struct LayerSummary {
  std::string name;
  std::string type;  // registered layer type: "convolution", "relu", ...
  LayerCost cost = LayerCost::kCheap;
  bool is_loss = false;
  bool is_input = false;
  MemoryTraits traits;  // Layer::memory_traits
  // Work of each pass, for time models (memory/sim/).
  LayerWork forward_work;
  LayerWork backward_work;
  // Batch slices (Layer::slice_sweeps, supports_slices): whether the layer
  // computes slices of the batch, and the sweeps each pass makes over them.
  bool slices = false;
  int forward_sweeps = 1;
  int backward_sweeps = 1;
};

// The algorithms each operation of a layer can run with (convolution: one
// operation forward, two backward). Candidates may change while a program
// runs (timings measured once per shape), so they are asked for per step,
// for calls of `images` images (the batch, or a streamed step's slice:
// Layer::algorithm_candidates).
class AlgorithmCatalog {
 public:
  virtual ~AlgorithmCatalog() = default;
  virtual int NumOps(int layer, Pass pass) const = 0;
  virtual std::vector<AlgorithmCandidate> Candidates(int layer, Pass pass, int op,
                                                     int64_t images) const = 0;
  // Images per call of `pass` of `layer` when the step is not streamed (0:
  // the batch in one call): a network in 16 bits computes its larger steps
  // in slices, so that the float32 copies of their tensors stay a fraction
  // of them (framework/graph/precision.h).
  virtual int64_t SliceImages(int layer, Pass pass) const { return 0; }
  // The workspace of a step with no operations for calls of `images`
  // images; `whole` is its declared one, the batch's (Step::workspace_bytes).
  virtual size_t FixedWorkspace(int layer, Pass pass, int64_t images, size_t whole) const {
    return whole;
  }
};

struct NetworkView {
  const Schedule* schedule = nullptr;
  std::vector<LayerSummary> layers;              // indexed by layer id
  const AlgorithmCatalog* algorithms = nullptr;  // null: every step uses its declared workspace
  int64_t batch = 0;

  const LayerSummary& layer(int id) const { return layers[id]; }
  // The images of each call of a step that is not streamed: the catalog's
  // slice, or the batch.
  int64_t StepImages(int layer, Pass pass) const {
    const int64_t slice = algorithms ? algorithms->SliceImages(layer, pass) : 0;
    return slice > 0 ? slice : batch;
  }
  // The workspace of `step` (no operations) for calls of `images` images.
  size_t FixedWorkspace(const Step& step, int64_t images) const {
    return algorithms
               ? algorithms->FixedWorkspace(step.layer, step.pass, images, step.workspace_bytes)
               : step.workspace_bytes;
  }
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SCHEDULE_NETWORK_VIEW_H_
