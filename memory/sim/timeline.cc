#include "memory/sim/timeline.h"

#include <algorithm>
#include <unordered_map>

namespace spill {

const char* LaneName(Lane lane) {
  switch (lane) {
    case Lane::kCompute:
      return "compute queue";
    case Lane::kToDevice:
      return "copy queue to device";
    case Lane::kToHost:
      return "copy queue to host";
    case Lane::kHost:
      return "host";
    case Lane::kNetwork:
      return "network link";
  }
  return "?";
}

namespace {

constexpr double kNoCopy = -1;

// The discrete-event simulation: four clocks (host, compute queue, the copy
// queue each way) advanced event by event.
class Simulator {
 public:
  Simulator(const NetworkView& view, const IterationCosts& costs, const DeviceProfile& profile)
      : view_(view),
        schedule_(*view.schedule),
        costs_(costs),
        profile_(profile),
        copies_(profile.link),
        pending_(schedule_.tensors.size(), kNoCopy),
        gathered_(schedule_.tensors.size(), kNoCopy),
        dropping_(schedule_.tensors.size(), false) {}

  // Replays the events; returns the stream-ordered time of each.
  std::vector<double> Replay(const std::vector<MemoryEvent>& events) {
    std::vector<double> times;
    times.reserve(events.size());
    for (const MemoryEvent& e : events) {
      Apply(e);
      times.push_back(std::max(host_, ComputeTail()));
    }
    // The update reads the reduced gradients; the ranks' averages or
    // updated parameters come back after it.
    if (sent_ > 0) ComputeWaits(sent_, "the reductions", -1);
    Compute(costs_.update_seconds, "update", "update", -1);
    if (all_gather_bytes_ > 0) {
      const double end = Network(&received_, ComputeTail(), all_gather_bytes_, "all-gather", -1);
      HostWaits(end, "the all-gather", -1);
    }
    return times;
  }

  Timeline Finish() {
    timeline_.seconds = std::max({host_, compute_end_, copies_.latest(), sent_, received_});
    return std::move(timeline_);
  }

 private:
  // Where the compute queue will be once everything enqueued so far,
  // waits included, has run.
  double ComputeTail() const { return std::max(compute_end_, compute_ready_); }

  void Slice(Lane lane, std::string name, const char* category, double start, double end, int step,
             size_t bytes = 0) {
    timeline_.slices.push_back({lane, std::move(name), category, start, end - start, step, bytes});
  }

  void Compute(double seconds, std::string name, const char* category, int step) {
    if (profile_.inline_compute) {
      Slice(Lane::kCompute, std::move(name), category, host_, host_ + seconds, step);
      host_ += seconds;
      compute_end_ = host_;
      return;
    }
    const double free = std::max(compute_end_, host_);
    if (compute_ready_ > free) {
      Slice(Lane::kCompute, "wait for copies", "wait", free, compute_ready_, step);
    }
    const double start = std::max(free, compute_ready_);
    Slice(Lane::kCompute, std::move(name), category, start, start + seconds, step);
    compute_end_ = start + seconds;
  }

  // Compute must not start before `until` (a copy it reads or overwrites).
  void ComputeWaits(double until, const std::string& tensor, int step) {
    if (profile_.inline_compute) {
      if (until > host_) Slice(Lane::kCompute, "wait for " + tensor, "wait", host_, until, step);
      host_ = std::max(host_, until);
    } else {
      compute_ready_ = std::max(compute_ready_, until);
    }
  }

  void HostWaits(double until, const std::string& what, int step) {
    if (until > host_) Slice(Lane::kHost, "wait for " + what, "wait", host_, until, step);
    host_ = std::max(host_, until);
  }

  // `bytes` over the network one way, after `clock` and `after`, once the
  // host issues it; returns its end.
  double Network(double* clock, double after, size_t bytes, std::string name, int step) {
    const double start = std::max({*clock, after, host_});
    *clock = start + profile_.network_latency_seconds +
             static_cast<double>(bytes) / profile_.network_bytes_per_second;
    Slice(Lane::kNetwork, std::move(name), "network", start, *clock, step, bytes);
    return *clock;
  }

