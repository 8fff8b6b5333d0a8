#include "tools/trainer/length_buckets.h"

#include <algorithm>

#include "data/pair_dataset.h"

namespace spill {

std::unique_ptr<LengthBuckets> LengthBuckets::For(const Dataset& data) {
  std::vector<int64_t> bounds = data.length_buckets();
  if (bounds.empty()) return nullptr;
  return std::unique_ptr<LengthBuckets>(
      new LengthBuckets(std::move(bounds), data.example_shape().w()));
}

int64_t LengthBuckets::Rows(const Batch& batch) const {
  return static_cast<int64_t>(batch.labels.size()) / width_;
}

int64_t LengthBuckets::BoundOf(const Batch& batch) const {
  const int64_t longest = PackedPairsLength(batch.images, batch.labels, Rows(batch), width_);
  auto bound = std::lower_bound(bounds_.begin(), bounds_.end(), longest);
  return bound == bounds_.end() ? width_ : *bound;
}

Status LengthBuckets::Fit(Batch* batch, Net& net, MemoryRuntime& runtime) const {
  const int64_t length = BoundOf(*batch);
  CropPackedPairs(Rows(*batch), width_, length, &batch->images, &batch->labels);
  SPILL_RETURN_IF_ERROR(net.SetSequenceLength(length));
  return runtime.Reshape(net.view());
}

}  // namespace spill
