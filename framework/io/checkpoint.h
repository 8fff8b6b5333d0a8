// Checkpoints: the network's parameters, the solver's state and the position
// in training, in one .npz archive (see framework/io/npz.h):
//
//   params/<tensor>     float32 (N, C, H, W), e.g. params/conv1/weight
//   state/<tensor>      float32 solver state, e.g. state/conv1/weight.momentum
//   meta/step           int64: updates done
//   meta/epoch          int64: epoch of the next batch
//   meta/batch          int64: index of the next batch in that epoch
//   meta/solver_steps   int64: Adam's step count
//   meta/config         uint8: the training configuration text
//   meta/precision      uint8: the run's precision (fp32, bf16, fp16); a resumed
//                       run must be in the same one
//   meta/loss_scale     uint8 (fp16 only): the loss scale, a power of two, as text
//   meta/loss_scale_clean_steps  int64 (fp16 only): clean steps toward its growth
//
// From Python: w = numpy.load("checkpoint.npz")["params/conv1/weight"].
//
// Loading trusts nothing: the archive's CRCs and structure are checked while
// it is read (framework/io/npz.h), then every array the network and the solver
// need is checked for presence, dtype, exact shape and values (finite, and
// not negative where a layer declares a variance), every meta/ counter for
// presence, type and range, and arrays the network does not have are errors -
// all before a single value is copied, so a bad checkpoint never leaves a
// half-restored network behind. Saving refuses values that are not finite:
// a diverged run keeps its last good checkpoint.
#ifndef SPILL_FRAMEWORK_IO_CHECKPOINT_H_
#define SPILL_FRAMEWORK_IO_CHECKPOINT_H_

#include <string>
#include <vector>

#include "framework/device/device.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"
#include "framework/schedule/tensor_store.h"
#include "framework/solver/solver.h"

namespace spill {

struct TrainingPosition {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t solver_steps = 0;
  // fp16's loss scaling (tools/trainer/loss_scale.h); unused in the other
  // precisions.
  double loss_scale = 0;
  int64_t loss_scale_clean_steps = 0;
};

// The params/ arrays of `archive` (a checkpoint's, or arrays to export) hold
// exactly `net`'s parameters, each as the loader checks it: present, float32,
// of the parameter's exact shape, with finite values (a variance not
// negative); an array the network lacks is an error too. `path` names them.
Status CheckParameterArrays(const NpzArchive& archive, const std::string& path, const Net& net);

// Every value finite, and none below zero when `non_negative` (a variance):
// otherwise an error naming `what`, the first offending index and its value.
Status CheckParameterValues(const float* values, int64_t count, bool non_negative,
                            const std::string& what);

// What SaveCheckpoint writes: the parameters (and the solver's state), the
// position, the configuration and the network's name. A value that is not
// finite is an InvalidArgument naming the tensor, the only one this returns
// (a diverged run); reading a tensor may fail otherwise. The state is always
// whole: a solver whose state is sharded over ranks needs `whole`, the state
// gathered from every rank, and one whose parameters are sharded too needs
// `params`, those gathered.
StatusOr<NpzArchive> CheckpointArchive(const Net& net, TensorStore& store, const Solver* solver,
                                       const TrainingPosition& position,
                                       const std::string& config_text,
                                       const WholeState* whole = nullptr,
                                       const WholeParameters* params = nullptr);

// Writes CheckpointArchive atomically (temporary file, then rename); nothing
// is written when a value is not finite.
Status SaveCheckpoint(const std::string& path, const Net& net, TensorStore& store, Device& device,
                      const Solver* solver, const TrainingPosition& position,
                      const std::string& config_text);

// The precision the checkpoint was trained in (meta/precision; fp32 when it
// has none); an error naming the file when it cannot be read.
StatusOr<Precision> CheckpointPrecision(const std::string& path);

// Restores parameters (and solver state and its step count when `solver` is
// given) after the checks above; errors name the file and the array. A
// sharded solver gets its pieces of the whole state, and `whole`, when
// given, every rank's (so a run may resume on another number of ranks).
StatusOr<TrainingPosition> LoadCheckpoint(const std::string& path, const Net& net,
                                          TensorStore& store, Device& device, Solver* solver,
                                          WholeState* whole = nullptr);

// Fine-tuning: what LoadMatchingParameters copied and what it left alone.
struct PartialLoad {
  std::vector<std::string> loaded;  // network parameters taken from the checkpoint
  // Network parameters that keep their fresh values, each with the reason:
  // "fc/weight (checkpoint 10x64x1x1, network 5x64x1x1)" or "... (not in checkpoint)".
  std::vector<std::string> fresh;
  std::vector<std::string> unused;  // checkpoint parameters the network lacks
};

// Copies each params/ array of the checkpoint whose name, dtype (float32) and
// shape match a parameter of `net`; everything else keeps its current value.
// Solver state and the training position are ignored. A checkpoint that
// matches nothing is an error (it is surely not the intended one).
StatusOr<PartialLoad> LoadMatchingParameters(const std::string& path, const Net& net,
                                             TensorStore& store);
// The same from arrays already read (e.g. an imported ONNX model's weights);
// `path` names their source in messages.
StatusOr<PartialLoad> LoadMatchingArrays(const NpzArchive& archive, const std::string& path,
                                         const Net& net, TensorStore& store);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_IO_CHECKPOINT_H_
