#include "framework/cuda/cuda_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "framework/base/logging.h"
#include "framework/base/units.h"
#include "framework/cuda/convert_kernel_cuda.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_versions.h"
#include "framework/cuda/memcheck_annotations.h"
#include "framework/cuda/move_kernel_cuda.h"
#include "framework/device/device_registry.h"
#include "framework/device/downward_move.h"

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

StatusOr<std::unique_ptr<CudaQueue>> CudaQueue::Create() {
  cudaStream_t stream = nullptr;
  const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return Internal(std::string("cannot use the CUDA device: cudaStreamCreateWithFlags failed (") +
                    cudaGetErrorString(status) + ")");
  }
  return std::unique_ptr<CudaQueue>(new CudaQueue(stream));
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

std::string CudaLibrariesSeen() { return DescribeCudaLibraries(ReadCudaLibraryVersions()); }

namespace {

// The libraries are checked, and their versions logged, once per process.
Status CheckLibrariesOnce() {
  static const Status status = [] {
    const CudaLibraryVersions versions = ReadCudaLibraryVersions();
    std::vector<std::string> warnings;
    Status checked = CheckCudaLibraries(versions, &warnings);
    if (checked.ok()) {
      SPILL_LOG_INFO(kGeneral) << "CUDA: " << DescribeCudaLibraries(versions);
    }
    for (const std::string& warning : warnings) SPILL_LOG_WARNING(kGeneral) << "CUDA: " << warning;
    return checked;
  }();
  return status;
}

size_t PageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {}

namespace {
std::atomic<bool> tf32{false};
}  // namespace

bool Tf32() { return tf32.load(); }

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal, bool tensor_math) {
  tf32 = tensor_math;
  std::string why;
  if (!CudaAvailable(&why)) {
    return Unimplemented("cannot use the CUDA device: " + why + " [" + CudaLibrariesSeen() + "]");
  }
  SPILL_RETURN_IF_ERROR(CheckLibrariesOnce());
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
  SPILL_ASSIGN_OR_RETURN(device->compute_, CudaQueue::Create());
  SPILL_ASSIGN_OR_RETURN(device->to_device_, CudaQueue::Create());
  SPILL_ASSIGN_OR_RETURN(device->to_host_, CudaQueue::Create());
  SPILL_RETURN_IF_ERROR(device->CreateHandles());
  return device;
}

namespace {

// A library's handle could not be made: the GPU is out of memory, or the
// library cannot use it. Either way the device cannot run; say which.
Status HandleFailure(const char* call, const char* message, bool out_of_memory) {
  const std::string text = std::string("cannot use the CUDA device: ") + call + " failed (" +
                           message + ") [" + CudaLibrariesSeen() + "]";
  return out_of_memory ? OutOfMemory(text + "; another process may hold the GPU's memory")
                       : Internal(text);
}

}  // namespace

