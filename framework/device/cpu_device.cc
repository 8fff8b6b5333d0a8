#include "framework/device/cpu_device.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>

#include "framework/base/clock.h"
#include "framework/device/convert.h"

namespace spill {
namespace {

// Regions are mapped, not malloc'ed: untouched pages of a large budget cost no
// physical memory, and the arena stays apart from the host heap.
StatusOr<void*> MapRegion(size_t bytes, const char* what) {
  if (bytes == 0) return InvalidArgument(std::string(what) + " region of 0 bytes");
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return OutOfMemory(std::string("cannot reserve a ") + what + " region of " +
                       std::to_string(bytes) + " bytes");
  }
  return base;
}

std::mutex& RegionMutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<void*, size_t>& RegionSizes() {
  static std::map<void*, size_t> sizes;
  return sizes;
}

void Remember(void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(RegionMutex());
  RegionSizes()[base] = bytes;
}

void Unmap(void* base) {
  if (base == nullptr) return;
  size_t bytes;
  {
    std::lock_guard<std::mutex> lock(RegionMutex());
    auto it = RegionSizes().find(base);
    SPILL_CHECK(it != RegionSizes().end()) << "unknown region";
    bytes = it->second;
    RegionSizes().erase(it);
  }
  munmap(base, bytes);
}

bool IsLinkCopy(CopyKind kind) {
  return kind == CopyKind::kHostToDevice || kind == CopyKind::kDeviceToHost;
}

class CompletedEvent : public Event {
 public:
  void Synchronize() override {}
  bool IsComplete() override { return true; }
};

class WorkerEvent : public Event {
 public:
  WorkerEvent(CpuWorkerQueue* queue, uint64_t sequence) : queue_(queue), sequence_(sequence) {}
  void Synchronize() override { queue_->WaitUntil(sequence_); }
  bool IsComplete() override { return queue_->Reached(sequence_); }

 private:
  CpuWorkerQueue* queue_;
  uint64_t sequence_;
};

}  // namespace

const char* DeviceTypeName(DeviceType type) { return type == DeviceType::kCpu ? "cpu" : "cuda"; }

void Device::CopySync(void* dst, const void* src, size_t bytes, CopyKind kind) {
  CopyAsync(dst, src, bytes, kind, compute_queue());
  compute_queue().Synchronize();
}

// ---------------------------------------------------------------------------
// CpuWorkerQueue

CpuWorkerQueue::CpuWorkerQueue() : worker_([this] { Run(); }) {}

CpuWorkerQueue::~CpuWorkerQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void CpuWorkerQueue::Enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
    ++enqueued_;
  }
  work_ready_.notify_one();
}

std::shared_ptr<Event> CpuWorkerQueue::Record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::make_shared<WorkerEvent>(this, enqueued_);
}

void CpuWorkerQueue::Wait(const std::shared_ptr<Event>& event) {
  if (event->IsComplete()) return;
  Enqueue([event] { event->Synchronize(); });
}

void CpuWorkerQueue::Synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    target = enqueued_;
  }
  WaitUntil(target);
}

void CpuWorkerQueue::WaitUntil(uint64_t sequence) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return completed_ >= sequence; });
}

bool CpuWorkerQueue::Reached(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= sequence;
}

void CpuWorkerQueue::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++completed_;
    }
    work_done_.notify_all();
  }
}

std::shared_ptr<Event> CpuInlineQueue::Record() { return std::make_shared<CompletedEvent>(); }

// ---------------------------------------------------------------------------
// CpuDevice

CpuDevice::CpuDevice(CpuDeviceOptions options) : options_(options) {}

CpuDevice::~CpuDevice() { SynchronizeCopies(); }

CpuWorkerQueue* CpuDevice::CopyWorker(Queue& queue) {
  if (&queue == &to_device_) return &to_device_;
  if (&queue == &to_host_) return &to_host_;
  return nullptr;
}

std::string CpuDevice::Describe() const {
  std::string text =
      "cpu (arena device memory, inline compute queue, a threaded copy queue each way";
  if (options_.link_bytes_per_second > 0) {
    text += ", link throttled to " + std::to_string(options_.link_bytes_per_second / 1e9) + " GB/s";
  }
  return text + ")";
}

