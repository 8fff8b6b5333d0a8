// The batch loader: background threads assemble batches ahead of training.
//
// Order: epoch e visits the dataset in a permutation drawn from (seed, e)
// (identity when shuffle is off) - the dataset's own where it groups its
// examples into batches (Dataset::BatchOrder: sequences by length); batch b
// of epoch e holds positions [b * batch, (b + 1) * batch). Augmentation of a
// sample uses a seed drawn from (seed, e, position). Nothing depends on thread timing, so a loader
// started at (epoch, batch) yields exactly what an uninterrupted one would.
#ifndef SPILL_DATA_LOADER_H_
#define SPILL_DATA_LOADER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace spill {

struct LoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;
  bool drop_last = true;  // false: the last batch of an epoch may be smaller
  uint64_t seed = 1;
  int prefetch = 4;  // batches kept ready ahead
  int workers = 1;   // decoding threads
  // Data parallelism: `batch` is the global batch, split into `shards`
  // equal slices in order; this loader yields slice `shard` of every batch
  // (needs drop_last and a batch that `shards` divides).
  int shard = 0;
  int shards = 1;
};

struct Batch {
  std::vector<float> images;  // batch x C x H x W
  std::vector<float> labels;  // batch class indices (batch x H x W for a class per pixel)
  int64_t size = 0;           // examples in this batch
  int64_t epoch = 0;
  int64_t index = 0;  // batch number within the epoch
};

class Loader {
 public:
  Loader(const Dataset& dataset, const LoaderOptions& options);
  ~Loader();

  int64_t batches_per_epoch() const;
  // Starts (or restarts) production at batch `index` of `epoch`.
  void Start(int64_t epoch, int64_t index);
  // The next batch in order; blocks until it is ready. Errors from reading
  // the dataset (a truncated file, an undecodable image) come out here.
  StatusOr<Batch> Next();
  // The dataset's indices in the order epoch `epoch` visits them (batch b
  // holds positions [b * batch, (b + 1) * batch)).
  std::vector<int64_t> EpochOrder(int64_t epoch) const;

 private:
  // A permutation of the dataset's indices; null means the identity.
  using Order = std::shared_ptr<const std::vector<int64_t>>;

  void Stop();
  void Work();
  Order OrderFor(int64_t epoch);
  std::vector<int64_t> Permutation(int64_t epoch) const;
  StatusOr<Batch> Assemble(int64_t epoch, int64_t index, const std::vector<int64_t>* order) const;

  const Dataset& dataset_;
  LoaderOptions options_;
  Status config_;  // why options_ cannot yield batches; Next() returns it
  int64_t batches_per_epoch_ = 0;
  int64_t window_ = 1;  // batches claimed or ready ahead of the consumer

  // Batches are numbered epoch * batches_per_epoch_ + index below.
  std::mutex mutex_;
  std::condition_variable ready_;  // a batch was finished
  std::condition_variable space_;  // the consumer took one, or stopping
  std::vector<std::thread> workers_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  Status start_error_;
  int64_t next_ = 0;  // next batch a worker claims
  int64_t want_ = 0;  // next batch Next() returns
  std::map<int64_t, StatusOr<Batch>> done_;
  std::map<int64_t, Order> orders_;  // cached permutations per epoch
};

}  // namespace spill

#endif  // SPILL_DATA_LOADER_H_