  void Copy(const MemoryEvent& e, bool to_host) {
    pending_[e.tensor] = QueueCopy(
        CopySeconds(static_cast<double>(e.bytes), 1, to_host), ComputeTail(), to_host,
        std::string(to_host ? "offload " : "prefetch ") + TensorName(e.tensor), e.step, e.bytes);
  }

  double CopySeconds(double bytes, int copies, bool to_host) const {
    const double bandwidth =
        to_host ? profile_.link.d2h_bytes_per_second : profile_.link.h2d_bytes_per_second;
    return copies * profile_.link.latency_seconds + (bandwidth > 0 ? bytes / bandwidth : 0);
  }

  // A copy on its direction's queue, in order, not before `after` (nor
  // before the host enqueues it); returns its end.
  double QueueCopy(double seconds, double after, bool to_host, std::string name, int step,
                   size_t bytes) {
    double& clock = copies_.of(to_host);
    const double start = std::max({clock, after, host_});
    clock = start + seconds;
    Slice(to_host ? Lane::kToHost : Lane::kToDevice, std::move(name),
          to_host ? "offload" : "prefetch", start, clock, step, bytes);
    return clock;
  }

  void StreamedCompute(double seconds, const std::string& name, const char* category,
                       const MemoryEvent& e);

  const std::string& TensorName(TensorId id) const { return schedule_.tensors[id].name; }

  std::string StepName(int step) const {
    const Step& s = schedule_.steps[step];
    return view_.layer(s.layer).name + (s.pass == Pass::kForward ? " forward" : " backward");
  }

  void Apply(const MemoryEvent& e);
  void Remap(const MemoryEvent& e);

