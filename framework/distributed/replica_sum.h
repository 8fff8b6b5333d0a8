// Sums across the replicas of a data-parallel run, for layers whose forward
// or backward needs figures of the whole global batch (synchronized batch
// norm). Installed by the trainer when several processes train together with
// `distributed.sync_batch_norm: true`; absent otherwise, and then layers
// compute from their own batch alone, exactly as in a single process.
//
// Every replica runs the same schedule, so every replica calls the sum at the
// same points in the same order, as a collective requires. Recomputation
// never calls it: a recomputing forward reuses the statistics it saved.
#ifndef SPILL_FRAMEWORK_DISTRIBUTED_REPLICA_SUM_H_
#define SPILL_FRAMEWORK_DISTRIBUTED_REPLICA_SUM_H_

#include <cstdint>
#include <functional>

namespace spill {

// Replaces values[0..n) by their element-wise sum over every replica.
using ReplicaSum = std::function<void(double* values, int64_t n)>;

// Installs (or, with an empty function, removes) the process's replica sum.
void SetReplicaSum(ReplicaSum sum);
// The installed sum; empty when layers should use their own batch alone.
const ReplicaSum& GetReplicaSum();

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DISTRIBUTED_REPLICA_SUM_H_
