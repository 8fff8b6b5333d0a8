// `plan` for a training config over sequence pairs with data.buckets: the
// length buckets, and the first epoch's batches in the order the trainer
// takes them, each at its bucket's bound, played through the memory runtime
// as a run plays them (PlanLengths): each length's peak, the footprint over
// the epoch, the plans made and the iterations that planned anew.
#ifndef SPILL_TOOLS_PLANNING_LENGTH_PLAN_H_
#define SPILL_TOOLS_PLANNING_LENGTH_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/graph/net.h"
#include "memory/memory_options.h"
#include "memory/planning/planner.h"
#include "tools/trainer/train_config.h"

namespace spill {

struct BucketsPlan {
  std::vector<int64_t> bounds;
  std::vector<int64_t> lengths;  // of epoch 1's batches, in order
  struct Bucket {
    int64_t batches = 0;
    size_t peak = 0;  // the highest of its iterations
  };
  std::map<int64_t, Bucket> buckets;  // by length
  LengthsPlan epoch;
};

// The length of each batch of `config`'s first epoch, as the trainer cuts
// it (tools/trainer/length_buckets.h); empty without data.buckets.
StatusOr<std::vector<int64_t>> EpochLengths(const TrainConfig& config, int64_t batch,
                                            std::vector<int64_t>* bounds);

// The epoch played on `net` (at its length, restored after) under `options`.
StatusOr<BucketsPlan> PlanBuckets(Net& net, const MemoryOptions& options,
                                  const std::vector<int64_t>& bounds,
                                  const std::vector<int64_t>& lengths, Phase phase);

// The smallest budget the epoch's lengths train in, the runtime created at
// the network's length (MinimumBudgetForLengths): what one length leaves to
// the next can need more than the longest length alone.
StatusOr<size_t> MinimumBudgetForEpoch(Net& net, const MemoryOptions& options,
                                       const std::vector<int64_t>& lengths);

// A few lines for `plan`'s report.
std::string DescribeBuckets(const BucketsPlan& plan);

}  // namespace spill

#endif  // SPILL_TOOLS_PLANNING_LENGTH_PLAN_H_
