// The process-wide replica sum: set once before training, read by layers.
#include "framework/distributed/replica_sum.h"

#include <utility>

namespace spill {
namespace {

ReplicaSum& Installed() {
  static auto* sum = new ReplicaSum();
  return *sum;
}

}  // namespace

void SetReplicaSum(ReplicaSum sum) { Installed() = std::move(sum); }

const ReplicaSum& GetReplicaSum() { return Installed(); }

}  // namespace spill
