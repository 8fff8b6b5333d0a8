// What a GPU convolution decides on the host, in plain C++ so that tests
// without a GPU exercise it (layers/cuda/convolution_cuda.cc asks cuDNN and
// calls these):
//
//   * the candidates of each operation (forward, filter gradient, data
//     gradient) of a geometry - algorithm, name, workspace - are asked of
//     the library once per geometry and process (ConvCandidateCache):
//     `deepest` shapes tens of thousands of convolutions of a few
//     geometries, and the library's heuristics and workspace queries cost
//     far more than a lookup;
//   * a layer that may run image by image (BatchSlice::in_image_order) lists
//     the algorithms usable at its batch and at one image, each with the
//     larger of its two workspaces (CombineForImageOrder), so one list
//     serves both ways of running;
//   * measured times replace estimates; a candidate the library failed to
//     run is dropped (MergeMeasurements);
//   * tensors stay within the library's 2^31-element descriptors
//     (CheckDescriptorLimits), else an error names the layer.
#ifndef SPILL_LAYERS_CONV_CANDIDATES_H_
#define SPILL_LAYERS_CONV_CANDIDATES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "layers/convolution_layer.h"

namespace spill {

// The operations of a convolution, as indices into per-operation lists.
enum ConvOpIndex { kConvForward = 0, kConvFilterGrad = 1, kConvDataGrad = 2, kConvOps = 3 };

const char* ConvOpName(int op);

// One usable algorithm of one operation, as the library numbers it.
struct ConvCandidate {
  int algo = 0;
  std::string name;
  size_t workspace = 0;  // bytes
};

struct ConvCandidates {
  std::vector<ConvCandidate> ops[kConvOps];
};

// Everything that tells two geometries apart, batch included.
std::string ConvGeometryKey(const ConvGeometry& g);

// The candidates of each geometry, asked of `query` on the first request
// only. Thread-safe; a failed query is not remembered.
class ConvCandidateCache {
 public:
  using Query = std::function<StatusOr<ConvCandidates>(const ConvGeometry&)>;

  StatusOr<ConvCandidates> Get(const ConvGeometry& g, const Query& query);
  int64_t queries() const;
  int64_t hits() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, ConvCandidates> cache_;
  int64_t queries_ = 0;
  int64_t hits_ = 0;
};

// For each operation, the algorithms of `whole` (its order) that `image`
// lists too, with the larger of the two workspaces.
ConvCandidates CombineForImageOrder(const ConvCandidates& whole, const ConvCandidates& image);

// One result of timing the candidates (cuDNN's Find): an algorithm, whether
// it ran, or failed for want of workspace (untested), or failed otherwise.
struct ConvMeasurement {
  enum class Outcome { kRan, kNoWorkspace, kFailed };
  int algo = 0;
  Outcome outcome = Outcome::kRan;
  double seconds = 0;
};

struct MergedTimes {
  std::vector<ConvCandidate> kept;   // the candidates still selectable
  std::vector<double> seconds;       // theirs
  std::vector<std::string> dropped;  // names of those the library failed to run
  bool measured = false;             // at least one candidate ran
};

// Measured seconds for the candidates that ran (the fastest result of an
// algorithm); those not measured (too much workspace to try, or absent from
// the results) rank after every measured one, in their order. A candidate
// whose every result failed - and whose workspace was on offer - is
// dropped: the library cannot run it here.
MergedTimes MergeMeasurements(const std::vector<ConvCandidate>& candidates,
                              const std::vector<ConvMeasurement>& results,
                              size_t workspace_offered);

// cuDNN describes a tensor by int dimensions and at most 2^31 - 1 elements.
constexpr int64_t kMaxDescriptorElements = (int64_t{1} << 31) - 1;

// Ok when the input, output and filter of `g` fit cuDNN's descriptors;
// else an InvalidArgument naming the layer, the tensor and its size.
Status CheckDescriptorLimits(const std::string& layer, const ConvGeometry& g);

}  // namespace spill

#endif  // SPILL_LAYERS_CONV_CANDIDATES_H_
