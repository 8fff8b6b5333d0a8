// What every rank of a data-parallel run must hold equal, checked before the
// first collective: ranks that disagree on the network exchange tensors of
// different sizes (a corrupted heap or MPI_ERR_TRUNCATE), ranks that disagree
// on the length of the run or on synchronized batch norm wait forever in a
// collective the others never reach, and ranks that disagree on the learning
// rate, the batch or the seed train replicas that silently diverge.
//
// The agreement is a list of (key, value) lines: the configuration as the
// trainer uses it (solver and schedule, data and its order, run length and
// flags that change it, distributed settings, where parameters live), the
// network (every layer's type and output shapes, every parameter's shape)
// and the data (sizes, classes, image shape, and a fingerprint of the first
// labels and image). Settings that may differ between machines are left out:
// paths, the GPU ordinal, device and host budgets, timing caches, memory
// policies that do not change the math or the collectives.
//
// The ranks compare one hash of the whole list (one collective); when it
// differs, they search the first differing line by bisection over prefix
// hashes (a logarithmic number of collectives, the same on every rank), and
// every rank fails with an error naming the key and both values.
#ifndef SPILL_TOOLS_TRAINER_RANK_AGREEMENT_H_
#define SPILL_TOOLS_TRAINER_RANK_AGREEMENT_H_

#include <string>
#include <vector>

#include "data/dataset.h"
#include "framework/base/status.h"
#include "framework/distributed/distributed.h"
#include "framework/graph/net.h"
#include "tools/trainer/train_config.h"

namespace spill {

struct AgreementLine {
  std::string key;
  std::string value;
};

// What the run's ranks must agree on. `max_steps` and `resuming` are the
// flags that change the run's length and start.
StatusOr<std::vector<AgreementLine>> RankAgreement(const TrainConfig& config, int64_t max_steps,
                                                   bool resuming, const Net& net,
                                                   const Dataset& train, const Dataset* test);

// Ok when every rank of `comm` holds the same lines; otherwise an error on
// every rank naming the first key that differs, rank 0's value and this
// rank's. Collective: every rank must call it.
Status CheckRanksAgree(Communicator& comm, const std::vector<AgreementLine>& lines);

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_RANK_AGREEMENT_H_
