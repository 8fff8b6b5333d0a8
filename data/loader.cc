// The batch loader. Policy: batches are numbered in one sequence across
// epochs; workers claim the next unclaimed number, assemble it without the
// lock and file it under its number; Next() waits for exactly the number it
// wants, so delivery order never depends on thread timing. At most
// max(prefetch, workers) batches are claimed or ready ahead of the consumer.
// Shuffling is Fisher-Yates driven by Mix64 from (seed, epoch); a sample's
// augment seed comes from (seed, epoch, position). An error from the dataset
// is delivered in that batch's place; the batches after it still follow.
// Start() and Next() are meant for one consumer thread.
#include "data/loader.h"

#include <algorithm>
#include <new>
#include <numeric>
#include <string>
#include <system_error>
#include <utility>

#include "framework/base/logging.h"
#include "framework/base/random.h"

namespace spill {
namespace {

constexpr uint64_t kShuffleStream = 1;
constexpr uint64_t kAugmentStream = 2;

}  // namespace

Loader::Loader(const Dataset& dataset, const LoaderOptions& options)
    : dataset_(dataset), options_(options) {
  const int64_t n = dataset_.size();
  if (options_.batch < 1) {
    config_ = InvalidArgument("loader batch is " + std::to_string(options_.batch) +
                              "; expected at least 1");
    return;
  }
  if (options_.shards > 1 && (!options_.drop_last || options_.batch % options_.shards != 0)) {
    config_ =
        InvalidArgument("a batch of " + std::to_string(options_.batch) + " cannot be split into " +
                        std::to_string(options_.shards) + " equal shards; expected a multiple of " +
                        std::to_string(options_.shards));
    return;
  }
  batches_per_epoch_ =
      options_.drop_last ? n / options_.batch : (n + options_.batch - 1) / options_.batch;
  if (batches_per_epoch_ == 0) {
    config_ =
        InvalidArgument(dataset_.Describe() + " has " + std::to_string(n) +
                        " examples, not enough for one batch of " + std::to_string(options_.batch) +
                        (options_.drop_last ? " with drop_last" : ""));
  }
  options_.workers = std::max(options_.workers, 1);
  window_ = std::max<int64_t>({1, options_.prefetch, options_.workers});
}

Loader::~Loader() { Stop(); }

int64_t Loader::batches_per_epoch() const { return batches_per_epoch_; }

void Loader::Start(int64_t epoch, int64_t index) {
  Stop();
  if (!config_.ok()) return;
  if (epoch < 0 || index < 0) {
    start_error_ =
        InvalidArgument("loader started at batch " + std::to_string(index) + " of epoch " +
                        std::to_string(epoch) + "; expected non-negative numbers");
    return;
  }
  start_error_ = Status::Ok();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    next_ = want_ = epoch * batches_per_epoch_ + index;  // an index past the end rolls over
    stopping_ = false;
    started_ = true;
  }
  for (int i = 0; i < options_.workers; ++i) {
    try {
      workers_.emplace_back(&Loader::Work, this);
    } catch (const std::system_error& e) {  // the system refused another thread
      Stop();
      start_error_ =
          OutOfMemory("cannot start data loading thread " + std::to_string(i + 1) + " of " +
                      std::to_string(options_.workers) + ": " + e.what() + " (lower data.workers)");
      return;
    }
  }
}

void Loader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mutex_);
  done_.clear();
  orders_.clear();
  started_ = false;
}

StatusOr<Batch> Loader::Next() {
  if (!config_.ok()) return config_;
  if (!started_ && start_error_.ok()) Start(0, 0);
  if (!start_error_.ok()) return start_error_;
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [this] { return done_.count(want_) > 0; });
  auto it = done_.find(want_);
  StatusOr<Batch> batch = std::move(it->second);
  done_.erase(it);
  ++want_;
  // Workers only claim batches at or after want_, so older permutations are dead.
  orders_.erase(orders_.begin(), orders_.lower_bound(want_ / batches_per_epoch_));
  lock.unlock();
  space_.notify_all();
  return batch;
}

