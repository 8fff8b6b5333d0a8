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
#include <vector>

namespace spill {
namespace {

// MPI handles are pointers in OpenMPI and integers in MPICH; both fit a void*.
static_assert(sizeof(MPI_Comm) <= sizeof(void*));

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
  for (void*& channel : channels_) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    channel = Pack(comm);
  }
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

Status Communicator::Broadcast(void* data, size_t bytes, Channel channel) {
  if (size_ == 1) return Status::Ok();
  // MPI counts are ints: large tensors go in pieces.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kMaxPiece) {
    const int piece = static_cast<int>(std::min(kMaxPiece, bytes - done));
    SPILL_RETURN_IF_ERROR(Check(MPI_Bcast(p + done, piece, MPI_BYTE, 0,
                                          Unpack<MPI_Comm>(channels_[static_cast<int>(channel)])),
                                "MPI_Bcast"));
  }
  return Status::Ok();
}

Status Communicator::SumDoubles(double* values, int64_t n, Channel channel) {
  if (size_ == 1 || n == 0) return Status::Ok();
  return Check(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                             Unpack<MPI_Comm>(channels_[static_cast<int>(channel)])),
               "MPI_Allreduce");
}

Status Communicator::MinMax(uint64_t value, uint64_t* min, uint64_t* max, Channel channel) {
  *min = *max = value;
  if (size_ == 1) return Status::Ok();
  MPI_Comm comm = Unpack<MPI_Comm>(channels_[static_cast<int>(channel)]);
  SPILL_RETURN_IF_ERROR(
      Check(MPI_Allreduce(MPI_IN_PLACE, min, 1, MPI_UINT64_T, MPI_MIN, comm), "MPI_Allreduce"));
  return Check(MPI_Allreduce(MPI_IN_PLACE, max, 1, MPI_UINT64_T, MPI_MAX, comm), "MPI_Allreduce");
}

Status Communicator::Exchange(const std::vector<Message>& sends,
                              const std::vector<Message>& receives, int tag, Channel channel) {
  MPI_Comm comm = Unpack<MPI_Comm>(channels_[static_cast<int>(channel)]);
  // MPI counts are ints: a long message goes in pieces, matched in order.
  constexpr int64_t kMaxPiece = int64_t{1} << 28;
  std::vector<MPI_Request> requests;
  Status status = Status::Ok();
  auto post = [&](const Message& m, bool send) {
    for (int64_t done = 0; done < m.count && status.ok(); done += kMaxPiece) {
      const int piece = static_cast<int>(std::min(kMaxPiece, m.count - done));
      MPI_Request request = MPI_REQUEST_NULL;
      status = send ? Check(MPI_Isend(m.data + done, piece, MPI_FLOAT, m.peer, tag, comm, &request),
                            "MPI_Isend")
                    : Check(MPI_Irecv(m.data + done, piece, MPI_FLOAT, m.peer, tag, comm, &request),
                            "MPI_Irecv");
      if (status.ok()) requests.push_back(request);
    }
  };
  for (const Message& m : receives) post(m, false);
  for (const Message& m : sends) {
    post(m, true);
    floats_sent_ += m.count;
  }
  // A message that could not be posted ends the job (the caller aborts it);
  // waiting for the rest could wait forever.
  if (!status.ok() || requests.empty()) return status;
  return Check(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
               "MPI_Waitall");
}

void Communicator::Abort(int code) {
  std::fflush(stderr);
  if (launched_) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void Communicator::Finalize() {
  if (!launched_ || finalized_) return;
  finalized_ = true;
  for (void* channel : channels_) {
    MPI_Comm comm = Unpack<MPI_Comm>(channel);
    MPI_Comm_free(&comm);
  }
  MPI_Finalize();
}

}  // namespace spill