// The cuBLAS and cuDNN handles, on the compute stream. A failure is an
// error, not an abort: a GPU another process has filled fails here.
Status CudaDevice::CreateHandles() {
  cublasStatus_t blas = cublasCreate(&cublas_);
  if (blas != CUBLAS_STATUS_SUCCESS) {
    cublas_ = nullptr;
    return HandleFailure("cublasCreate", cuda::CublasStatusName(blas),
                         blas == CUBLAS_STATUS_ALLOC_FAILED);
  }
  blas = cublasSetStream(cublas_, compute_stream());
  // Exact float32 arithmetic unless TF32 was asked for (Tf32).
  if (blas == CUBLAS_STATUS_SUCCESS) {
    blas = cublasSetMathMode(cublas_, Tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
  }
  if (blas != CUBLAS_STATUS_SUCCESS) {
    return HandleFailure("setting up the cuBLAS handle", cuda::CublasStatusName(blas), false);
  }
  cudnnStatus_t dnn = cudnnCreate(&cudnn_);
  if (dnn != CUDNN_STATUS_SUCCESS) {
    cudnn_ = nullptr;
    cudaGetLastError();  // clear a sticky runtime error, if any
    return HandleFailure("cudnnCreate", cudnnGetErrorString(dnn), dnn == CUDNN_STATUS_ALLOC_FAILED);
  }
  dnn = cudnnSetStream(cudnn_, compute_stream());
  if (dnn != CUDNN_STATUS_SUCCESS) {
    return HandleFailure("cudnnSetStream", cudnnGetErrorString(dnn), false);
  }
  return Status::Ok();
}

CudaDevice::~CudaDevice() {
  if (compute_) compute_->Synchronize();
  if (to_device_) to_device_->Synchronize();
  if (to_host_) to_host_->Synchronize();
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
}

StatusOr<void*> CudaDevice::ReserveDeviceRegion(size_t bytes) {
  SPILL_CHECK(memcheck_heap_ == nullptr) << "one device region at a time";
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
  memcheck_heap_ = cuda::RegisterPoolHeap(base, bytes);
  return base;
}

void CudaDevice::ReleaseDeviceRegion(void* base) {
  if (base == nullptr) return;
  cuda::UnregisterPoolHeap(memcheck_heap_);
  memcheck_heap_ = nullptr;
  SPILL_CUDA_CHECK(cudaFree(base));
}

void CudaDevice::AnnotateAllocation(void* p, size_t bytes) {
  cuda::RegisterPoolBlock(memcheck_heap_, p, bytes);
}

void CudaDevice::AnnotateFree(void* p) {
  if (memcheck_heap_ != nullptr) cuda::UnregisterPoolBlock(p);
}

// Address space only: pages are neither touched nor locked until
// EnsureHostPinned reaches them.
StatusOr<void*> CudaDevice::ReserveHostRegion(size_t bytes) {
  if (bytes == 0) return InvalidArgument("host region of 0 bytes");
  const size_t page = PageBytes();
  const size_t reserved = (bytes + page - 1) / page * page;
  void* base = mmap(nullptr, reserved, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return OutOfMemory("cannot reserve " + FormatBytes(static_cast<double>(bytes)) +
                       " of address space for host memory; lower memory.host_budget");
  }
  std::lock_guard<std::mutex> lock(host_mutex_);
  host_regions_[static_cast<char*>(base)].reserved = reserved;
  return base;
}

StatusOr<void*> CudaDevice::ReserveFileHostRegion(size_t bytes, const std::string& directory) {
  SPILL_ASSIGN_OR_RETURN(FileRegion file, MapFileRegion(bytes, directory));
  std::lock_guard<std::mutex> lock(host_mutex_);
  HostRegion& region = host_regions_[static_cast<char*>(file.base)];
  region.reserved = bytes;
  region.file = true;
  region.file_region = file;
  return file.base;
}

namespace {

void RunHostTask(void* data) {
  std::unique_ptr<std::function<void()>> task(static_cast<std::function<void()>*>(data));
  (*task)();
}

}  // namespace

void CudaDevice::EnqueueHostTask(Queue& queue, std::function<void()> task) {
  auto* owned = new std::function<void()>(std::move(task));
  SPILL_CUDA_CHECK(cudaLaunchHostFunc(static_cast<CudaQueue&>(queue).stream(), RunHostTask, owned));
}

void CudaDevice::ReleaseHostRegion(void* base) {
  if (base == nullptr) return;
  // Copies in flight may still read or write the region.
  SynchronizeCopies();
  compute_->Synchronize();
  char* begin = static_cast<char*>(base);
  HostRegion region;
  {
    std::lock_guard<std::mutex> lock(host_mutex_);
    auto it = host_regions_.find(begin);
    SPILL_CHECK(it != host_regions_.end()) << "releasing an unknown host region";
    region = it->second;
    host_regions_.erase(it);
  }
  if (region.file) {
    UnmapFileRegion(&region.file_region);
    return;
  }
  for (size_t offset = 0; offset < region.pinned; offset += kHostPinChunkBytes) {
    SPILL_CUDA_CHECK(cudaHostUnregister(begin + offset));
  }
  munmap(base, region.reserved);
}

Status CudaDevice::EnsureHostPinned(void* base, size_t bytes) {
  char* begin = static_cast<char*>(base);
  std::lock_guard<std::mutex> lock(host_mutex_);
  auto it = host_regions_.find(begin);
  SPILL_CHECK(it != host_regions_.end()) << "pinning an unknown host region";
  HostRegion& region = it->second;
  SPILL_CHECK(bytes <= region.reserved)
      << "pinning " << bytes << " bytes of a " << region.reserved << "-byte host region";
  if (region.file) return ClaimFileRegion(&region.file_region, bytes);
  const size_t target = PinnedExtentFor(bytes, region.reserved);
  // Once refused, asking again (an eviction tries tensor after tensor)
  // would only repeat a slow failure.
  if (target > region.pinned && !region.refusal.empty()) return OutOfMemory(region.refusal);
  while (region.pinned < target) {
    const size_t chunk = std::min(kHostPinChunkBytes, region.reserved - region.pinned);
    const cudaError_t status =
        cudaHostRegister(begin + region.pinned, chunk, cudaHostRegisterDefault);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear the error
      region.refusal = "page-locking host memory failed at " +
                       FormatBytes(static_cast<double>(region.pinned)) + " (" +
                       std::to_string(region.pinned) + " bytes) of the " +
                       FormatBytes(static_cast<double>(region.reserved)) +
                       " host region (cudaHostRegister: " + cudaGetErrorString(status) +
                       "); raise the locked-memory limit (ulimit -l) or lower memory.host_budget";
      return OutOfMemory(region.refusal);
    }
    region.pinned += chunk;
  }
  return Status::Ok();
}

