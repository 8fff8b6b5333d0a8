// The processes of a data-parallel run and the collectives between them, over
// MPI (Debian's OpenMPI).
//
// A process started by mpirun (or another MPI launcher: it sets
// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK) initializes MPI on first use
// of World() with MPI_THREAD_MULTIPLE. Any other process never calls into
// MPI: World() is then a single rank whose collectives are no-ops, so one
// process behaves exactly as it did before data parallelism existed.
//
// Collectives on one MPI communicator must be issued in the same order on
// every rank. Three threads use collectives at once - the training thread
// (control values, synchronized batch norm), the communication thread
// (gradient buckets) and the gather thread (sharded parameters) - so each
// has a channel of its own, a duplicate of MPI_COMM_WORLD, and only that
// thread uses it.
#ifndef SPILL_FRAMEWORK_DISTRIBUTED_DISTRIBUTED_H_
#define SPILL_FRAMEWORK_DISTRIBUTED_DISTRIBUTED_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

enum class Channel {
  kControl,     // the training thread: weights, positions, losses, statistics
  kGradients,   // the communication thread: gradient buckets
  kParameters,  // the gather thread: sharded parameters (distributed.zero 3)
};
constexpr int kChannels = 3;

class Communicator {
 public:
  // The process's communicator (initialized on first use).
  static Communicator& World();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether an MPI launcher started this process (even as a single rank).
  bool launched() const { return launched_; }
  // The MPI library can read and write CUDA device memory directly.
  bool cuda_aware() const { return cuda_aware_; }
  // "rank 1 of 2" (for messages).
  std::string Describe() const;

  // Rank 0's `bytes` bytes at `data` replace every rank's. Blocking.
  Status Broadcast(void* data, size_t bytes, Channel channel);
  // Element-wise sums over every rank, in place. Blocking.
  Status SumDoubles(double* values, int64_t n, Channel channel);
  // The smallest and largest value of `value` over every rank.
  Status MinMax(uint64_t value, uint64_t* min, uint64_t* max, Channel channel);

  // Point-to-point messages of one exchange: floats to or from a peer rank.
  struct Message {
    int peer = 0;
    float* data = nullptr;
    int64_t count = 0;
  };
  // Sends every message of `sends` and receives every one of `receives`,
  // all at once, and returns when all are complete. Messages between two
  // ranks match in the order they are given; every rank's exchange `tag`
  // must match. Collectives built on this fix their own order of arithmetic,
  // which MPI's collectives leave to the library's choice of algorithm.
  // Counts the floats sent (floats_sent()). Blocking; thread-safe across
  // channels.
  Status Exchange(const std::vector<Message>& sends, const std::vector<Message>& receives, int tag,
                  Channel channel);
  // Floats this rank has sent by Exchange so far.
  int64_t floats_sent() const { return floats_sent_.load(); }

  // Ends every rank of the job with `code` (after this process printed why).
  [[noreturn]] void Abort(int code);
  // Shuts MPI down (a no-op without a launcher). Call once, at the end.
  void Finalize();

 private:
  Communicator();
  Status Check(int code, const char* what) const;

  int rank_ = 0;
  int size_ = 1;
  bool launched_ = false;
  bool cuda_aware_ = false;
  bool finalized_ = false;
  std::atomic<int64_t> floats_sent_{0};
  void* channels_[kChannels] = {};  // MPI_Comm by Channel, duplicates of MPI_COMM_WORLD
};

// Whether this process was started by an MPI launcher.
bool LaunchedByMpi();

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DISTRIBUTED_DISTRIBUTED_H_
