// The CUDA device: the GPU backend of the device interface.
//
//   * device memory: one cudaMalloc region of the budget, reserved up front
//     and carved by the memory runtime's pool (never managed memory) - or,
//     for the va allocator, chunks mapped into reserved addresses
//     (cuda_virtual_memory.cc);
//   * host memory for offloaded tensors: one region of address space,
//     page-locked (cudaHostRegister) chunk by chunk as the memory runtime
//     reaches into it, so copies are true DMA that overlaps computation
//     without locking the whole host budget up front. A copy never spans two
//     chunks (it is split at their boundaries): each registration is its own
//     allocation to the driver;
//   * with SPILL_CUDA_MEMCHECK=1, the device region and its blocks
//     annotated for compute-sanitizer (memcheck_annotations.h);
//   * the driver, runtime, cuDNN and cuBLAS versions checked against the
//     build when the device is created (cuda_versions.h), and logged once;
//   * a compute stream and a copy stream, with CUDA events;
//   * the cuBLAS and cuDNN handles the layers use, bound to the compute stream.
#ifndef SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_
#define SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "framework/device/device.h"
#include "framework/device/file_region.h"

namespace spill {

class CudaEvent : public Event {
 public:
  CudaEvent();
  ~CudaEvent() override;
  void Synchronize() override;
  bool IsComplete() override;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
};

class CudaQueue : public Queue {
 public:
  // A non-blocking stream; an error (not an abort) when none can be made.
  static StatusOr<std::unique_ptr<CudaQueue>> Create();
  ~CudaQueue() override;
  std::shared_ptr<Event> Record() override;
  void Wait(const std::shared_ptr<Event>& event) override;
  void Synchronize() override;
  cudaStream_t stream() const { return stream_; }

 private:
  explicit CudaQueue(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_;
};

// Whether convolutions and matrix products may round their operands to TF32
// on tensor cores (run.precision tf32): set for the process when its device
// is created, read by the cuBLAS handle and by the convolutions' cuDNN
// descriptors. Off: exact float32 (CUBLAS_PEDANTIC_MATH, CUDNN_FMA_MATH).
bool Tf32();

class CudaDevice : public Device {
 public:
  // Fails when no GPU can be used (the message says why).
  // `tf32`: tensor-core math (cuda::Tf32) for this process's devices.
  static StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal, bool tf32 = false);
  ~CudaDevice() override;

  DeviceType type() const override { return DeviceType::kCuda; }
  std::string Describe() const override { return description_; }

  StatusOr<void*> ReserveDeviceRegion(size_t bytes) override;
  void ReleaseDeviceRegion(void* base) override;
  StatusOr<void*> ReserveHostRegion(size_t bytes) override;
  StatusOr<void*> ReserveFileHostRegion(size_t bytes, const std::string& directory) override;
  void EnqueueHostTask(Queue& queue, std::function<void()> task) override;
  void ReleaseHostRegion(void* base) override;
  Status EnsureHostPinned(void* base, size_t bytes) override;
  // CUDA's virtual memory management (cuda_virtual_memory.cc).
  StatusOr<std::unique_ptr<VirtualMemory>> CreateVirtualMemory(size_t chunk_bytes, size_t chunks,
                                                               size_t address_bytes) override;
  void AnnotateAllocation(void* p, size_t bytes) override;
  void AnnotateFree(void* p) override;

  Queue& compute_queue() override { return *compute_; }
  Queue& host_to_device_queue() override { return *to_device_; }
  Queue& device_to_host_queue() override { return *to_host_; }

  void CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) override;
  void MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) override;
  void ConvertAsync(void* dst, DType to, const void* src, DType from, int64_t count,
                    Queue& queue) override;
  size_t bytes_copied(CopyKind kind) const override { return copied_[static_cast<int>(kind)]; }

  cudaStream_t compute_stream() const { return compute_->stream(); }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  int ordinal() const { return ordinal_; }

 private:
  explicit CudaDevice(int ordinal);
  Status CreateHandles();
  // Enqueues one copy, split where the host side crosses a pinned chunk.
  void CopyPieces(char* dst, const char* src, size_t bytes, cudaMemcpyKind direction,
                  cudaStream_t stream);
  // Bytes from `p` to the end of its pinned chunk (SIZE_MAX outside every
  // host region).
  size_t HostRunFrom(const char* p);

  struct HostRegion {
    size_t reserved = 0;  // bytes of address space
    size_t pinned = 0;    // page-locked prefix, in chunks
    std::string refusal;  // why locking more failed, once it did
    // File-backed (memory.host_tier: file): never page-locked (copies are
    // pageable); disk space claimed as it is used.
    bool file = false;
    FileRegion file_region;
  };

  int ordinal_;
  std::string description_;
  std::unique_ptr<CudaQueue> compute_;
  std::unique_ptr<CudaQueue> to_device_;  // a stream each way: the two copy engines
  std::unique_ptr<CudaQueue> to_host_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::atomic<size_t> copied_[4] = {};
  std::mutex host_mutex_;                     // guards host_regions_
  std::map<char*, HostRegion> host_regions_;  // by base address
  void* memcheck_heap_ = nullptr;             // the device region, annotated
};

// True when a CUDA GPU can be used; otherwise `why` says why not.
bool CudaAvailable(std::string* why);

// The libraries' versions in one line (cuda_versions.h), readable without a
// GPU: what a failing GPU test prints.
std::string CudaLibrariesSeen();

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_
