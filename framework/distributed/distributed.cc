// MPI behind Communicator. Every call checks MPI's return code (the error
// handler is MPI_ERRORS_RETURN) and turns a failure into a Status naming the
// collective and the rank.
#include "framework/distributed/distributed.h"

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spill {
namespace {

// MPI handles are pointers in OpenMPI and integers in MPICH; both fit a void*.
static_assert(sizeof(MPI_Comm) <= sizeof(void*) && sizeof(MPI_Request) <= sizeof(void*));

template <typename Handle>
void* Pack(Handle handle) {
  void* packed = nullptr;
  std::memcpy(&packed, &handle, sizeof(handle));
  return packed;
}

template <typename Handle>
Handle Unpack(void* packed) {
  Handle handle;
  std::memcpy(&handle, &packed, sizeof(handle));
  return handle;
}

bool QueryCudaAware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

}  // namespace

bool LaunchedByMpi() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

Communicator& Communicator::World() {
  static Communicator* world = new Communicator();
  return *world;
}

Communicator::Communicator() {
  if (!LaunchedByMpi()) return;
  launched_ = true;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "train: MPI_Init_thread failed\n");
    std::exit(1);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_MULTIPLE && size_ > 1) {
    std::fprintf(stderr,
                 "train: this MPI library does not support MPI_THREAD_MULTIPLE, which "
                 "data-parallel training needs (its communication thread)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm control, gradients;
  MPI_Comm_dup(MPI_COMM_WORLD, &control);
  MPI_Comm_dup(MPI_COMM_WORLD, &gradients);
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(gradients, MPI_ERRORS_RETURN);
  control_ = Pack(control);
  gradients_ = Pack(gradients);
  cuda_aware_ = QueryCudaAware();
}

std::string Communicator::Describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

Status Communicator::Check(int code, const char* what) const {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Internal(std::string(what) + " failed on " + Describe() + ": " + text);
}

namespace {
MPI_Comm CommOf(void* control, void* gradients, Channel channel) {
  return Unpack<MPI_Comm>(channel == Channel::kControl ? control : gradients);
}
}  // namespace

Status Communicator::Broadcast(void* data, size_t bytes, Channel channel) {
  if (size_ == 1) return Status::Ok();
  // MPI counts are ints: large tensors go in pieces.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kMaxPiece) {
    const int piece = static_cast<int>(std::min(kMaxPiece, bytes - done));
    SPILL_RETURN_IF_ERROR(
        Check(MPI_Bcast(p + done, piece, MPI_BYTE, 0, CommOf(control_, gradients_, channel)),
              "MPI_Bcast"));
  }
  return Status::Ok();
}

Status Communicator::SumDoubles(double* values, int64_t n, Channel channel) {
  if (size_ == 1 || n == 0) return Status::Ok();
  return Check(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                             CommOf(control_, gradients_, channel)),
               "MPI_Allreduce");
}

Status Communicator::MinMax(uint64_t value, uint64_t* min, uint64_t* max, Channel channel) {
  *min = *max = value;
  if (size_ == 1) return Status::Ok();
  MPI_Comm comm = CommOf(control_, gradients_, channel);
  SPILL_RETURN_IF_ERROR(
      Check(MPI_Allreduce(MPI_IN_PLACE, min, 1, MPI_UINT64_T, MPI_MIN, comm), "MPI_Allreduce"));
  return Check(MPI_Allreduce(MPI_IN_PLACE, max, 1, MPI_UINT64_T, MPI_MAX, comm), "MPI_Allreduce");
}

Status Communicator::StartSumFloats(float* data, int64_t n, Channel channel, Request* request) {
  MPI_Request handle = MPI_REQUEST_NULL;
  if (size_ > 1 && n > 0) {
    SPILL_RETURN_IF_ERROR(
        Check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                             CommOf(control_, gradients_, channel), &handle),
              "MPI_Iallreduce"));
  }
  request->handle = Pack(handle);
  return Status::Ok();
}

StatusOr<bool> Communicator::Test(Request* request) {
  MPI_Request handle = Unpack<MPI_Request>(request->handle);
  if (handle == MPI_REQUEST_NULL) return true;
  int done = 0;
  SPILL_RETURN_IF_ERROR(Check(MPI_Test(&handle, &done, MPI_STATUS_IGNORE), "MPI_Test"));
  request->handle = Pack(handle);
  return done != 0;
}

void Communicator::Abort(int code) {
  std::fflush(stderr);
  if (launched_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void Communicator::Finalize() {
  if (!launched_ || finalized_) return;
  finalized_ = true;
  MPI_Comm control = Unpack<MPI_Comm>(control_), gradients = Unpack<MPI_Comm>(gradients_);
  MPI_Comm_free(&control);
  MPI_Comm_free(&gradients);
  MPI_Finalize();
}

}  // namespace spill