StatusOr<void*> CpuDevice::ReserveDeviceRegion(size_t bytes) {
  SPILL_ASSIGN_OR_RETURN(void* base, MapRegion(bytes, "device"));
  Remember(base, bytes);
  return base;
}

// Releasing the region forgets its annotated blocks, as unregistering a
// heap does for a memory checker.
void CpuDevice::ReleaseDeviceRegion(void* base) {
  if (base == nullptr) return;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(RegionMutex());
    auto it = RegionSizes().find(base);
    if (it != RegionSizes().end()) bytes = it->second;
  }
  {
    std::lock_guard<std::mutex> lock(hooks_mutex_);
    const char* begin = static_cast<const char*>(base);
    auto first = annotated_.lower_bound(begin);
    auto last = annotated_.lower_bound(begin + bytes);
    for (auto it = first; it != last; ++it) {
      annotation_stats_.live--;
      annotation_stats_.live_bytes -= it->second;
    }
    annotated_.erase(first, last);
  }
  Unmap(base);
}

StatusOr<void*> CpuDevice::ReserveHostRegion(size_t bytes) {
  SPILL_ASSIGN_OR_RETURN(void* base, MapRegion(bytes, "host"));
  Remember(base, bytes);
  return base;
}

StatusOr<void*> CpuDevice::ReserveFileHostRegion(size_t bytes, const std::string& directory) {
  SPILL_ASSIGN_OR_RETURN(FileRegion region, MapFileRegion(bytes, directory));
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  file_regions_[region.base] = region;
  return region.base;
}

void CpuDevice::EnqueueHostTask(Queue& queue, std::function<void()> task) {
  if (CpuWorkerQueue* worker = CopyWorker(queue)) {
    worker->Enqueue(std::move(task));
  } else {
    task();  // the compute queue runs inline: everything before it is done
  }
}

void CpuDevice::ReleaseHostRegion(void* base) {
  SynchronizeCopies();  // copies and host tasks may still touch the region
  {
    std::lock_guard<std::mutex> lock(hooks_mutex_);
    auto file = file_regions_.find(base);
    if (file != file_regions_.end()) {
      UnmapFileRegion(&file->second);
      file_regions_.erase(file);
      return;
    }
    auto it = pinned_extent_.find(base);
    if (it != pinned_extent_.end()) {
      pinned_bytes_ -= it->second;
      pinned_extent_.erase(it);
    }
  }
  Unmap(base);
}

Status CpuDevice::EnsureHostPinned(void* base, size_t bytes) {
  {
    // A file-backed region is not locked: it claims disk space instead.
    std::lock_guard<std::mutex> lock(hooks_mutex_);
    auto file = file_regions_.find(base);
    if (file != file_regions_.end()) return ClaimFileRegion(&file->second, bytes);
  }
  size_t region = 0;
  {
    std::lock_guard<std::mutex> lock(RegionMutex());
    auto it = RegionSizes().find(base);
    SPILL_CHECK(it != RegionSizes().end()) << "pinning an unknown host region";
    region = it->second;
  }
  SPILL_CHECK(bytes <= region) << "pinning " << bytes << " bytes of a " << region
                               << "-byte host region";
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  size_t& pinned = pinned_extent_[base];
  const size_t target = PinnedExtentFor(bytes, region);
  if (target <= pinned) return Status::Ok();
  if (pinned_bytes_ + (target - pinned) > pin_limit_) {
    return OutOfMemory("page-locking host memory failed at " + std::to_string(pinned) +
                       " bytes of the " + std::to_string(region) +
                       "-byte host region (the stand-in's limit is " + std::to_string(pin_limit_) +
                       " bytes in all)");
  }
  pinned_bytes_ += target - pinned;
  pinned_peak_ = std::max(pinned_peak_, pinned_bytes_);
  pinned = target;
  return Status::Ok();
}

size_t CpuDevice::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  return pinned_bytes_;
}

size_t CpuDevice::pinned_peak() const {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  return pinned_peak_;
}

void CpuDevice::set_pin_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  pin_limit_ = bytes;
}

void CpuDevice::Mismatch(const std::string& what) {
  if (annotation_stats_.mismatches++ == 0) annotation_stats_.first_mismatch = what;
}