size_t CudaDevice::HostRunFrom(const char* p) {
  std::lock_guard<std::mutex> lock(host_mutex_);
  auto it = host_regions_.upper_bound(const_cast<char*>(p));
  if (it == host_regions_.begin()) return SIZE_MAX;
  --it;
  const size_t offset = static_cast<size_t>(p - it->first);
  if (offset >= it->second.reserved) return SIZE_MAX;
  return kHostPinChunkBytes - offset % kHostPinChunkBytes;
}

void CudaDevice::CopyPieces(char* dst, const char* src, size_t bytes, cudaMemcpyKind direction,
                            cudaStream_t stream) {
  const bool to_host = direction == cudaMemcpyDeviceToHost;
  size_t done = 0;
  while (done < bytes) {
    const char* host = to_host ? dst + done : src + done;
    const size_t piece = std::min(bytes - done, HostRunFrom(host));
    SPILL_CUDA_CHECK(cudaMemcpyAsync(dst + done, src + done, piece, direction, stream));
    done += piece;
  }
}

void CudaDevice::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind, Queue& queue) {
  copied_[static_cast<int>(kind)] += bytes;
  cudaStream_t stream = static_cast<CudaQueue&>(queue).stream();
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (kind == CopyKind::kDeviceToDevice && d < s && d + bytes > s) {
    // Overlapping downward move (compaction): copies no longer than the gap
    // never overlap and, in order, move the bytes as memmove would; where
    // that takes many small copies, one kernel does it.
    const size_t gap = static_cast<size_t>(s - d);
    const DownwardMove move = PlanDownwardMove(bytes, gap);
    if (move.by_kernel) {
      cuda::MoveDownAsync(d, s, bytes, stream);
      SPILL_CUDA_CHECK(cudaGetLastError());
      return;
    }
    for (size_t done = 0; done < bytes; done += move.piece) {
      SPILL_CUDA_CHECK(cudaMemcpyAsync(d + done, s + done, std::min(move.piece, bytes - done),
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
  if (kind == CopyKind::kHostToDevice || kind == CopyKind::kDeviceToHost) {
    CopyPieces(d, s, bytes, direction, stream);
    return;
  }
  SPILL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, direction, stream));
}

void CudaDevice::MemsetAsync(void* dst, int value, size_t bytes, Queue& queue) {
  SPILL_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, static_cast<CudaQueue&>(queue).stream()));
}

void CudaDevice::ConvertAsync(void* dst, DType to, const void* src, DType from, int64_t count,
                              Queue& queue) {
  if (count <= 0) return;
  cudaStream_t stream = static_cast<CudaQueue&>(queue).stream();
  if (from == to) {
    SPILL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * DTypeSize(from),
                                     cudaMemcpyDeviceToDevice, stream));
    return;
  }
  SPILL_CHECK(from == DType::kF32 || to == DType::kF32)
      << "no conversion from " << DTypeName(from) << " to " << DTypeName(to)
      << " (one side must be fp32)";
  if (to == DType::kBF16) {
    cuda::FloatToBf16Async(dst, src, count, stream);
  } else if (to == DType::kF16) {
    cuda::FloatToHalfAsync(dst, src, count, stream);
  } else if (from == DType::kBF16) {
    cuda::Bf16ToFloatAsync(dst, src, count, stream);
  } else {
    cuda::HalfToFloatAsync(dst, src, count, stream);
  }
  SPILL_CUDA_CHECK_LAUNCH();
}

namespace {

const bool registered = RegisterDeviceFactory(
    "cuda", DeviceType::kCuda, [](const DeviceConfig& c) -> StatusOr<std::unique_ptr<Device>> {
      SPILL_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                             CudaDevice::Create(c.ordinal, c.tensor_math));
      return std::unique_ptr<Device>(std::move(device));
    });

}  // namespace
}  // namespace spill
