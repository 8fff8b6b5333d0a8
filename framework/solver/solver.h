// Solvers: SGD (momentum, Nesterov, weight decay) and Adam, with PyTorch's
// update rules so results can be cross-checked against it:
//
//   SGD   d = g + wd * w;  v = momentum * v + d;  w -= lr * (nesterov ? d + momentum * v : v)
//   Adam  d = g + wd * w;  m = b1 m + (1 - b1) d;  s = b2 s + (1 - b2) d^2;
//         w -= lr * (m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + eps)
//
// Weight decay is scaled per parameter by ParamSpec::decay_mult (0 for biases
// and BatchNorm). Solver state (momentum, moments) lives in device memory as
// kOptimizerState tensors added to the schedule before the memory runtime is
// created, so it is planned and counted like everything else. The arithmetic
// runs per device through SolverKernels.
//
// Sharded state (ZeRO stage 1, distributed.zero): the trainable parameters,
// concatenated in schedule order, are cut into `ranks` contiguous ranges of
// equal size (to one element); a rank holds the state of its range alone and
// updates only those elements of each parameter - its piece. The update is
// element-wise, so the pieces of all ranks together are the unsharded update,
// bit for bit.
#ifndef SPILL_FRAMEWORK_SOLVER_SOLVER_H_
#define SPILL_FRAMEWORK_SOLVER_SOLVER_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "framework/device/device.h"
#include "framework/graph/net.h"
#include "framework/schedule/tensor_store.h"

namespace spill {

struct SolverConfig {
  std::string type = "sgd";  // sgd | adam
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// Per-device update arithmetic over n elements.
class SolverKernels {
 public:
  virtual ~SolverKernels() = default;
  // Updates run on `device`'s compute queue.
  virtual void Sgd(Device& device, int64_t n, float* w, const float* g, float* v, float lr,
                   float momentum, float decay, bool nesterov) = 0;
  virtual void Adam(Device& device, int64_t n, float* w, const float* g, float* m, float* s,
                    float lr, float beta1, float beta2, float epsilon, float decay, int64_t t) = 0;
  // g *= factor over n gradients (fp16's 1 / loss scale: a power of two, so
  // exact); whether every gradient was finite before. Waits for the result.
  virtual bool Unscale(Device& device, int64_t n, float* g, float factor) = 0;
};

SolverKernels& SolverKernelsFor(DeviceType device);

// Which part of the solver state this process holds: rank `rank` of `ranks`.
// With `params` (ZeRO stage 3) it holds the same piece of the parameters
// alone too (ParameterSlot::master).
struct StateShard {
  int rank = 0;
  int ranks = 1;
  bool params = false;
  bool sharded() const { return ranks > 1; }
  bool shards_params() const { return params && sharded(); }
};

// Elements [begin, end) of a parameter: a rank's piece of it.
struct Piece {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// The trainable elements of `schedule`: every parameter slot's, in order.
int64_t TrainableElements(const Schedule& schedule);
// Rank `rank`'s range of all `total` trainable elements cut into `ranks`.
Piece RangeOf(int64_t total, int rank, int ranks);
// Rank `rank`'s piece of the parameter at elements [offset, offset + numel)
// of all `total` trainable elements: its range's part of the parameter.
Piece PieceOf(int64_t offset, int64_t numel, int64_t total, int rank, int ranks);

// Solver state of every parameter, whole, as a checkpoint holds it:
// [slot][k] has the parameter's element count.
using WholeState = std::vector<std::vector<std::vector<float>>>;
// Parameters sharded over ranks (zero 3), whole, by parameter tensor.
using WholeParameters = std::unordered_map<TensorId, std::vector<float>>;
bool RegisterSolverKernels(DeviceType device, SolverKernels* kernels);

class Solver {
 public:
  static StatusOr<std::unique_ptr<Solver>> Create(const SolverConfig& config);

  const SolverConfig& config() const { return config_; }
  // Adds the state tensors to `net`'s schedule - with a sharded `shard`, of
  // this rank's pieces alone, and with shard.params the pieces of the
  // parameters the solver updates (ParameterSlot::master, named
  // "<parameter>.piece"). Call before creating the memory runtime.
  void AddState(Net& net, StateShard shard = {});
  const StateShard& shard() const { return shard_; }
  // State tensors per parameter (SGD: 0 or 1, Adam: 2) and their names in
  // checkpoints: "<parameter>.momentum", ".adam_m", ".adam_v".
  int states() const;
  std::string StateName(const Net& net, size_t slot, int k) const;
  // Zeroes the state (a fresh start), wherever the store keeps it.
  Status ResetState(const Net& net, TensorStore& store) const;
  // One update of every trainable parameter with learning rate `lr`, in two
  // halves: BeginStep hands the store the step before the iteration runs, so
  // that it can update each parameter where it lives as soon as its gradient
  // is complete (with parameters kept in host memory, during backward);
  // FinishStep completes it after the iteration.
  void BeginStep(const Net& net, TensorStore& store, Device& device, double lr);
  Status FinishStep(TensorStore& store);
  // Both halves at once, after the iteration.
  Status Update(const Net& net, TensorStore& store, Device& device, double lr);

  // fp16's loss scaling, after an iteration whose losses' gradients carried
  // the factor 1 / `factor`: multiplies every gradient by `factor` (exact for
  // a power of two) and says whether all of them were finite - if not, the
  // step must be skipped. Needs the gradients on the device
  // (memory.params: device).
  StatusOr<bool> UnscaleGradients(const Net& net, TensorStore& store, Device& device,
                                  float factor) const;

  // Updates applied so far (Adam's t); restored from checkpoints.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  // One entry per trainable parameter.
  struct Slot {
    TensorId param;
    TensorId grad;
    float decay_mult;
    std::vector<TensorId> state;  // SGD: velocity; Adam: first, second moment
    int64_t numel = 0;            // the parameter's elements
    int64_t offset = 0;           // of its first in all trainable elements
    Piece piece;                  // the elements this rank updates (all unsharded)
  };
  const std::vector<Slot>& slots() const { return slots_; }

 private:
  explicit Solver(const SolverConfig& config) : config_(config) {}

  SolverConfig config_;
  std::vector<Slot> slots_;
  StateShard shard_;
  int64_t steps_ = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SOLVER_SOLVER_H_