void CpuDevice::AnnotateAllocation(void* p, size_t bytes) {
  const char* begin = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  annotation_stats_.allocations++;
  auto next = annotated_.lower_bound(begin);
  const bool overlaps_next = next != annotated_.end() && next->first < begin + bytes;
  const bool overlaps_previous =
      next != annotated_.begin() && std::prev(next)->first + std::prev(next)->second > begin;
  if (overlaps_next || overlaps_previous) {
    Mismatch("a block of " + std::to_string(bytes) + " bytes overlaps a live one");
    return;
  }
  annotated_[begin] = bytes;
  annotation_stats_.live++;
  annotation_stats_.live_bytes += bytes;
}

void CpuDevice::AnnotateFree(void* p) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  annotation_stats_.frees++;
  auto it = annotated_.find(static_cast<const char*>(p));
  if (it == annotated_.end()) {
    Mismatch("a block that was not announced was freed");
    return;
  }
  annotation_stats_.live--;
  annotation_stats_.live_bytes -= it->second;
  annotated_.erase(it);
}

AnnotationStats CpuDevice::annotations() const {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  return annotation_stats_;
}

void CpuDevice::Throttle(size_t bytes, CopyKind kind, double begin) const {
  if (options_.link_bytes_per_second <= 0 || !IsLinkCopy(kind)) return;
  // Pace to a deadline: the memcpy's own time counts towards the link's.
  const double left = begin + bytes / options_.link_bytes_per_second - MonotonicSeconds();
  if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
}

void CpuDevice::set_record_copies(bool on) {
  std::lock_guard<std::mutex> lock(spans_mutex_);
  record_copies_ = on;
}

std::vector<CopySpan> CpuDevice::TakeCopySpans() {
  std::lock_guard<std::mutex> lock(spans_mutex_);
  std::vector<CopySpan> spans;
  spans.swap(spans_);
  return spans;
}

void CpuDevice::RecordCopy(CopyKind kind, size_t bytes, double begin) {
  std::lock_guard<std::mutex> lock(spans_mutex_);
  if (record_copies_ && IsLinkCopy(kind)) {
    spans_.push_back({kind, bytes, begin, MonotonicSeconds()});
  }
}

bool CpuDevice::InsideAnnotatedBlock(const void* p, size_t bytes) const {
  const char* begin = static_cast<const char*>(p);
  auto next = annotated_.upper_bound(begin);
  if (next == annotated_.begin()) return false;
  const auto& [block, block_bytes] = *std::prev(next);
  return begin + bytes <= block + block_bytes;
}

void CpuDevice::CheckAnnotatedCopy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (kind != CopyKind::kDeviceToDevice || bytes == 0) return;
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  if (annotated_.empty()) return;
  if (!InsideAnnotatedBlock(dst, bytes) || !InsideAnnotatedBlock(src, bytes)) {
    annotation_stats_.copies_outside++;
  }
}

void CpuDevice::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) {
  copied_[static_cast<int>(kind)] += bytes;
  CheckAnnotatedCopy(dst, src, bytes, kind);
  if (&queue == &compute_) {
    std::memmove(dst, src, bytes);
    return;
  }
  CpuWorkerQueue* worker = CopyWorker(queue);
  SPILL_CHECK(worker != nullptr) << "queue does not belong to this device";
  worker->Enqueue([this, dst, src, bytes, kind] {
    const double begin = MonotonicSeconds();
    std::memmove(dst, src, bytes);
    Throttle(bytes, kind, begin);
    RecordCopy(kind, bytes, begin);
  });
}

void CpuDevice::MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) {
  if (&queue == &compute_) {
    std::memset(dst, value, bytes);
    return;
  }
  CpuWorkerQueue* worker = CopyWorker(queue);
  SPILL_CHECK(worker != nullptr) << "queue does not belong to this device";
  worker->Enqueue([dst, value, bytes] { std::memset(dst, value, bytes); });
}

void CpuDevice::ConvertAsync(void* dst, DType to, const void* src, DType from, int64_t count,
                             Queue& queue) {
  if (&queue == &compute_) {
    Convert(src, from, dst, to, count);
    return;
  }
  CpuWorkerQueue* worker = CopyWorker(queue);
  SPILL_CHECK(worker != nullptr) << "queue does not belong to this device";
  worker->Enqueue([dst, to, src, from, count] { Convert(src, from, dst, to, count); });
}

size_t CpuDevice::bytes_copied(CopyKind kind) const { return copied_[static_cast<int>(kind)]; }

}  // namespace spill
