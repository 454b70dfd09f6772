// Comm: collectives between the ranks a Bootstrap found. Backends so far: MPI (CPU ranks, the local cluster)
// and self (one rank).
#include "launcher/comm.h"

#include <cstring>

#include "common/env.h"

#ifdef SRUNWAY_HAVE_MPI
#include <mpi.h>
#endif

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

class SelfComm : public Comm {
 public:
  CommKind kind() const override { return CommKind::kSelf; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllReduce(void*, size_t, DataType, ReduceOp) override { return Status::Ok(); }
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    if (send != recv) std::memmove(recv, send, count * DataTypeBytes(type));
    return Status::Ok();
  }
  Status Barrier() override { return Status::Ok(); }
};

#ifdef SRUNWAY_HAVE_MPI
MPI_Datatype ToMpi(DataType type) {
  switch (type) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
  }
  return MPI_BYTE;
}

Status MpiStatus(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return common::Unavailable("{} failed: {}", what, std::string_view(text, static_cast<size_t>(length)));
}

class MpiComm : public Comm {
 public:
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  Status Init(const Bootstrap& bootstrap) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return common::Unavailable("MPI_Init failed");
    // Errors come back as codes, so a failing rank prints a line instead of MPI aborting the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (rank_ != bootstrap.identity().rank || size_ != bootstrap.identity().size) {
      return common::Internal("MPI sees rank {} of {}, the bootstrap rank {} of {}: not the same job", rank_, size_,
                              bootstrap.identity().rank, bootstrap.identity().size);
    }
    return Status::Ok();
  }
  CommKind kind() const override { return CommKind::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllReduce(void* buffer, size_t count, DataType type, ReduceOp op) override {
    return MpiStatus(MPI_Allreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), ToMpi(type),
                                   op == ReduceOp::kSum ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  }
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    return MpiStatus(MPI_Allgather(send, static_cast<int>(count), ToMpi(type), recv, static_cast<int>(count),
                                   ToMpi(type), MPI_COMM_WORLD), "MPI_Allgather");
  }
  Status Barrier() override { return MpiStatus(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  int rank_ = 0;
  int size_ = 1;
};
#endif

}  // namespace

StatusOr<CommKind> ParseCommKind(std::string_view name) {
  for (CommKind kind : {CommKind::kAuto, CommKind::kMpi, CommKind::kSelf}) {
    if (CommKindName(kind) == name) return kind;
  }
  return common::InvalidArgument("unknown communicator '{}' (expected auto, mpi or self)", name);
}

std::string_view CommKindName(CommKind kind) {
  switch (kind) {
    case CommKind::kAuto: return "auto";
    case CommKind::kMpi: return "mpi";
    case CommKind::kSelf: return "self";
  }
  return "auto";
}

size_t DataTypeBytes(DataType type) { return type == DataType::kInt64 ? 8 : 4; }

StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap) {
  const int size = bootstrap.identity().size;
  if (kind == CommKind::kAuto) kind = size == 1 ? CommKind::kSelf : CommKind::kMpi;
  switch (kind) {
    case CommKind::kSelf:
      if (size != 1) return common::InvalidArgument("the self communicator needs one rank, not {}", size);
      return std::unique_ptr<Comm>(std::make_unique<SelfComm>());
    case CommKind::kMpi: {
#ifdef SRUNWAY_HAVE_MPI
      // Open MPI finds its peers through PMIx; without it MPI_Init aborts the process with a page of text.
      if (!common::GetEnv("PMIX_RANK") && !common::GetEnv("OMPI_COMM_WORLD_RANK")) {
        return common::FailedPrecondition("the MPI communicator needs srun --mpi=pmix (or mpirun)");
      }
      auto comm = std::make_unique<MpiComm>();
      SRUNWAY_RETURN_IF_ERROR(comm->Init(bootstrap));
      return std::unique_ptr<Comm>(std::move(comm));
#else
      return common::NotFound("this build has no MPI (configure with -Dmpi=enabled)");
#endif
    }
    default:
      break;
  }
  return common::InvalidArgument("no communicator chosen");
}

}  // namespace srunway::launcher
