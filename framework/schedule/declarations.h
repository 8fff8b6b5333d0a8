// What a layer declares from shapes alone - the vocabulary the step
// schedule, the memory runtime and the layers share: passes and phases,
// parameters and saved tensors, what backward needs, whether a layer is a
// checkpoint, and the algorithms an operation can be computed with.
//
// Plain data with no dependency on the network format or on any device, so
// memory/ can plan from it without linking layers or the YAML parser.
#ifndef SPILL_FRAMEWORK_SCHEDULE_DECLARATIONS_H_
#define SPILL_FRAMEWORK_SCHEDULE_DECLARATIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/device/tensor.h"

namespace spill {

enum class Pass { kForward, kBackward };
enum class Phase { kTrain, kEval };

// Checkpoint layers are compute-heavy; their outputs are worth keeping or
// offloading. Cheap layers' outputs are cheaper to recompute than to move.
enum class LayerCost { kCheckpoint, kCheap };

// What the memory policies may know of a layer type's outputs, declared by
// the layer (Layer::memory_traits), so that no policy keeps a list of layer
// types and a new type needs no edit outside its own files.
struct MemoryTraits {
  // Its outputs are feature maps: large, read again by backward, worth a
  // copy to host memory (convolutions, pooling, activations, normalization,
  // concatenation: Dymem's offload set, Fig. 8).
  bool feature_maps = false;
  // Its outputs are small and never worth a copy (fully connected layers,
  // dropout, losses: Dymem's reclaimed class, Algorithm 3).
  bool small_outputs = false;
  // A convolution: vDNN offloads the inputs of these.
  bool convolution = false;

  static MemoryTraits FeatureMaps() { return {true, false, false}; }
  static MemoryTraits SmallOutputs() { return {false, true, false}; }
  static MemoryTraits Convolution() { return {true, false, true}; }
};

struct Initializer {
  enum class Kind { kConstant, kHeNormal, kXavierUniform, kUniform, kNormal };
  Kind kind = Kind::kConstant;
  float value = 0;  // kConstant: the value; kUniform: the bound; kNormal: the deviation
  int64_t fan_in = 1;
  int64_t fan_out = 1;

  static Initializer Constant(float v) { return {Kind::kConstant, v, 1, 1}; }
  static Initializer HeNormal(int64_t fan_in) { return {Kind::kHeNormal, 0, fan_in, 1}; }
  static Initializer XavierUniform(int64_t fan_in, int64_t fan_out) {
    return {Kind::kXavierUniform, 0, fan_in, fan_out};
  }
  static Initializer Uniform(float bound) { return {Kind::kUniform, bound, 1, 1}; }
  static Initializer Normal(float deviation) { return {Kind::kNormal, deviation, 1, 1}; }
};

struct ParamSpec {
  std::string name;  // "weight", "bias", "running_mean", ...
  Shape shape;
  Initializer init;
  bool trainable = true;      // false: state saved in checkpoints, never updated by a solver
  float decay_mult = 1.0f;    // weight decay multiplier (0 for biases and BatchNorm)
  bool non_negative = false;  // a variance: a value below zero is refused where it is loaded
};

// A tensor the layer's forward saves for its own backward (dropout's mask,
// BatchNorm's batch statistics).
struct AuxSpec {
  std::string name;
  Shape shape;
};

struct BackwardNeeds {
  std::vector<bool> inputs;  // backward reads input i's data
  bool outputs = false;      // backward reads its outputs' data
};

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// The work of one pass of a layer, for the time model of devices this
// program does not run on (memory/sim/): arithmetic, device memory traffic
// and bytes read from host memory (over the link on a GPU). Estimates from
// shapes: what an efficient kernel must do, not what a given one does.
// The arithmetic a pass's operations run in: float32, or a device's faster
// matrix units - TF32 (float32 storage), fp16 or bf16 operands with float32
// sums (DeviceProfile gives each its rate).
enum class Arithmetic { kFp32, kTf32, kFp16, kBf16 };

struct LayerWork {
  double flops = 0;       // floating-point operations (a multiply-add is two)
  double bytes = 0;       // device memory read and written
  double host_bytes = 0;  // read from host memory (the input batch)
  Arithmetic arithmetic = Arithmetic::kFp32;
};

// One way to compute an operation of a layer, with its cost: measured time
// and workspace bytes. The memory runtime picks one per operation and step.
struct AlgorithmCandidate {
  std::string name;
  double seconds = 0;
  size_t workspace = 0;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_SCHEDULE_DECLARATIONS_H_
