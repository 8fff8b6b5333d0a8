// The CPU device: a complete backend for machines without a GPU.
//
// Its "device memory" is an arena of fixed capacity, allocated separately
// from the host region used for offloading, so every memory technique runs and
// is measured exactly as it would be on a GPU. Compute runs inline on the
// calling thread (kernels use OpenMP across the cores); copies run on two
// worker threads, one per direction like a GPU's copy engines, optionally throttled to a link
// bandwidth so that overlap of copies and compute can be studied without a PCIe bus. The throttle
// sleeps: a copy of B bytes at rate R ends B / R seconds after it began (or when the memcpy ends,
// if later), and the worker holds no core while it waits, so compute keeps every core but the
// memcpy's.
//
// Two stand-ins let CPU tests check what a GPU would be told: pinning counts
// the host bytes that would be page-locked and fails past a limit that a test
// sets; annotations keep the live suballocations of the device region that a
// memory checker would know of, and count every call that does not match
// them (a block announced twice, overlapping another, or freed unannounced).
#ifndef SPILL_FRAMEWORK_DEVICE_CPU_DEVICE_H_
#define SPILL_FRAMEWORK_DEVICE_CPU_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "framework/device/device.h"
#include "framework/device/file_region.h"

namespace spill {

// One host<->device copy as the worker ran it, on the MonotonicSeconds clock.
struct CopySpan {
  CopyKind kind = CopyKind::kHostToDevice;
  size_t bytes = 0;
  double begin = 0;
  double end = 0;
};

struct CpuDeviceOptions {
  // Throttle for host<->device copies in bytes per second; 0 = unthrottled.
  double link_bytes_per_second = 0;
};

// A FIFO of tasks executed by one worker thread. Events are positions in the
// FIFO: an event completes when the worker has finished every task enqueued
// before it was recorded.
class CpuWorkerQueue : public Queue {
 public:
  CpuWorkerQueue();
  ~CpuWorkerQueue() override;

  void Enqueue(std::function<void()> task);
  std::shared_ptr<Event> Record() override;
  void Wait(const std::shared_ptr<Event>& event) override;
  void Synchronize() override;

  // Internal: used by events.
  void WaitUntil(uint64_t sequence);
  bool Reached(uint64_t sequence);

 private:
  void Run();

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<std::function<void()>> tasks_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

// What the annotation stand-in was told.
struct AnnotationStats {
  int64_t allocations = 0;  // AnnotateAllocation calls
  int64_t frees = 0;        // AnnotateFree calls
  int64_t live = 0;         // blocks announced and not yet freed
  size_t live_bytes = 0;
  int64_t mismatches = 0;  // calls that contradict the live blocks
  std::string first_mismatch;
  // Device-to-device copies that read or write outside the announced blocks
  // (what a memory checker reports as an invalid access), once blocks exist.
  int64_t copies_outside = 0;
};

// Work on this queue runs immediately on the caller's thread.
class CpuInlineQueue : public Queue {
 public:
  std::shared_ptr<Event> Record() override;
  void Wait(const std::shared_ptr<Event>& event) override { event->Synchronize(); }
  void Synchronize() override {}
};

class CpuDevice : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options = {});
  ~CpuDevice() override;

  DeviceType type() const override { return DeviceType::kCpu; }
  std::string Describe() const override;

  StatusOr<void*> ReserveDeviceRegion(size_t bytes) override;
  void ReleaseDeviceRegion(void* base) override;
  StatusOr<void*> ReserveHostRegion(size_t bytes) override;
  StatusOr<void*> ReserveFileHostRegion(size_t bytes, const std::string& directory) override;
  void EnqueueHostTask(Queue& queue, std::function<void()> task) override;
  void ReleaseHostRegion(void* base) override;
  Status EnsureHostPinned(void* base, size_t bytes) override;
  // A memfd as physical memory, mapped with mmap (cpu_virtual_memory.cc).
  StatusOr<std::unique_ptr<VirtualMemory>> CreateVirtualMemory(size_t chunk_bytes, size_t chunks,
                                                               size_t address_bytes) override;
  void AnnotateAllocation(void* p, size_t bytes) override;
  void AnnotateFree(void* p) override;

  Queue& compute_queue() override { return compute_; }
  Queue& host_to_device_queue() override { return to_device_; }
  Queue& device_to_host_queue() override { return to_host_; }

  void CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) override;
  void MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) override;
  void ConvertAsync(void* dst, DType to, const void* src, DType from, int64_t count,
                    Queue& queue) override;
  size_t bytes_copied(CopyKind kind) const override;

  void set_link_bytes_per_second(double rate) { options_.link_bytes_per_second = rate; }

  // Records the span of every host<->device copy on the copy queues from
  // now on (for traces); TakeCopySpans hands them over in order of their
  // ends.
  void set_record_copies(bool on);
  std::vector<CopySpan> TakeCopySpans();

  // The pinning stand-in: host bytes "page-locked" so far over all regions,
  // and the total past which pinning fails (a system's locked-memory limit).
  size_t pinned_bytes() const;
  size_t pinned_peak() const;  // the most pinned at once
  void set_pin_limit(size_t bytes);
  // The annotation stand-in.
  AnnotationStats annotations() const;

 private:
  // One of the two copy queues, or null for another queue.
  CpuWorkerQueue* CopyWorker(Queue& queue);
  // Sleeps until the link would have carried `bytes`, counted from `begin`.
  void Throttle(size_t bytes, CopyKind kind, double begin) const;
  void RecordCopy(CopyKind kind, size_t bytes, double begin);
  void Mismatch(const std::string& what);
  bool InsideAnnotatedBlock(const void* p, size_t bytes) const;  // under hooks_mutex_
  void CheckAnnotatedCopy(void* dst, const void* src, size_t bytes, CopyKind kind);

  CpuDeviceOptions options_;
  CpuInlineQueue compute_;
  CpuWorkerQueue to_device_;
  CpuWorkerQueue to_host_;
  std::atomic<size_t> copied_[4] = {};
  std::mutex spans_mutex_;
  bool record_copies_ = false;
  std::vector<CopySpan> spans_;

  mutable std::mutex hooks_mutex_;            // guards what follows
  std::map<void*, size_t> pinned_extent_;     // host region -> bytes pinned
  std::map<void*, FileRegion> file_regions_;  // file-backed host regions
  size_t pinned_bytes_ = 0;
  size_t pinned_peak_ = 0;
  size_t pin_limit_ = SIZE_MAX;
  std::map<const char*, size_t> annotated_;  // live block -> bytes
  AnnotationStats annotation_stats_;
};

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_CPU_DEVICE_H_
