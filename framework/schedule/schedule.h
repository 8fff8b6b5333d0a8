// The step schedule: the contract between the network and the memory runtime.
//
// A training iteration is 2N steps for N layers: forward steps 0..N-1 follow
// the execution route, backward steps N..2N-1 run it in reverse (the paper
// numbers them 1..2N). Each step lists the tensors it reads and writes; a
// backward step also lists the forward tensors it needs (`saved`) and the
// gradients it adds into rather than overwrites (`accumulates`: a tensor read
// by several layers - a fan - gets one contribution per reader).
//
// Everything here is plain data computed from shapes, so the planner, the
// runtime and the tests can all read it without running anything.
#ifndef SPILL_FRAMEWORK_SCHEDULE_SCHEDULE_H_
#define SPILL_FRAMEWORK_SCHEDULE_SCHEDULE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "framework/device/tensor.h"
#include "framework/schedule/declarations.h"

namespace spill {

using TensorId = int;
constexpr TensorId kNoTensor = -1;

enum class TensorKind {
  kActivation,      // a layer output
  kAux,             // saved by a layer's forward for its own backward
  kActivationGrad,  // gradient of an activation
  kParam,           // weights, biases, BatchNorm running statistics
  kParamGrad,
  kOptimizerState,  // momentum, Adam moments
};

const char* TensorKindName(TensorKind kind);
// Activations, aux and activation gradients live and die within an iteration;
// the others persist across iterations.
bool IsTransient(TensorKind kind);

struct TensorInfo {
  std::string name;  // "conv1", "data:1", "bn1/mean", "fc/weight", "conv1.grad"
  TensorKind kind;
  Shape shape;
  size_t bytes = 0;
  int layer = -1;                  // the layer that owns it
  Layout layout = Layout::kPlain;  // activations and their gradients (framework/graph/layouts.h)
  DType dtype = DType::kF32;       // activations and their gradients (framework/graph/precision.h)
};

struct Step {
  int index = 0;
  Pass pass = Pass::kForward;
  int layer = -1;
  bool active = true;  // false: nothing to compute (input layer's backward)
  std::vector<TensorId> reads;
  std::vector<TensorId> writes;
  std::vector<TensorId> saved;        // backward: forward tensors it needs
  std::vector<TensorId> accumulates;  // backward: gradients it adds into
  size_t workspace_bytes = 0;
};

// Tensor ids of one layer, slot by slot; kNoTensor where a slot has none.
struct LayerTensors {
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::vector<TensorId> params;
  std::vector<TensorId> param_grads;  // kNoTensor for non-trainable params
  std::vector<TensorId> aux;
  std::vector<TensorId> input_grads;   // kNoTensor where no gradient flows
  std::vector<TensorId> output_grads;  // kNoTensor where an output has no gradient
  std::vector<bool> accumulate;        // per input slot, for backward
};

// A trainable parameter as a solver sees it: its weights, its gradient and
// the solver state added for it (momentum, moments; empty until a solver adds
// them).
struct ParameterSlot {
  TensorId param = kNoTensor;
  TensorId grad = kNoTensor;
  std::vector<TensorId> state;
  int layer = -1;
  // Sharded parameters (distributed.zero 3): this rank's piece of the
  // parameter, elements [master_begin, master_begin + its size), kept for
  // good and updated by the solver; `param` itself is gathered from every
  // rank's piece before each step that reads it and released after.
  // kNoTensor when the parameters are whole, or this rank holds none of it.
  TensorId master = kNoTensor;
  int64_t master_begin = 0;
};

struct Schedule {
  std::vector<TensorInfo> tensors;
  std::vector<Step> steps;
  std::vector<LayerTensors> layers;       // indexed by layer id
  std::vector<int> route;                 // forward order of layer ids
  std::vector<int> forward_step;          // layer id -> its forward step index
  std::vector<int> backward_step;         // layer id -> its backward step index
  std::vector<ParameterSlot> parameters;  // every trainable parameter, by layer id and slot

  int num_layers() const { return static_cast<int>(route.size()); }
  const Step& forward(int layer) const { return steps[forward_step[layer]]; }
  const Step& backward(int layer) const { return steps[backward_step[layer]]; }

  // Appends a persistent tensor (the solver's state) and returns its id.
  TensorId AddTensor(TensorInfo info);
  // A readable listing, one step per line.
  std::string ToString(const std::vector<std::string>& layer_names) const;
};

// What the schedule needs to know of a layer: its wiring and declarations.
struct LayerDecl {
  std::string name;
  struct Input {
    int layer;   // producer
    int output;  // producer's output slot
  };
  std::vector<Input> inputs;
  std::vector<Shape> output_shapes;
  std::vector<ParamSpec> params;
  std::vector<AuxSpec> aux;
  BackwardNeeds needs;
  std::vector<bool> propagates;  // per input: backward produces its gradient
  std::vector<bool> passes;      // per input: ... its output's gradient unchanged (may be empty)
  bool is_input = false;
  bool is_loss = false;
  size_t forward_workspace = 0;
  size_t backward_workspace = 0;
};

// Whether input i's gradient is its layer's output gradient itself (a sum's,
// shared by BuildSchedule): backward finds it in place and writes nothing.
bool SharesOutputGradient(const LayerTensors& lt, size_t input);

// Builds tensors and steps for layers run in `route` order.
Schedule BuildSchedule(const std::vector<LayerDecl>& layers, const std::vector<int>& route);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SCHEDULE_SCHEDULE_H_
