#include "framework/cuda/cuda_device.h"

#include <cstdio>
#include <cstdlib>

#include "framework/cuda/cuda_check.h"
#include "framework/device_registry.h"
#include "framework/units.h"

namespace spill {
namespace cuda {

void Fail(const char* library, const char* call, const char* message, const char* file, int line) {
  std::fprintf(stderr, "spill: %s call failed at %s:%d: %s: %s\n", library, file, line, call,
               message);
  std::abort();
}

const char* CublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

}  // namespace cuda

CudaEvent::CudaEvent() {
  SPILL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}
CudaEvent::~CudaEvent() { cudaEventDestroy(event_); }
void CudaEvent::Synchronize() { SPILL_CUDA_CHECK(cudaEventSynchronize(event_)); }
bool CudaEvent::IsComplete() {
  cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  SPILL_CUDA_CHECK(status);
  return true;
}

CudaQueue::CudaQueue() {
  SPILL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
CudaQueue::~CudaQueue() { cudaStreamDestroy(stream_); }

std::shared_ptr<Event> CudaQueue::Record() {
  auto event = std::make_shared<CudaEvent>();
  SPILL_CUDA_CHECK(cudaEventRecord(event->get(), stream_));
  return event;
}

void CudaQueue::Wait(const std::shared_ptr<Event>& event) {
  if (auto* cuda = dynamic_cast<CudaEvent*>(event.get())) {
    SPILL_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda->get(), 0));
  } else {
    event->Synchronize();
  }
}

void CudaQueue::Synchronize() { SPILL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

bool CudaAvailable(std::string* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why)
      *why = std::string("no usable CUDA driver or GPU (") + cudaGetErrorString(status) + ")";
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA GPU found";
    return false;
  }
  return true;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal) {
  std::string why;
  if (!CudaAvailable(&why)) return Unimplemented("cannot use the CUDA device: " + why);
  int count = 0;
  SPILL_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    return InvalidArgument("GPU " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " found)");
  }
  SPILL_CUDA_CHECK(cudaSetDevice(ordinal));
  std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal));
  cudaDeviceProp props;
  SPILL_CUDA_CHECK(cudaGetDeviceProperties(&props, ordinal));
  device->description_ = std::string("cuda:") + std::to_string(ordinal) + " (" + props.name + ", " +
                         FormatBytes(static_cast<double>(props.totalGlobalMem)) + ")";
  device->compute_ = std::make_unique<CudaQueue>();
  device->copy_ = std::make_unique<CudaQueue>();
  SPILL_CUBLAS_CHECK(cublasCreate(&device->cublas_));
  SPILL_CUBLAS_CHECK(cublasSetStream(device->cublas_, device->compute_stream()));
  // Exact float32 arithmetic: no TF32 tensor-core rounding.
  SPILL_CUBLAS_CHECK(cublasSetMathMode(device->cublas_, CUBLAS_PEDANTIC_MATH));
  SPILL_CUDNN_CHECK(cudnnCreate(&device->cudnn_));
  SPILL_CUDNN_CHECK(cudnnSetStream(device->cudnn_, device->compute_stream()));
  return device;
}

CudaDevice::~CudaDevice() {
  if (compute_) compute_->Synchronize();
  if (copy_) copy_->Synchronize();
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
}

StatusOr<void*> CudaDevice::ReserveDeviceRegion(size_t bytes) {
  void* base = nullptr;
  cudaError_t status = cudaMalloc(&base, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return OutOfMemory("cudaMalloc of a " + FormatBytes(static_cast<double>(bytes)) +
                       " device region failed (" + cudaGetErrorString(status) + "; " +
                       FormatBytes(static_cast<double>(free)) + " of " +
                       FormatBytes(static_cast<double>(total)) + " free)");
  }
  return base;
}

void CudaDevice::ReleaseDeviceRegion(void* base) {
  if (base) SPILL_CUDA_CHECK(cudaFree(base));
}

StatusOr<void*> CudaDevice::ReserveHostRegion(size_t bytes) {
  void* base = nullptr;
  cudaError_t status = cudaHostAlloc(&base, bytes, cudaHostAllocDefault);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return OutOfMemory("cudaHostAlloc of " + FormatBytes(static_cast<double>(bytes)) +
                       " of page-locked host memory failed (" + cudaGetErrorString(status) +
                       "); lower memory.host_budget");
  }
  return base;
}

void CudaDevice::ReleaseHostRegion(void* base) {
  if (base) SPILL_CUDA_CHECK(cudaFreeHost(base));
}

void CudaDevice::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) {
  copied_[static_cast<int>(kind)] += bytes;
  cudaStream_t stream = static_cast<CudaQueue&>(queue).stream();
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (kind == CopyKind::kDeviceToDevice && d < s && d + bytes > s) {
    // Overlapping downward move (compaction): chunks no longer than the gap
    // never overlap, and in order they move the bytes as memmove would.
    const size_t gap = static_cast<size_t>(s - d);
    for (size_t done = 0; done < bytes; done += gap) {
      SPILL_CUDA_CHECK(cudaMemcpyAsync(d + done, s + done, std::min(gap, bytes - done),
                                       cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  cudaMemcpyKind direction = cudaMemcpyDefault;
  switch (kind) {
    case CopyKind::kHostToDevice:
      direction = cudaMemcpyHostToDevice;
      break;
    case CopyKind::kDeviceToHost:
      direction = cudaMemcpyDeviceToHost;
      break;
    case CopyKind::kDeviceToDevice:
      direction = cudaMemcpyDeviceToDevice;
      break;
    case CopyKind::kHostToHost:
      direction = cudaMemcpyHostToHost;
      break;
  }
  SPILL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, direction, stream));
}

void CudaDevice::MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) {
  SPILL_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, static_cast<CudaQueue&>(queue).stream()));
}

namespace {

const bool registered = RegisterDeviceFactory(
    "cuda", DeviceType::kCuda, [](const DeviceConfig& c) -> StatusOr<std::unique_ptr<Device>> {
      SPILL_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Create(c.ordinal));
      return std::unique_ptr<Device>(std::move(device));
    });

}  // namespace
}  // namespace spill
