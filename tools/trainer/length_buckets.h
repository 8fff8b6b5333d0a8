// data.buckets: sequence pairs batched by length. The dataset orders each
// epoch so that a batch holds pairs of one length bucket
// (Dataset::BatchOrder) and pads every example to max_length; here a batch
// is cut to the bound of the bucket of its longest pair, the network takes
// that length (Net::SetSequenceLength) and the memory runtime plans for it
// - once per length, the plan reused when the length comes back
// (MemoryRuntime::Reshape).
#ifndef SPILL_TOOLS_TRAINER_LENGTH_BUCKETS_H_
#define SPILL_TOOLS_TRAINER_LENGTH_BUCKETS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "framework/graph/net.h"
#include "memory/runtime/runtime.h"

namespace spill {

class LengthBuckets {
 public:
  // Null when `data` has no length buckets.
  static std::unique_ptr<LengthBuckets> For(const Dataset& data);

  // The bound `batch` is cut to: the first that holds its longest pair.
  int64_t BoundOf(const Batch& batch) const;
  // Cuts `batch` (its rows padded to max_length) to BoundOf, and sets the
  // network and the runtime to that length.
  Status Fit(Batch* batch, Net& net, MemoryRuntime& runtime) const;

  const std::vector<int64_t>& bounds() const { return bounds_; }

 private:
  LengthBuckets(std::vector<int64_t> bounds, int64_t width)
      : bounds_(std::move(bounds)), width_(width) {}
  int64_t Rows(const Batch& batch) const;

  std::vector<int64_t> bounds_;
  int64_t width_;  // max_length: the examples' length
};

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_LENGTH_BUCKETS_H_
