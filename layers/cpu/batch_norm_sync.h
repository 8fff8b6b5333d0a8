// Synchronized batch norm on the CPU: the statistics of the global batch of a
// data-parallel run (PyTorch's SyncBatchNorm). Each replica sums its own
// batch per channel, the sums (and the example counts) are added across
// replicas, and every replica normalizes with the same mean and variance.
// Backward adds the per-channel sums of dy and dy * (x - mean) the same way;
// the parameter gradients stay per replica (the gradient allreduce averages
// them like every other gradient). Two passes (mean, then squared deviations
// around the global mean), as in the unsynchronized layer, so large means do
// not cancel digits.
#ifndef SPILL_LAYERS_CPU_BATCH_NORM_SYNC_H_
#define SPILL_LAYERS_CPU_BATCH_NORM_SYNC_H_

#include "framework/layer.h"
#include "framework/replica_sum.h"

namespace spill {
namespace cpu {

// Fills the saved mean and inverse standard deviation (aux) and updates the
// running statistics (params 2 and 3) from the global batch.
void SyncedBatchNormStatistics(const ForwardArgs& args, double eps, double momentum,
                               const ReplicaSum& sum);

// The whole backward pass with global sums.
void SyncedBatchNormBackward(const BackwardArgs& args, const ReplicaSum& sum);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_BATCH_NORM_SYNC_H_