  const NetworkView& view_;
  const Schedule& schedule_;
  const IterationCosts& costs_;
  const DeviceProfile& profile_;
  double host_ = 0, compute_end_ = 0, compute_ready_ = 0;
  CopyClocks copies_;
  std::vector<double> pending_;   // by tensor: the end of its copy in flight
  std::vector<double> gathered_;  // by tensor: the end of its gather in flight
  // When the network is next free each way (an adapter sends and receives
  // at once), and what the all-gather after the update receives.
  double sent_ = 0, received_ = 0;
  size_t all_gather_bytes_ = 0;
  std::vector<bool> dropping_;  // its next free is a drop's (no wait)
  // By block freed: the end of the compute queued before its free (what an
  // unmap of the chunks it gave back waits for).
  std::unordered_map<AllocationId, double> freed_after_;
  double moves_wait_ = kNoCopy;  // the last copy in flight on a block moved since the last kCompact
  // The copies of the streamed step whose compute comes next (kStreamIn and
  // kStreamOut precede it): bytes and tensors each way, and whether a
  // tensor goes both ways (read and written slice by slice: its slice in
  // waits for the slice out that last read its staging half).
  struct {
    double in = 0, out = 0;
    int in_tensors = 0, out_tensors = 0;
    std::vector<TensorId> ins;
    bool both_ways = false;
  } stream_;
  Timeline timeline_;
};

void Simulator::Apply(const MemoryEvent& e) {
  switch (e.type) {
    case MemoryEventType::kCompute: {
      const Step& step = schedule_.steps[e.step];
      host_ += costs_.host_step_seconds;  // the runtime's bookkeeping before it
      StreamedCompute(costs_.step_seconds[e.step], StepName(e.step),
                      step.pass == Pass::kForward ? "forward" : "backward", e);
      if (costs_.sync_after[e.step]) host_ = std::max(host_, ComputeTail());
      return;
    }
    case MemoryEventType::kRecompute:
      host_ += costs_.host_step_seconds;
      StreamedCompute(costs_.recompute_seconds[e.layer], view_.layer(e.layer).name + " recompute",
                      "recompute", e);
      return;
    case MemoryEventType::kBeginOffload:
      if (e.bytes > 0) Copy(e, /*to_host=*/true);
      return;
    case MemoryEventType::kBeginPrefetch:
      Copy(e, /*to_host=*/false);
      return;
    case MemoryEventType::kFinishOffload:
      if (pending_[e.tensor] != kNoCopy)
        HostWaits(pending_[e.tensor], TensorName(e.tensor), e.step);
      pending_[e.tensor] = kNoCopy;
      return;
    case MemoryEventType::kFinishPrefetch:
      if (pending_[e.tensor] != kNoCopy) {
        ComputeWaits(pending_[e.tensor], TensorName(e.tensor), e.step);
      }
      pending_[e.tensor] = kNoCopy;
      return;
    case MemoryEventType::kCancelOffload:  // the copy stays pending until a wait
      if (pending_[e.tensor] != kNoCopy) {
        ComputeWaits(pending_[e.tensor], TensorName(e.tensor), e.step);
      }
      return;
    case MemoryEventType::kDrop:
      dropping_[e.tensor] = true;
      return;
    case MemoryEventType::kFree:
      freed_after_[e.block] = ComputeTail();
      if (e.tensor == kNoTensor) return;
      if (pending_[e.tensor] != kNoCopy && !dropping_[e.tensor]) {
        HostWaits(pending_[e.tensor], TensorName(e.tensor), e.step);
      }
      pending_[e.tensor] = kNoCopy;
      dropping_[e.tensor] = false;
      return;
    case MemoryEventType::kCompact: {
      if (moves_wait_ != kNoCopy) ComputeWaits(moves_wait_, "the copies of moved tensors", e.step);
      moves_wait_ = kNoCopy;
      const double bandwidth = profile_.move_bandwidth();
      Compute(bandwidth > 0 ? e.bytes / bandwidth : 0, "compaction", "compact", e.step);
      timeline_.slices.back().bytes = e.bytes;
      return;
    }
    case MemoryEventType::kAlloc:
    case MemoryEventType::kRemap:
      Remap(e);
      return;
    case MemoryEventType::kStreamIn:  // copied slice by slice with the step's compute
      stream_.in += static_cast<double>(e.bytes);
      stream_.in_tensors++;
      stream_.ins.push_back(e.tensor);
      return;
    case MemoryEventType::kStreamOut:
      stream_.out += static_cast<double>(e.bytes);
      stream_.out_tensors++;
      if (std::find(stream_.ins.begin(), stream_.ins.end(), e.tensor) != stream_.ins.end()) {
        stream_.both_ways = true;
      }
      return;
    case MemoryEventType::kMove:  // charged with its compaction (kCompact), after its copy
      if (e.tensor != kNoTensor) moves_wait_ = std::max(moves_wait_, pending_[e.tensor]);
      return;
    case MemoryEventType::kResident:  // placed before the iteration: no work
      return;
    case MemoryEventType::kUpdate:
      // A parameter's solver step: on the device it is part of the
      // iteration's update time; in host memory it runs on the host beside
      // the copies, which the profiles do not model (not charged).
      return;
    case MemoryEventType::kIdle:
      return;
    case MemoryEventType::kBeginGather:
      if (profile_.network_bytes_per_second <= 0) return;
      gathered_[e.tensor] =
          Network(&received_, host_, e.bytes, "gather " + TensorName(e.tensor), e.step);
      return;
    case MemoryEventType::kReduceScatter:  // once the backward that made it has run
      if (profile_.network_bytes_per_second <= 0) return;
      Network(&sent_, ComputeTail(), e.bytes, "reduce-scatter " + TensorName(e.tensor), e.step);
      return;
    case MemoryEventType::kAllGather:
      if (profile_.network_bytes_per_second > 0) all_gather_bytes_ += e.bytes;
      return;
    case MemoryEventType::kFinishGather: {
      if (gathered_[e.tensor] != kNoCopy) {
        ComputeWaits(gathered_[e.tensor], "gather of " + TensorName(e.tensor), e.step);
      }
      gathered_[e.tensor] = kNoCopy;
      const double bytes = static_cast<double>(schedule_.tensors[e.tensor].bytes);
      Compute(CopySeconds(bytes, 1, /*to_host=*/false), "copy in " + TensorName(e.tensor),
              "prefetch", e.step);
      return;
    }
  }
}

// A step's compute, and when it streams, its slices with their copies as
// the runtime queues them (memory/runtime/staging.h): each copy queue runs
// in order; slice k's copy in follows the compute of the last slice in its
// half (single-buffered: slice k-1, queued before slice k computes;
// double-buffered: slice k-1's half is slice k+1's, queued while slice k
// computes) and, for a tensor read and written, that slice's copy out; its
// copy out follows its compute, and slice k computes after its copy in and
// the copy out of the slice before it in its half. The bytes are spread
// evenly over the slices. The staging blocks are given back once the last
// copy out is done (the host waits).
void Simulator::StreamedCompute(double seconds, const std::string& name, const char* category,
                                const MemoryEvent& e) {
  const bool streamed = stream_.in_tensors + stream_.out_tensors > 0;
  if (!streamed) {
    Compute(seconds, name, category, e.step);
    return;
  }
  const int slices = std::max(1, e.slices), buffers = std::clamp(e.buffers, 1, 2);
  const double in_bytes = stream_.in / slices, out_bytes = stream_.out / slices;
  const double in = CopySeconds(in_bytes, stream_.in_tensors, /*to_host=*/false);
  const double out = CopySeconds(out_bytes, stream_.out_tensors, /*to_host=*/true);
  const bool copies_in = stream_.in_tensors > 0, copies_out = stream_.out_tensors > 0;
  std::vector<double> in_done(slices, kNoCopy), out_done(slices, kNoCopy);
  auto copy_in = [&](int k, double after) {
    if (stream_.both_ways && k >= buffers && out_done[k - buffers] != kNoCopy) {
      after = std::max(after, out_done[k - buffers]);
    }
    if (copies_in) {
      in_done[k] =
          QueueCopy(in, after, false, "stream in " + name, e.step, static_cast<size_t>(in_bytes));
    }
  };
  copy_in(0, ComputeTail());
  for (int k = 0; k < slices; ++k) {
    const double last_compute = ComputeTail();
    if (buffers == 1 && k > 0) copy_in(k, last_compute);
    if (in_done[k] != kNoCopy) ComputeWaits(in_done[k], "slice in", e.step);
    if (k >= buffers && out_done[k - buffers] != kNoCopy) {
      ComputeWaits(out_done[k - buffers], "slice out", e.step);
    }
    if (buffers == 2 && k + 1 < slices) copy_in(k + 1, last_compute);
    Compute(seconds / slices, name, category, e.step);
    if (copies_out) {
      out_done[k] = QueueCopy(out, ComputeTail(), true, "stream out " + name, e.step,
                              static_cast<size_t>(out_bytes));
    }
  }
  if (copies_out) HostWaits(out_done[slices - 1], "the last slice out", e.step);
  stream_ = {};
}

// Chunks mapped for a request or between iterations (va): an unmap first
// waits for the compute queued before the free that gave its chunks back
// (one of an earlier iteration has run), then the host makes the driver
// calls.
void Simulator::Remap(const MemoryEvent& e) {
  if (e.maps == 0 && e.unmaps == 0) return;
  if (e.unmaps > 0 && e.fence >= 0) {
    auto freed = freed_after_.find(e.fence);
    if (freed != freed_after_.end()) {
      HostWaits(freed->second, "the compute before an unmap", e.step);
    }
  }
  const double seconds = (e.maps + e.unmaps) * profile_.map_seconds_per_chunk;
  if (seconds <= 0) return;
  Slice(Lane::kHost,
        "map " + std::to_string(e.maps) + ", unmap " + std::to_string(e.unmaps) + " chunks", "map",
        host_, host_ + seconds, e.step);
  host_ += seconds;
  if (profile_.inline_compute) compute_end_ = host_;
}

// Total length of the intersection of two sets of disjoint intervals.
double Intersection(std::vector<std::pair<double, double>> a,
                    std::vector<std::pair<double, double>> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first);
    const double hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    (a[i].second < b[j].second ? i : j)++;
  }
  return total;
}

