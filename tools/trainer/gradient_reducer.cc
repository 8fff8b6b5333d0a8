// GradientReducer: bucket layout, the communication thread and the figures
// of overlap (see gradient_reducer.h for the policy).
#include "tools/trainer/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "framework/base/clock.h"

namespace spill {
namespace {

// How long the communication thread sleeps between polls of MPI while an
// allreduce is in flight (OpenMPI progresses non-blocking collectives only
// inside MPI calls). Short next to a bucket's transfer, long enough that the
// thread holds no core.
constexpr auto kPollInterval = std::chrono::microseconds(50);

}  // namespace

GradientReducer::GradientReducer(Communicator& comm, const Net& net, Device* device,
                                 TensorStore& store, size_t bucket_bytes, bool per_layer)
    : comm_(comm), net_(net), device_(device), store_(store) {
  Layout(bucket_bytes, per_layer);
  thread_ = std::thread([this] { Loop(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

// Parameters in the order backward completes their gradients: the backward
// steps run the layers in reverse.
void GradientReducer::Layout(size_t bucket_bytes, bool per_layer) {
  const Schedule& s = net_.schedule();
  for (const ParameterSlot& p : s.parameters) of_layer_[p.layer].push_back(p.param);
  const int n = s.num_layers();
  Bucket current;
  size_t current_bytes = 0;
  auto close = [&] {
    if (current.slots == 0) return;
    buckets_.push_back(std::move(current));
    current = Bucket();
    current_bytes = 0;
  };
  for (int i = n; i < 2 * n; ++i) {
    const int layer = s.steps[i].layer;
    auto it = of_layer_.find(layer);
    if (it == of_layer_.end()) continue;
    for (TensorId param : it->second) {
      const ParameterSlot& p =
          *std::find_if(s.parameters.begin(), s.parameters.end(),
                        [&](const ParameterSlot& q) { return q.param == param; });
      const int64_t numel = s.tensors[p.grad].shape.numel();
      places_[param] = {static_cast<int>(buckets_.size()),
                        static_cast<int64_t>(current_bytes / sizeof(float)), numel, p.grad};
      current.slots++;
      current_bytes += numel * sizeof(float);
      if (current_bytes >= bucket_bytes) close();
    }
    if (per_layer) close();
  }
  close();
  for (auto& [param, place] : places_) {
    Bucket& b = buckets_[place.bucket];
    b.data.resize(std::max<size_t>(b.data.size(), place.offset + place.numel));
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
}

void GradientReducer::OnBackward(int layer) {
  const double now = MonotonicSeconds();
  if (backward_begin_ < 0) backward_begin_ = now;
  auto it = of_layer_.find(layer);
  if (it != of_layer_.end()) {
    if (device_->type() != DeviceType::kCpu) device_->compute_queue().Synchronize();
    for (TensorId param : it->second) {
      const Place& place = places_.at(param);
      Bucket& bucket = buckets_[place.bucket];
      float* to = bucket.data.data() + place.offset;
      const size_t bytes = place.numel * sizeof(float);
      if (device_->type() == DeviceType::kCpu) {
        std::memcpy(to, store_.Data(place.grad), bytes);  // the CPU device's memory is host memory
      } else {
        device_->CopySync(to, store_.Data(place.grad), bytes, CopyKind::kDeviceToHost);
      }
      if (++bucket.filled == bucket.slots) {
        std::lock_guard<std::mutex> lock(mutex_);
        bucket.state = State::kQueued;
        queue_.push_back(place.bucket);
        work_.notify_one();
      }
    }
  }
  backward_end_ = MonotonicSeconds();
}

StatusOr<const float*> GradientReducer::Reduced(TensorId param) {
  auto it = places_.find(param);
  if (it == places_.end()) return Internal("a parameter without a gradient bucket");
  const Place& place = it->second;
  Bucket& bucket = buckets_[place.bucket];
  const double begin = MonotonicSeconds();
  std::unique_lock<std::mutex> lock(mutex_);
  if (bucket.state == State::kFilling) {
    return Internal("the gradient of '" + net_.schedule().tensors[param].name +
                    "' is due for its update but its layer's backward has not produced it");
  }
  done_.wait(lock, [&] { return bucket.state == State::kDone || !error_.ok(); });
  stats_.wait_seconds += MonotonicSeconds() - begin;
  if (!error_.ok()) return error_;
  return static_cast<const float*>(bucket.data.data() + place.offset);
}

void GradientReducer::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const bool busy = Progress(lock);
    if (stopping_ && !busy) return;
    if (busy) {
      work_.wait_for(lock, kPollInterval);
    } else {
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    }
  }
}

// Runs on the communication thread with the lock held; MPI calls are made
// without it, so the training thread can queue buckets meanwhile.
bool GradientReducer::Progress(std::unique_lock<std::mutex>& lock) {
  while (!queue_.empty() && error_.ok()) {
    const int b = queue_.front();
    queue_.pop_front();
    Bucket& bucket = buckets_[b];
    bucket.state = State::kInFlight;
    bucket.begin = MonotonicSeconds();
    lock.unlock();
    Status started =
        comm_.StartSumFloats(bucket.data.data(), static_cast<int64_t>(bucket.data.size()),
                             Channel::kGradients, &bucket.request);
    lock.lock();
    if (!started.ok()) error_ = started;
    in_flight_.push_back(b);
  }
  std::vector<int> still;
  for (int b : in_flight_) {
    Bucket& bucket = buckets_[b];
    const bool ok = error_.ok();
    lock.unlock();
    StatusOr<bool> done = ok ? comm_.Test(&bucket.request) : StatusOr<bool>(true);
    if (done.ok() && *done) {
      const float scale = 1.0f / static_cast<float>(comm_.size());
      for (float& x : bucket.data) x *= scale;
    }
    lock.lock();
    if (!done.ok()) {
      error_ = done.status();
    } else if (*done) {
      bucket.end = MonotonicSeconds();
      bucket.state = State::kDone;
      continue;
    }
    if (error_.ok()) still.push_back(b);
  }
  const bool finished = still.size() < in_flight_.size() || !error_.ok();
  in_flight_ = std::move(still);
  if (finished) done_.notify_all();
  return !in_flight_.empty();
}

Status GradientReducer::FinishIteration() {
  // Updates in host memory run on the device-to-host queue: let them read
  // their buckets.
  device_->device_to_host_queue().Synchronize();
  std::lock_guard<std::mutex> lock(mutex_);
  SPILL_RETURN_IF_ERROR(error_);
  for (const Bucket& bucket : buckets_) {
    if (bucket.state != State::kDone) {
      return Internal("a gradient bucket was not reduced in this iteration");
    }
  }
  AccountIteration();
  for (Bucket& bucket : buckets_) {
    bucket.state = State::kFilling;
    bucket.filled = 0;
  }
  backward_begin_ = -1;
  return Status::Ok();
}

// Communication time is the union of the allreduces' intervals; the part of
// it before the last backward step ended overlapped backward.
void GradientReducer::AccountIteration() {
  std::vector<std::pair<double, double>> spans;
  for (const Bucket& b : buckets_) spans.emplace_back(b.begin, b.end);
  std::sort(spans.begin(), spans.end());
  double covered_to = -1;
  for (const auto& [begin, end] : spans) {
    const double from = std::max(begin, covered_to);
    if (end <= from) continue;
    stats_.comm_seconds += end - from;
    stats_.overlap_seconds += std::max(0.0, std::min(end, backward_end_) - from);
    covered_to = end;
  }
  stats_.backward_seconds += backward_end_ - std::max(backward_begin_, 0.0);
  stats_.iterations++;
}

void ReducingStore::BeginUpdate(SlotUpdate update) {
  base_.BeginUpdate([this, update](const ParameterSlot& slot, float* w, const float* g,
                                   const std::vector<float*>& state, bool host) {
    StatusOr<const float*> reduced = reducer_.Reduced(slot.param);
    if (!reduced.ok()) return;  // FinishIteration reports it; no update on a partial sum
    const float* averaged = *reduced;
    if (!host && device_->type() != DeviceType::kCpu) {
      // A GPU's kernels read device memory: the average goes back where the
      // gradient lives.
      device_->CopySync(const_cast<float*>(g), averaged, schedule_.tensors[slot.grad].bytes,
                        CopyKind::kHostToDevice);
      averaged = g;
    }
    update(slot, w, averaged, state, host);
  });
}

}  // namespace spill
