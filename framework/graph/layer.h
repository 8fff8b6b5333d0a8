// The layer contract.
//
// A layer has two halves. The declarations depend on shapes alone and are
// what the planner reads: output shapes, parameters, the tensors backward
// needs (inputs, outputs, neither), saved auxiliary tensors, whether the
// layer is a checkpoint (compute-heavy: convolution, fully connected) or
// cheap to recompute, and its workspace. The compute half runs per device:
// each layer type has a device-independent class with the declarations, and
// one subclass per device (layers/cpu/, layers/cuda/) that registers itself.
//
// Compute sees only Tensor views; the memory runtime decides where they live.
// Forward must be deterministic: recomputation in backward reruns it and must
// reproduce the output bit for bit. A recomputing forward (`recompute`) must
// not update state (BatchNorm running statistics) and must reuse saved masks.
#ifndef SPILL_FRAMEWORK_GRAPH_LAYER_H_
#define SPILL_FRAMEWORK_GRAPH_LAYER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "framework/base/source_location.h"
#include "framework/base/status.h"
#include "framework/device/device.h"
#include "framework/device/tensor.h"
#include "framework/graph/layouts.h"
#include "framework/schedule/declarations.h"

namespace spill {

// A layer is built from its entry in a network file (framework/config/net_spec.h)
// through the typed reader of its keys (framework/config/layer_params.h); neither
// is needed to declare or run one, so layers do not see the YAML types.
struct LayerSpec;
class LayerParams;

// Layer::ignored_label of a loss that scores every sample.
constexpr int64_t kNoIgnoredLabel = std::numeric_limits<int64_t>::min();

// One batch in host memory, consumed by input layers.
struct HostBatch {
  const float* images = nullptr;  // N x C x H x W
  const float* labels = nullptr;  // N class indices
};

// A slice of the batch that one call computes (`memory.chunk`): images
// [begin, begin + n) of a batch of `batch`, n the leading extent of the
// batch-major tensors in the args, which are views of the slice. A layer
// whose result reduces over the batch adds each image's contribution in image
// order and carries what must survive from slice to slice in `sums` (zeroed
// before a step's first slice), so a step run slice by slice gives the bits
// of the step run over the whole batch. A layer that needs several sweeps
// over the batch (batch norm: statistics, then normalization) is called for
// every slice of sweep 0, then of sweep 1, and so on. The default is the
// whole batch in one call doing every sweep.
struct BatchSlice {
  int64_t begin = 0;
  int64_t batch = 0;       // images in the whole batch; 0: this call is the whole batch
  int sweep = -1;          // which of the layer's sweeps (Layer::slice_sweeps); -1: all
  double* sums = nullptr;  // Layer::slice_sums doubles; null when the call is the whole batch
  // Reduce image by image even over the whole batch (TensorStore::ImageOrder;
  // always so over slices): layers with a faster order for the whole batch
  // (fully connected: a GEMM) use it only when this is false.
  bool image_order = false;