// The union of two sets of disjoint intervals, as disjoint intervals.
std::vector<std::pair<double, double>> Union(std::vector<std::pair<double, double>> a,
                                             const std::vector<std::pair<double, double>>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& span : a) {
    if (!merged.empty() && span.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, span.second);
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

}  // namespace

TimelineSummary Summarize(const Timeline& timeline) {
  TimelineSummary s;
  s.iteration_seconds = timeline.seconds;
  std::vector<std::pair<double, double>> compute, to_device, to_host, network;
  for (const TimelineSlice& slice : timeline.slices) {
    const bool wait = slice.category == "wait";
    const std::pair<double, double> span(slice.start, slice.start + slice.duration);
    if (slice.lane == Lane::kCompute) {
      (wait ? s.compute_wait_seconds : s.compute_seconds) += slice.duration;
      if (!wait) compute.push_back(span);
    } else if (slice.lane == Lane::kToDevice) {
      s.to_device_seconds += slice.duration;
      to_device.push_back(span);
    } else if (slice.lane == Lane::kToHost) {
      s.to_host_seconds += slice.duration;
      to_host.push_back(span);
    } else if (slice.lane == Lane::kNetwork) {
      s.network_seconds += slice.duration;
      network.push_back(span);
    } else if (wait) {
      s.host_wait_seconds += slice.duration;
    } else if (slice.category == "map") {
      s.map_seconds += slice.duration;
    }
  }
  s.duplex_seconds = Intersection(to_device, to_host);
  s.copy_seconds = s.to_device_seconds + s.to_host_seconds - s.duplex_seconds;
  std::vector<std::pair<double, double>> copies = Union(to_device, to_host);
  s.hidden_copy_seconds = Intersection(compute, copies);
  s.hidden_network_seconds = Intersection(compute, network);
  return s;
}

