// GradientReducer: bucket layout, the communication thread and the figures
// of overlap (see gradient_reducer.h for the policy).
#include "tools/trainer/gradient_reducer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "framework/base/clock.h"

namespace spill {

GradientReducer::GradientReducer(Communicator& comm, const Net& net, Device* device,
                                 TensorStore& store, size_t bucket_bytes, bool per_layer,
                                 bool gather)
    : comm_(comm), net_(net), device_(device), store_(store), gather_(gather) {
  Layout(bucket_bytes, per_layer);
  Owners();
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
    b.size = std::max(b.size, place.offset + place.numel);
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
}

// The parameters, concatenated in schedule order, are cut into one range
// per rank, as the solver's state is (PieceOf); a bucket's segments follow.
void GradientReducer::Owners() {
  const Schedule& s = net_.schedule();
  const int ranks = comm_.size();
  const int64_t total = TrainableElements(s);
  for (Bucket& bucket : buckets_) {
    bucket.owned.assign(ranks, {});
    bucket.messages.assign(ranks, {});
  }
  int64_t offset = 0;
  for (const ParameterSlot& p : s.parameters) {
    const int64_t numel = s.tensors[p.param].shape.numel();
    auto it = places_.find(p.param);
    if (it != places_.end()) {
      Bucket& bucket = buckets_[it->second.bucket];
      for (int r = 0; r < ranks; ++r) {
        const Piece piece = PieceOf(offset, numel, total, r, ranks);
        if (r == comm_.rank()) it->second.mine = piece;
        if (!piece.empty()) {
          bucket.owned[r].push_back({it->second.offset + piece.begin, piece.size()});
        }
      }
    }
    offset += numel;
  }
  // Segments in the order of the bucket's data, the same on every rank.
  for (Bucket& bucket : buckets_) {
    for (auto& segments : bucket.owned) {
      std::sort(segments.begin(), segments.end(),
                [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
    }
  }
  // Where each parameter's own piece lands among the bucket's packed averages.
  std::vector<std::unordered_map<int64_t, int64_t>> packed_at(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t at = 0;
    for (const Segment& segment : buckets_[b].owned[comm_.rank()]) {
      packed_at[b][segment.begin] = at;
      at += segment.count;
    }
  }
  for (auto& [param, place] : places_) {
    if (!place.mine.empty())
      place.averaged = packed_at[place.bucket].at(place.offset + place.mine.begin);
  }
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
      if (bucket.data.empty()) {  // freed after its last reduction
        bucket.data.resize(bucket.size);
        Held(bucket.size);
      }
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

StatusOr<GradientReducer::Reduction> GradientReducer::Reduced(TensorId param) {
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
  if (gather_) return Reduction{bucket.data.data() + place.offset, Piece{0, place.numel}};
  return Reduction{bucket.averages.data() + place.averaged, place.mine};
}

StatusOr<bool> GradientReducer::Unscale(float factor) {
  bool finite = true;
  for (const auto& [param, place] : places_) {
    SPILL_ASSIGN_OR_RETURN(const Reduction reduced, Reduced(param));
    // The reduction's own buffer in host memory, which the solver step reads
    // next: the CPU kernel, as for updates in host memory.
    float* values = const_cast<float*>(reduced.values);
    finite = SolverKernelsFor(DeviceType::kCpu)
                 .Unscale(*device_, reduced.piece.size(), values, factor) &&
             finite;
  }
  return finite;
}

void GradientReducer::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to reduce
    const int b = queue_.front();
    queue_.pop_front();
    Bucket& bucket = buckets_[b];
    bucket.state = State::kInFlight;
    bucket.begin = MonotonicSeconds();
    const bool ok = error_.ok();
    lock.unlock();
    // After a failure the job is ending: no more messages.
    Status reduced = ok ? Reduce(b) : Status::Ok();
    lock.lock();
    if (!reduced.ok() && error_.ok()) error_ = reduced;
    bucket.end = MonotonicSeconds();
    bucket.state = State::kDone;
    done_.notify_all();
  }
}

namespace {

constexpr int kTags = 32768;  // MPI guarantees tags up to 32767

template <typename Segment>
void Pack(const std::vector<Segment>& segments, const float* data, std::vector<float>* out) {
  out->clear();
  for (const Segment& s : segments)
    out->insert(out->end(), data + s.begin, data + s.begin + s.count);
}

template <typename Segment>
void Unpack(const std::vector<Segment>& segments, const float* packed, float* data) {
  for (const Segment& s : segments) {
    std::memcpy(data + s.begin, packed, s.count * sizeof(float));
    packed += s.count;
  }
}

template <typename Segment>
int64_t Count(const std::vector<Segment>& segments) {
  int64_t n = 0;
  for (const Segment& s : segments) n += s.count;
  return n;
}

}  // namespace

// Reduce-scatter: every other rank's values of the elements this rank owns
// arrive; the owner sums all ranks' in rank order and scales by 1/N. With
// `gather_`, every owner then sends its averages to every rank.
Status GradientReducer::Reduce(int b) {
  Bucket& bucket = buckets_[b];
  const int me = comm_.rank(), ranks = comm_.size();
  const int64_t mine = Count(bucket.owned[me]);
  int64_t held = HeldFloats(bucket);
  // What the reduction holds at its widest, and after it.
  auto account = [&](int64_t now) {
    Held(now - held);
    held = now;
  };
  std::vector<Communicator::Message> sends, receives;
  std::vector<std::vector<float>> arrived(ranks);
  for (int r = 0; r < ranks; ++r) {
    Pack(bucket.owned[r], bucket.data.data(), &bucket.messages[r]);
    if (r == me) continue;
    sends.push_back(
        {r, bucket.messages[r].data(), static_cast<int64_t>(bucket.messages[r].size())});
    arrived[r].resize(mine);
    receives.push_back({r, arrived[r].data(), mine});
  }
  account(HeldFloats(bucket) + static_cast<int64_t>(ranks - 1) * mine);
  SPILL_RETURN_IF_ERROR(comm_.Exchange(sends, receives, b % kTags, Channel::kGradients));
  arrived[me] = std::move(bucket.messages[me]);
  std::vector<float> sum = std::move(arrived[0]);
  for (int r = 1; r < ranks; ++r) {
    for (int64_t i = 0; i < mine; ++i) sum[i] += arrived[r][i];
  }
  const float scale = 1.0f / static_cast<float>(ranks);
  for (float& x : sum) x *= scale;
  if (!gather_) {
    // This rank keeps its averages alone; the bucket's buffers go until the
    // next backward fills it.
    bucket.averages = std::move(sum);
    std::vector<float>().swap(bucket.data);
    for (auto& message : bucket.messages) std::vector<float>().swap(message);
    account(HeldFloats(bucket));
    return Status::Ok();
  }
  Unpack(bucket.owned[me], sum.data(), bucket.data.data());
  sends.clear();
  receives.clear();
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    sends.push_back({r, sum.data(), mine});
    bucket.messages[r].resize(Count(bucket.owned[r]));
    receives.push_back(
        {r, bucket.messages[r].data(), static_cast<int64_t>(bucket.messages[r].size())});
  }
  SPILL_RETURN_IF_ERROR(comm_.Exchange(sends, receives, b % kTags, Channel::kGradients));
  for (int r = 0; r < ranks; ++r) {
    if (r != me) Unpack(bucket.owned[r], bucket.messages[r].data(), bucket.data.data());
  }
  account(HeldFloats(bucket));
  return Status::Ok();
}

int64_t GradientReducer::HeldFloats(const Bucket& bucket) {
  int64_t floats = static_cast<int64_t>(bucket.data.size() + bucket.averages.size());
  for (const auto& message : bucket.messages) floats += static_cast<int64_t>(message.size());
  return floats;
}

void GradientReducer::Held(int64_t floats) {
  const int64_t now = held_floats_ += floats;
  int64_t peak = peak_floats_.load();
  while (now > peak && !peak_floats_.compare_exchange_weak(peak, now)) {
  }
}

Status GradientReducer::FinishIteration() {
  // Updates in host memory run on the device-to-host queue: let them read
  // their buckets.
  device_->device_to_host_queue().Synchronize();
  std::unique_lock<std::mutex> lock(mutex_);
  SPILL_RETURN_IF_ERROR(error_);
  for (const Bucket& bucket : buckets_) {
    if (bucket.state == State::kFilling) {
      return Internal("a gradient bucket was not reduced in this iteration");
    }
  }
  // A rank that holds no piece of a bucket's parameters (sharded
  // parameters) never waited for it: its reduction may still be under way.
  done_.wait(lock, [&] {
    return !error_.ok() || std::all_of(buckets_.begin(), buckets_.end(),
                                       [](const Bucket& b) { return b.state == State::kDone; });
  });
  SPILL_RETURN_IF_ERROR(error_);
  AccountIteration();
  for (Bucket& bucket : buckets_) {
    bucket.state = State::kFilling;
    bucket.filled = 0;
    // Every update has read this rank's averages.
    Held(-static_cast<int64_t>(bucket.averages.size()));
    std::vector<float>().swap(bucket.averages);
  }
  backward_begin_ = -1;
  return Status::Ok();
}

// Communication time is the union of the reductions' intervals; the part of
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
  stats_.peak_host_bytes = peak_floats_.load() * static_cast<int64_t>(sizeof(float));
  stats_.iterations++;
}

void ReducingStore::BeginUpdate(SlotUpdate update) {
  base_.BeginUpdate([this, update](const ParameterSlot& slot, float* w, const float* g,
                                   const std::vector<float*>& state, bool host) {
    StatusOr<GradientReducer::Reduction> reduced = reducer_.Reduced(slot.param);
    if (!reduced.ok()) return;  // FinishIteration reports it; no update on a partial sum
    const Piece& piece = reduced->piece;
    const int64_t numel = schedule_.tensors[slot.param].shape.numel();
    if (piece.begin == 0 && piece.end == numel && (host || device_->type() == DeviceType::kCpu)) {
      update(slot, w, reduced->values, state, host);  // all of it, in memory the update reads
      return;
    }
    // The averages go where the gradient is, at their place in it: the
    // update reads this rank's piece there.
    float* to = const_cast<float*>(g) + piece.begin;
    const size_t bytes = piece.size() * sizeof(float);
    if (host) {
      std::memcpy(to, reduced->values, bytes);
    } else {
      device_->CopySync(to, reduced->values, bytes, CopyKind::kHostToDevice);
    }
    update(slot, w, g, state, host);
  });
}

}  // namespace spill
