// A network ready to run: layers instantiated for a device, wired, routed and
// shaped, with its step schedule. Building a Net runs no compute and touches
// no device memory, so tools can plan from it alone.
//
// Build phases: create layers (types and parameters checked) -> wire inputs
// (missing references, arity, implicit labels) -> route (cycles, reachability)
// -> shapes in route order (mismatches) -> schedule.
#ifndef SPILL_FRAMEWORK_GRAPH_NET_H_
#define SPILL_FRAMEWORK_GRAPH_NET_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/config/net_spec.h"
#include "framework/graph/layer.h"
#include "framework/graph/precision.h"
#include "framework/schedule/network_view.h"
#include "framework/schedule/schedule.h"

namespace spill {

struct NetOptions {
  int64_t batch = 1;
  DeviceType device = DeviceType::kCpu;
  // Let layers that compute faster in a blocked layout keep activations in
  // it (framework/graph/layouts.h); false: every tensor plain.
  bool blocked_layouts = true;
  // The layout activations that leave plain take (blocked_layouts):
  // kBlocked16 (nChw16c) or kChannelsLast; where unset, the one the layers
  // prefer (Layer::preferred_layout): on the CPU channels-last for bfloat16
  // activations on a processor with AMX, where oneDNN's bfloat16 kernels
  // compute in it, else blocked (tools/bench/RESULTS.md).
  std::optional<Layout> layout;
  // How activations and their gradients are stored (framework/graph/precision.h).
  Precision precision = Precision::kFp32;
  // In 16 bits: the whole batch's float32 copies from which a step is
  // computed in slices (kConversionSlices; SIZE_MAX: never).
  size_t slice_copies_from = SIZE_MAX;
  // What attention layers of `algorithm: auto` keep for backward: the row
  // statistics (tiled) where true, the probabilities (naive) where false.
  // The programs choose (tools/common/net_options.h, LeanerBuilds).
  bool tiled_attention = false;
};

class Net;

// Net::SetSequenceLength as the planners that play lengths take it
// (PlanLengths, MinimumBudgetForLengths): `net` set to a length, and its
// view. `net` must outlive the function.
using SequenceReshaper = std::function<StatusOr<NetworkView>(int64_t length)>;
SequenceReshaper ReshaperOf(Net& net);

class Net {
 public:
  static StatusOr<std::unique_ptr<Net>> Build(const NetSpec& spec, const NetOptions& options);
  // Whether a layer is attention whose algorithm the build chose
  // (`algorithm: auto`, NetOptions::tiled_attention).
  bool chooses_attention() const { return chooses_attention_; }

  const std::string& name() const { return name_; }
  const std::string& file() const { return file_; }
  int64_t batch() const { return batch_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int id) { return *layers_[id]; }
  const Layer& layer(int id) const { return *layers_[id]; }
  const LayerDecl& decl(int id) const { return decls_[id]; }
  const LayerSpec& spec(int id) const { return specs_[id]; }
  std::vector<std::string> layer_names() const;
  int FindLayer(const std::string& name) const;  // -1 if absent

  Precision precision() const { return precision_; }
  // Bytes of the float32 copies of the 16-bit tensors that one computation of
  // `pass` of `layer` over `images` images (a slice of the batch, or the
  // batch) reads or writes; they come first in its workspace
  // (framework/graph/precision.h). 0 in float32.
  size_t ConversionBytes(int layer, Pass pass, int64_t images) const;
  // Images per call of `pass` of `layer` that keep its copies small (0: the
  // whole batch in one call).
  int64_t ConversionSlice(int layer, Pass pass) const;

  const Schedule& schedule() const { return schedule_; }
  Schedule& mutable_schedule() { return schedule_; }
  // What the memory runtime sees of this network: the schedule, a summary of
  // each layer and the layers' algorithm candidates. Valid while the Net lives.
  NetworkView view() const;

  // Variable-length sequences: the time axis of the input (the width of its
  // N x C x 1 x T shape) becomes `length` and every shape is inferred again,
  // in place: the same tensors and steps, their sizes and workspaces those of
  // the new length. Parameters and solver state must not depend on it (an
  // error naming the first that does); on any error the network keeps its
  // length. Call between iterations, then hand the new view to the memory
  // runtime (MemoryRuntime::Reshape).
  Status SetSequenceLength(int64_t length);
  int64_t sequence_length() const { return input_shape().w(); }

  // The layers that feed data and compute losses.
  const std::vector<int>& input_layers() const { return input_layers_; }
  const std::vector<int>& loss_layers() const { return loss_layers_; }
  // Shape of one input layer's image output (N x C x H x W).
  Shape input_shape() const;
  // The labels the input layer feeds: N x 1 x 1 x 1, or N x 1 x H x W (one
  // class per pixel). A batch holds label_shape().numel() of them.
  Shape label_shape() const;
  int64_t num_classes() const;  // width of the first loss layer's scores

 private:
  Net() = default;
  Status CreateLayers(const NetSpec& spec, const NetOptions& options);
  Status WireInputs(const NetSpec& spec);
  Status InferShapes(const std::vector<int>& route);
  // A loss exists and every layer feeds one (framework/graph/net_checks.h).
  Status CheckLosses() const;
  // Chooses the activations' layouts and tells the layers.
  void AssignLayouts(bool blocked);
  // Sets each activation's and gradient's element type (and bytes) for the
  // precision.
  void AssignPrecision();
  // The memory traffic of 16-bit storage in `work` (the float32 layer's):
  // the conversions around a computation on copies, or half the bytes of a
  // layer that computes on 16-bit tensors.
  void AddConversionWork(int layer, Pass pass, LayerWork* work) const;
  // ConversionSlice from the shapes and settings (RefreshWorkspaces keeps it).
  int64_t ComputeConversionSlice(int layer, Pass pass) const;
  // Whether `layer` reads input `input` as indices (labels, ids).
  bool ReadsIndices(int layer, int input) const;
  // SetSequenceLength's work, without restoring the length on failure.
  Status Reshape(int64_t length);
  // Workspaces can depend on the layouts and on which input gradients are
  // wanted, known only once the schedule is built.
  void RefreshWorkspaces();

  // The layers' algorithm candidates, for the memory runtime.
  class Algorithms : public AlgorithmCatalog {
   public:
    explicit Algorithms(const Net& net) : net_(net) {}
    int NumOps(int layer, Pass pass) const override;
    std::vector<AlgorithmCandidate> Candidates(int layer, Pass pass, int op,
                                               int64_t images) const override;
    int64_t SliceImages(int layer, Pass pass) const override {
      return net_.ConversionSlice(layer, pass);
    }
    size_t FixedWorkspace(int layer, Pass pass, int64_t images, size_t whole) const override;

   private:
    const Net& net_;
  };

  std::string name_;
  std::string file_;
  int64_t batch_ = 1;
  bool blocked_layouts_ = true;
  std::optional<Layout> layout_;
  bool chooses_attention_ = false;  // an attention layer of algorithm auto
  Precision precision_ = Precision::kFp32;
  size_t slice_copies_from_ = SIZE_MAX;
  std::vector<int64_t> conversion_slices_;  // ConversionSlice, per layer and pass
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<LayerDecl> decls_;
  std::vector<LayerSpec> specs_;
  std::vector<int> input_layers_;
  std::vector<int> loss_layers_;
  Schedule schedule_;
  Algorithms algorithms_{*this};
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_GRAPH_NET_H_