DeviceBytes BaseDeviceBytes(const MemoryLog& log, const std::vector<MemoryEvent>& events) {
  DeviceBytes base{};
  if (log.steps.empty()) return base;
  base = log.steps[0].in_use;
  // The first record was taken just before the first step computed.
  for (const MemoryEvent& e : events) {
    if (e.type == MemoryEventType::kCompute) break;
    const int c = static_cast<int>(e.category);
    if (e.type == MemoryEventType::kAlloc) base[c] -= e.bytes;
    if (e.type == MemoryEventType::kFree) base[c] += e.bytes;
  }
  return base;
}

std::vector<MemorySample> MemorySamples(const std::vector<MemoryEvent>& events,
                                        const std::vector<double>& times, const DeviceBytes& base) {
  std::vector<MemorySample> samples;
  MemorySample now;
  now.device = base;
  now.time = times.empty() ? 0 : times.front();
  samples.push_back(now);
  TensorId tensors = 0;
  for (const MemoryEvent& e : events) tensors = std::max(tensors, e.tensor + 1);
  std::vector<size_t> host(tensors, 0);          // by tensor: its host copy's bytes
  std::vector<bool> keeps_host(tensors, false);  // its next free is an offload's
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    const int c = static_cast<int>(e.category);
    if (e.type == MemoryEventType::kBeginOffload && e.bytes > 0 && host[e.tensor] == 0) {
      host[e.tensor] = e.bytes;
      now.host += e.bytes;
    } else if (e.type == MemoryEventType::kFinishOffload) {
      keeps_host[e.tensor] = true;
    } else if (e.type == MemoryEventType::kAlloc) {
      now.device[c] += e.bytes;
    } else if (e.type == MemoryEventType::kFree) {
      now.device[c] -= e.bytes;
      if (e.tensor != kNoTensor && keeps_host[e.tensor]) {
        keeps_host[e.tensor] = false;
      } else if (e.tensor != kNoTensor) {
        now.host -= host[e.tensor];
        host[e.tensor] = 0;
      }
    } else {
      continue;
    }
    now.time = times[i];
    samples.push_back(now);
  }
  return samples;
}

Timeline SimulateIteration(const NetworkView& view, const std::vector<MemoryEvent>& events,
                           const IterationCosts& costs, const DeviceProfile& profile,
                           const DeviceBytes& base) {
  Simulator simulator(view, costs, profile);
  const std::vector<double> times = simulator.Replay(events);
  Timeline timeline = simulator.Finish();
  timeline.memory = MemorySamples(events, times, base);
  return timeline;
}

}  // namespace spill