  bool sliced() const { return batch != 0; }
  bool in_image_order() const { return sliced() || image_order; }
  bool first() const { return begin == 0; }
  bool last(int64_t n) const { return batch == 0 || begin + n == batch; }
  int64_t total(int64_t n) const { return batch == 0 ? n : batch; }
  bool runs(int s) const { return sweep < 0 || sweep == s; }
};

// The carried sums of a slice, or `local` (zeroed, `count` long) when the
// call is the whole batch.
inline double* SliceSums(const BatchSlice& slice, size_t count, std::vector<double>* local) {
  if (slice.sums != nullptr) return slice.sums;
  local->assign(count, 0.0);
  return local->data();
}

struct ForwardArgs {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<Tensor> params;
  std::vector<Tensor> aux;
  Workspace workspace;
  Phase phase = Phase::kTrain;
  bool recompute = false;  // rebuilding a dropped output during backward
  uint64_t seed = 0;       // random stream of this layer in this iteration
  const HostBatch* batch = nullptr;
  Device* device = nullptr;
  // Chosen candidate per operation (see Layer::algorithm_candidates);
  // empty: the layer's default.
  std::vector<int> algorithms;
  BatchSlice slice;
};

struct BackwardArgs {
  std::vector<Tensor> inputs;        // valid where backward_needs().inputs[i]
  std::vector<Tensor> outputs;       // valid where backward_needs().outputs
  std::vector<Tensor> output_grads;  // invalid where an output has no gradient
  std::vector<Tensor> input_grads;   // invalid where no gradient is wanted
  std::vector<bool> accumulate;      // per input: add into input_grads[i]
  std::vector<Tensor> params;
  std::vector<Tensor> param_grads;  // one per param; invalid for non-trainable ones
  std::vector<Tensor> aux;
  Workspace workspace;
  Device* device = nullptr;
  std::vector<int> algorithms;  // as in ForwardArgs
  int dropped_input = -1;       // Layer::DroppedInput of this iteration
  // Parameter gradients are overwritten by the first slice and added into
  // by the others (slice.first()).
  BatchSlice slice;
  // The factor losses multiply their gradients by (fp16's loss scale, a
  // power of two, so the scaled gradient is the unscaled one exactly times
  // it); 1 otherwise.
  float loss_scale = 1.0f;
};

// Elements of all the shapes together (for work estimates).
double TotalElements(const std::vector<Shape>& shapes);

class Layer {
 public:
  virtual ~Layer() = default;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const SourceLocation& where() const { return where_; }
  void SetIdentity(const LayerSpec& spec);
  // The batch size, set by the network before Reshape.
  void set_batch(int64_t batch) { batch_ = batch; }
  int64_t batch() const { return batch_; }
  // Which inputs backward must produce a gradient for (Caffe's
  // propagate_down), set by the network once the schedule is known.
  void set_propagate_down(std::vector<bool> flags) { propagate_down_ = std::move(flags); }
  bool propagate_down(int input) const {
    return input < static_cast<int>(propagate_down_.size()) ? propagate_down_[input] : true;
  }

  // The layouts this implementation computes in (framework/graph/layouts.h), and
  // the ones the network chose, set before workspaces and candidates are
  // read. Tensors arrive in these layouts (Tensor::layout()).
  virtual LayoutRule layout_rule() const { return LayoutRule::kPlain; }
  // Under a kFree rule: the layout it would have activations stored as
  // `activations` leave plain in, where the network pins none
  // (NetOptions::layout).
  virtual Layout preferred_layout(DType activations) const {
    (void)activations;
    return Layout::kBlocked16;
  }
  void set_layouts(std::vector<Layout> inputs, std::vector<Layout> outputs) {
    input_layouts_ = std::move(inputs);
    output_layouts_ = std::move(outputs);
  }
  Layout input_layout(int i) const { return LayoutAt(input_layouts_, i); }
  Layout output_layout(int i) const { return LayoutAt(output_layouts_, i); }

  // The storage types of the inputs and outputs (and of their gradients),
  // set by the network with the precision (framework/graph/precision.h),
  // before workspaces and candidates are read; float32 until then.
  void set_dtypes(std::vector<DType> inputs, std::vector<DType> outputs) {
    input_dtypes_ = std::move(inputs);
    output_dtypes_ = std::move(outputs);
    DtypesChanged();
  }
  DType input_dtype(int i) const { return DTypeAt(input_dtypes_, i); }
  DType output_dtype(int i) const { return DTypeAt(output_dtypes_, i); }

  // ---- Declarations: from shapes alone ----
  virtual int min_inputs() const { return 1; }
  virtual int max_inputs() const { return 1; }
  virtual int num_outputs() const { return 1; }
  // Loss layers read the labels; when the file names only the scores, the
  // network wires the labels of its input layer in as the last input.
  virtual bool wants_labels() const { return false; }
  virtual bool is_loss() const { return false; }
  // A loss's label that marks samples to leave out (the padding of
  // sequences of different lengths), or kNoIgnoredLabel: they add nothing to
  // the loss, its gradient or the accuracy, and the mean is over the rest.
  virtual int64_t ignored_label() const { return kNoIgnoredLabel; }
  virtual bool is_input() const { return false; }
  // Whether input `input` holds indices (an embedding's ids): exact numbers
  // that must not be rounded to 16 bits (framework/graph/precision.h). A
  // loss's labels always are.
  virtual bool reads_indices(int input) const { return false; }
  // Input layers: the length of the sequences the next batches carry (the
  // last dimension of `shape`, spill's time axis, N x C x 1 x T), set
  // before the network reshapes again (Net::SetSequenceLength).
  virtual Status SetSequenceLength(int64_t length) {
    return InvalidArgument("layer '" + name_ + "' (" + type_ + ") takes no sequence length");
  }
  // Whether backward produces a gradient for input i (not for labels).
  virtual bool propagates_to(int input) const { return true; }
  // Whether backward hands input i its output's gradient unchanged (a sum's
  // inputs). The schedule may then give both gradients one tensor
  // (BuildSchedule), and backward finds input_grads[i] holding output_grads[0]
  // already: the same storage, nothing to copy.
  virtual bool passes_gradient_to(int input) const { return false; }
  // Stochastic depth: the input this layer leaves out of an iteration, or
  // -1 (`seed` is the layer's random stream, ForwardArgs::seed). The
  // executor then computes none of the layers that reach the losses only
  // through that input: their parameter gradients are zeros and the input
  // gradients they would have added are left out. The memory plan does not
  // change - it holds every layer's tensors, so every drawn pattern runs in
  // it. The layer itself gives the left-out input a zero gradient.
  virtual int DroppedInput(Phase phase, uint64_t seed) const { return -1; }
  // The probability that DroppedInput leaves an input out of a training
  // iteration.
  virtual double drop_probability() const { return 0; }

