#include "tools/planning/length_plan.h"

#include <algorithm>
#include <cstdio>

#include "data/loader.h"
#include "data/pair_dataset.h"
#include "framework/base/units.h"
#include "tools/trainer/inference.h"

namespace spill {
namespace {

// The length of example `index` of a packed pair dataset.
StatusOr<int64_t> ExampleLength(const Dataset& data, int64_t index) {
  const Shape shape = data.example_shape();
  std::vector<float> image(shape.sample_size()), labels(data.label_shape().sample_size());
  SPILL_RETURN_IF_ERROR(data.Get(index, 0, image.data()).status());
  SPILL_RETURN_IF_ERROR(data.GetPixelLabels(index, labels.data()));
  return PackedPairsLength(image, labels, 1, shape.w());
}

}  // namespace

StatusOr<std::vector<int64_t>> EpochLengths(const TrainConfig& config, int64_t batch,
                                            std::vector<int64_t>* bounds) {
  if (config.data.dataset != "pairs" || !config.data.pairs.buckets) return std::vector<int64_t>{};
  std::unique_ptr<Dataset> train, test;
  SPILL_RETURN_IF_ERROR(OpenDatasets(config.data, &train, &test));
  *bounds = train->length_buckets();
  LoaderOptions lo;
  lo.batch = batch;
  lo.shuffle = config.data.shuffle;
  lo.seed = config.run.seed;
  Loader loader(*train, lo);
  const std::vector<int64_t> order = loader.EpochOrder(0);
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    int64_t longest = 0;
    for (int64_t i = b * batch; i < (b + 1) * batch; ++i) {
      SPILL_ASSIGN_OR_RETURN(int64_t length, ExampleLength(*train, order[i]));
      longest = std::max(longest, length);
    }
    auto bound = std::lower_bound(bounds->begin(), bounds->end(), longest);
    lengths.push_back(bound == bounds->end() ? train->example_shape().w() : *bound);
  }
  return lengths;
}

StatusOr<BucketsPlan> PlanBuckets(Net& net, const MemoryOptions& options,
                                  const std::vector<int64_t>& bounds,
                                  const std::vector<int64_t>& lengths, Phase phase) {
  BucketsPlan plan;
  plan.bounds = bounds;
  plan.lengths = lengths;
  const int64_t start = net.sequence_length();
  const SequenceReshaper reshape = ReshaperOf(net);
  auto epoch = PlanLengths(net.view(), options, lengths, reshape, phase);
  SPILL_RETURN_IF_ERROR(net.SetSequenceLength(start));
  SPILL_RETURN_IF_ERROR(epoch.status());
  plan.epoch = std::move(epoch).value();
  for (size_t i = 0; i < plan.epoch.iterations.size(); ++i) {
    BucketsPlan::Bucket& bucket = plan.buckets[lengths[i]];
    bucket.batches++;
    bucket.peak = std::max(bucket.peak, plan.epoch.iterations[i].peak);
  }
  return plan;
}

StatusOr<size_t> MinimumBudgetForEpoch(Net& net, const MemoryOptions& options,
                                       const std::vector<int64_t>& lengths) {
  const int64_t start = net.sequence_length();
  const SequenceReshaper reshape = ReshaperOf(net);
  StatusOr<size_t> minimum = MinimumBudgetForLengths(reshape, start, options, lengths);
  SPILL_RETURN_IF_ERROR(net.SetSequenceLength(start));
  return minimum;
}

std::string DescribeBuckets(const BucketsPlan& plan) {
  auto bytes = [](size_t b) { return FormatBytes(static_cast<double>(b)); };
  std::string bounds;
  for (int64_t b : plan.bounds) bounds += (bounds.empty() ? "" : ", ") + std::to_string(b);
  std::string text = "  length buckets [" + bounds + "]: epoch 1's " +
                     std::to_string(plan.lengths.size()) +
                     " batches, each cut to its bucket's bound, in the trainer's order\n";
  char line[256];
  for (const auto& [length, bucket] : plan.buckets) {
    std::snprintf(line, sizeof(line), "    length %4ld: %6ld batches, peak %s\n",
                  static_cast<long>(length), static_cast<long>(bucket.batches),
                  bytes(bucket.peak).c_str());
    text += line;
  }
  const LengthsPlan& e = plan.epoch;
  if (!e.fits) return text + "    does not fit: " + e.failure + "\n";
  int64_t replanned = 0;
  for (bool r : e.replanned) replanned += r;
  std::snprintf(line, sizeof(line),
                "    the epoch: footprint %s (largest load %s), %ld plans, %ld iterations planned "
                "anew (%ld by the allocator leaving its profile)\n",
                bytes(e.footprint).c_str(), bytes(e.peak).c_str(), static_cast<long>(e.replans + 1),
                static_cast<long>(replanned), static_cast<long>(e.mismatches));
  return text + line;
}

}  // namespace spill
