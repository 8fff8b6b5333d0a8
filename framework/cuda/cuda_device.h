// The CUDA device: the GPU backend of the device interface.
//
//   * device memory: one cudaMalloc region of the budget, reserved up front
//     and carved by the memory runtime's pool (never managed memory);
//   * host memory for offloaded tensors: one page-locked (cudaHostAlloc)
//     region, so copies are true DMA that overlaps computation;
//   * a compute stream and a copy stream, with CUDA events;
//   * the cuBLAS and cuDNN handles the layers use, bound to the compute stream.
#ifndef SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_
#define SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <memory>
#include <string>

#include "framework/device.h"

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
  CudaQueue();
  ~CudaQueue() override;
  std::shared_ptr<Event> Record() override;
  void Wait(const std::shared_ptr<Event>& event) override;
  void Synchronize() override;
  cudaStream_t stream() const { return stream_; }

 private:
  cudaStream_t stream_;
};

class CudaDevice : public Device {
 public:
  // Fails when no GPU can be used (the message says why).
  static StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal);
  ~CudaDevice() override;

  DeviceType type() const override { return DeviceType::kCuda; }
  std::string Describe() const override { return description_; }

  StatusOr<void*> ReserveDeviceRegion(size_t bytes) override;
  void ReleaseDeviceRegion(void* base) override;
  StatusOr<void*> ReserveHostRegion(size_t bytes) override;
  void ReleaseHostRegion(void* base) override;

  Queue& compute_queue() override { return *compute_; }
  Queue& copy_queue() override { return *copy_; }

  void CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) override;
  void MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) override;
  size_t bytes_copied(CopyKind kind) const override { return copied_[static_cast<int>(kind)]; }

  cudaStream_t compute_stream() const { return compute_->stream(); }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  int ordinal() const { return ordinal_; }

 private:
  explicit CudaDevice(int ordinal);

  int ordinal_;
  std::string description_;
  std::unique_ptr<CudaQueue> compute_;
  std::unique_ptr<CudaQueue> copy_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::atomic<size_t> copied_[4] = {};
};

// True when a CUDA GPU can be used; otherwise `why` says why not.
bool CudaAvailable(std::string* why);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_CUDA_DEVICE_H_