  // Validates input shapes and computes output shapes. Called once, in route
  // order, before any other declaration is read.
  virtual Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) = 0;
  virtual std::vector<ParamSpec> params() const { return {}; }
  virtual std::vector<AuxSpec> aux() const { return {}; }
  virtual BackwardNeeds backward_needs() const = 0;
  virtual LayerCost cost() const = 0;
  // What the memory policies may know of its outputs (declarations.h).
  virtual MemoryTraits memory_traits() const { return {}; }
  // Workspace of the layer's default algorithms.
  virtual size_t workspace_bytes(Pass pass) const { return 0; }
  // Layers whose operations can be computed several ways (convolution: one
  // operation forward, two backward) list the candidates of each; the
  // runtime chooses per step and passes the choice in the args. The
  // workspace of a pass is the largest among its chosen candidates.
  // `images` is how many images one call computes: the batch, or the slice
  // of a streamed step (memory.chunk), whose workspace may be smaller. The
  // seconds are the whole batch's either way (a step's slices add up to it).
  virtual int num_algorithm_ops(Pass pass) const { return 0; }
  virtual std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op,
                                                               int64_t images) const {
    return {};
  }
  // The work of a pass over these input and output shapes (the ones Reshape
  // saw). The default is an elementwise layer: one operation per output
  // element; forward reads the inputs and writes the outputs, backward
  // reads the outputs and their gradients and writes the input gradients.
  virtual LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                         const std::vector<Shape>& outputs) const;

  // Whether this implementation's `pass` takes activations and their
  // gradients stored in 16 bits as they are (Tensor::dtype), converting as
  // it computes (or into copies it counts in its own workspace); otherwise
  // the executor hands it float32 copies (framework/graph/precision.h).
  virtual bool computes_16_bit(Pass pass) const { return false; }

  // Batch slicing (`memory.chunk`, see BatchSlice): the sweeps a pass makes
  // over the slices, the doubles it carries between them, and whether this
  // implementation computes slices at all (every CPU layer does).
  virtual int slice_sweeps(Pass pass) const { return 1; }
  virtual size_t slice_sums(Pass pass) const { return 0; }
  virtual bool supports_slices() const { return false; }

  // ---- Compute: per device. Const: all state lives in the tensors. ----
  virtual void Forward(const ForwardArgs& args) const = 0;
  virtual void Backward(const BackwardArgs& args) const = 0;

 protected:
  // Called by set_dtypes: implementations whose choices depend on the
  // storage types (convolution algorithms) make them again.
  virtual void DtypesChanged() {}

 private:
  static Layout LayoutAt(const std::vector<Layout>& layouts, int i) {
    return i < static_cast<int>(layouts.size()) ? layouts[i] : Layout::kPlain;
  }
  static DType DTypeAt(const std::vector<DType>& dtypes, int i) {
    return i < static_cast<int>(dtypes.size()) ? dtypes[i] : DType::kF32;
  }

  std::string name_;
  std::string type_;
  SourceLocation where_;
  int64_t batch_ = 1;
  std::vector<bool> propagate_down_;
  std::vector<Layout> input_layouts_, output_layouts_;
  std::vector<DType> input_dtypes_, output_dtypes_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_LAYER_H_