void Loader::Work() {
  while (true) {
    int64_t number;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [this] { return stopping_ || next_ < want_ + window_; });
      if (stopping_) return;
      number = next_++;
    }
    const int64_t epoch = number / batches_per_epoch_, index = number % batches_per_epoch_;
    Order order = OrderFor(epoch);
    StatusOr<Batch> batch = Assemble(epoch, index, order.get());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      done_.emplace(number, std::move(batch));
    }
    ready_.notify_all();
  }
}

Loader::Order Loader::OrderFor(int64_t epoch) {
  if (!options_.shuffle) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = orders_.find(epoch);
    if (it != orders_.end()) return it->second;
  }
  // Computed without the lock; a worker that races here computes the same order.
  auto order = std::make_shared<const std::vector<int64_t>>(Permutation(epoch));
  std::lock_guard<std::mutex> lock(mutex_);
  return orders_.emplace(epoch, std::move(order)).first->second;
}

std::vector<int64_t> Loader::EpochOrder(int64_t epoch) const {
  if (options_.shuffle) return Permutation(epoch);
  std::vector<int64_t> order(dataset_.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int64_t> Loader::Permutation(int64_t epoch) const {
  const uint64_t seed = MixSeed(MixSeed(options_.seed, kShuffleStream), epoch);
  // A dataset that groups its examples by length orders them itself.
  std::vector<int64_t> grouped = dataset_.BatchOrder(options_.batch, seed);
  if (!grouped.empty()) {
    SPILL_CHECK_EQ(static_cast<int64_t>(grouped.size()), dataset_.size());
    return grouped;
  }
  std::vector<int64_t> order(dataset_.size());
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = static_cast<int64_t>(order.size()) - 1; i > 0; --i) {
    // Uniform j in [0, i] from the high half of a 64x64-bit product.
    const unsigned __int128 wide =
        static_cast<unsigned __int128>(MixSeed(seed, i)) * static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[static_cast<int64_t>(wide >> 64)]);
  }
  return order;
}

StatusOr<Batch> Loader::Assemble(int64_t epoch, int64_t index,
                                 const std::vector<int64_t>* order) const {
  const int64_t slice = options_.batch / options_.shards;
  const int64_t first = index * options_.batch + options_.shard * slice;
  const int64_t sample = dataset_.example_shape().sample_size();
  const int64_t labels = dataset_.label_shape().sample_size();  // per example
  Batch batch;
  batch.epoch = epoch;
  batch.index = index;
  batch.size = std::min(slice, dataset_.size() - first);
  try {  // on a worker thread: an exception here would end the process
    batch.images.resize(batch.size * sample);
    batch.labels.resize(batch.size * labels);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("not enough host memory for a batch of " + std::to_string(batch.size) +
                       " examples of " + dataset_.example_shape().ToString());
  }
  const uint64_t epoch_seed = MixSeed(MixSeed(options_.seed, kAugmentStream), epoch);
  for (int64_t i = 0; i < batch.size; ++i) {
    if (stopping_) return Cancelled("loader stopped");
    const int64_t position = first + i;
    const int64_t example = order != nullptr ? (*order)[position] : position;
    StatusOr<int> label =
        dataset_.Get(example, MixSeed(epoch_seed, position), batch.images.data() + i * sample);
    if (!label.ok()) {
      return label.status().WithContext("example " + std::to_string(example) + " (batch " +
                                        std::to_string(index) + " of epoch " +
                                        std::to_string(epoch) + ")");
    }
    if (labels == 1) {
      batch.labels[i] = static_cast<float>(*label);
      continue;
    }
    Status pixels = dataset_.GetPixelLabels(example, batch.labels.data() + i * labels);
    if (!pixels.ok()) return pixels.WithContext("example " + std::to_string(example));
  }
  return batch;
}

}  // namespace spill
