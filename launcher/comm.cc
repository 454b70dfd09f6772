// Comm: collectives between the ranks a Bootstrap found, blocking or non-blocking with a handle. Backends so
// far: MPI (CPU ranks, the local cluster) and self (one rank).
#include "launcher/comm.h"

#include <bit>
#include <cstring>

#include "common/env.h"

#ifdef SRUNWAY_HAVE_MPI
#include <mpi.h>
#endif

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

// A request that finished when it was made.
class DoneRequest : public Request {
 public:
  Status Wait() override { return Status::Ok(); }
};

Handle Done() { return std::make_unique<DoneRequest>(); }

class SelfComm : public Comm {
 public:
  CommKind kind() const override { return CommKind::kSelf; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  StatusOr<Handle> IAllReduce(void*, size_t, DataType, ReduceOp) override { return Done(); }
  StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp) override {
    if (send != recv) std::memmove(recv, send, count * DataTypeBytes(type));
    return Done();
  }
  StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) override {
    if (send != recv) std::memmove(recv, send, count * DataTypeBytes(type));
    return Done();
  }
  StatusOr<Handle> IBroadcast(void*, size_t, DataType, int root) override {
    if (root != 0) return common::InvalidArgument("broadcast root {} outside a 1-rank communicator", root);
    return Done();
  }
  StatusOr<Handle> ISend(const void*, size_t, DataType, int peer) override {
    return common::InvalidArgument("send to rank {}: a 1-rank communicator has no peer", peer);
  }
  StatusOr<Handle> IRecv(void*, size_t, DataType, int peer) override {
    return common::InvalidArgument("receive from rank {}: a 1-rank communicator has no peer", peer);
  }
  Status Barrier() override { return Status::Ok(); }
};

#ifdef SRUNWAY_HAVE_MPI
Status MpiStatus(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return common::Unavailable("{} failed: {}", what, std::string_view(text, static_cast<size_t>(length)));
}

class MpiRequest : public Request {
 public:
  explicit MpiRequest(std::string_view what) : what_(what) {}
  ~MpiRequest() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  Status Wait() override { return MpiStatus(MPI_Wait(&request_, MPI_STATUS_IGNORE), what_); }
  MPI_Request* get() { return &request_; }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::string_view what_;
};

// MPI has no half types: 16-bit elements with reductions of our own (through float) for fp16 and bf16.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), int kOp>
void HalfReduce(void* in, void* inout, int* length, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) {
    float x = ToFloat(a[i]), y = ToFloat(b[i]);
    float r = kOp == 0 ? x + y : kOp == 1 ? (x > y ? x : y) : (x < y ? x : y);
    b[i] = FromFloat(r);
  }
}

class MpiComm : public Comm {
 public:
  ~MpiComm() override {
    for (MPI_Op& op : half_ops_) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
    for (MPI_Datatype* type : {&fp16_, &bf16_}) {
      if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
    }
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
    // Distinct types, so each half format gets its own reduction.
    MPI_Type_contiguous(1, MPI_UINT16_T, &fp16_);
    MPI_Type_commit(&fp16_);
    MPI_Type_contiguous(1, MPI_UINT16_T, &bf16_);
    MPI_Type_commit(&bf16_);
    MPI_Op_create(&HalfReduce<HalfToFloat, FloatToHalf, 0>, 1, &half_ops_[0]);
    MPI_Op_create(&HalfReduce<HalfToFloat, FloatToHalf, 1>, 1, &half_ops_[1]);
    MPI_Op_create(&HalfReduce<HalfToFloat, FloatToHalf, 2>, 1, &half_ops_[2]);
    MPI_Op_create(&HalfReduce<BFloat16ToFloat, FloatToBFloat16, 0>, 1, &half_ops_[3]);
    MPI_Op_create(&HalfReduce<BFloat16ToFloat, FloatToBFloat16, 1>, 1, &half_ops_[4]);
    MPI_Op_create(&HalfReduce<BFloat16ToFloat, FloatToBFloat16, 2>, 1, &half_ops_[5]);
    return Status::Ok();
  }
  CommKind kind() const override { return CommKind::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  StatusOr<Handle> IAllReduce(void* buffer, size_t count, DataType type, ReduceOp op) override {
    return Start("MPI_Iallreduce", [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, buffer, Count(count), Type(type), Op(type, op), MPI_COMM_WORLD, r);
    });
  }
  StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Start("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(send, recv, Count(count), Type(type), Op(type, op), MPI_COMM_WORLD, r);
    });
  }
  StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Start("MPI_Iallgather", [&](MPI_Request* r) {
      return MPI_Iallgather(send, Count(count), Type(type), recv, Count(count), Type(type), MPI_COMM_WORLD, r);
    });
  }
  StatusOr<Handle> IBroadcast(void* buffer, size_t count, DataType type, int root) override {
    return Start("MPI_Ibcast", [&](MPI_Request* r) {
      return MPI_Ibcast(buffer, Count(count), Type(type), root, MPI_COMM_WORLD, r);
    });
  }
  StatusOr<Handle> ISend(const void* buffer, size_t count, DataType type, int peer) override {
    return Start("MPI_Isend", [&](MPI_Request* r) {
      return MPI_Isend(buffer, Count(count), Type(type), peer, kTag, MPI_COMM_WORLD, r);
    });
  }
  StatusOr<Handle> IRecv(void* buffer, size_t count, DataType type, int peer) override {
    return Start("MPI_Irecv", [&](MPI_Request* r) {
      return MPI_Irecv(buffer, Count(count), Type(type), peer, kTag, MPI_COMM_WORLD, r);
    });
  }
  Status Barrier() override { return MpiStatus(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  static constexpr int kTag = 7;
  static int Count(size_t count) { return static_cast<int>(count); }

  template <typename StartFn>
  StatusOr<Handle> Start(std::string_view what, StartFn&& start) {
    auto request = std::make_unique<MpiRequest>(what);
    SRUNWAY_RETURN_IF_ERROR(MpiStatus(start(request->get()), what));
    return Handle(std::move(request));
  }

  MPI_Datatype Type(DataType type) const {
    switch (type) {
      case DataType::kFloat32: return MPI_FLOAT;
      case DataType::kFloat16: return fp16_;
      case DataType::kBFloat16: return bf16_;
      case DataType::kInt32: return MPI_INT32_T;
      case DataType::kInt64: return MPI_INT64_T;
      case DataType::kUInt8: return MPI_UINT8_T;
    }
    return MPI_BYTE;
  }

  MPI_Op Op(DataType type, ReduceOp op) const {
    int index = op == ReduceOp::kSum ? 0 : op == ReduceOp::kMax ? 1 : 2;
    if (type == DataType::kFloat16) return half_ops_[static_cast<size_t>(index)];
    if (type == DataType::kBFloat16) return half_ops_[static_cast<size_t>(3 + index)];
    return index == 0 ? MPI_SUM : index == 1 ? MPI_MAX : MPI_MIN;
  }

  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype fp16_ = MPI_DATATYPE_NULL;
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;
  MPI_Op half_ops_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};
#endif

}  // namespace

Status Comm::AllReduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IAllReduce(buffer, count, type, op));
  return handle->Wait();
}
Status Comm::ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IReduceScatter(send, recv, recv_count, type, op));
  return handle->Wait();
}
Status Comm::AllGather(const void* send, void* recv, size_t count, DataType type) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IAllGather(send, recv, count, type));
  return handle->Wait();
}
Status Comm::Broadcast(void* buffer, size_t count, DataType type, int root) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IBroadcast(buffer, count, type, root));
  return handle->Wait();
}
Status Comm::Send(const void* buffer, size_t count, DataType type, int peer) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, ISend(buffer, count, type, peer));
  return handle->Wait();
}
Status Comm::Recv(void* buffer, size_t count, DataType type, int peer) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IRecv(buffer, count, type, peer));
  return handle->Wait();
}

uint16_t FloatToHalf(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0u));  // inf, NaN
  int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {  // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return std::bit_cast<float>(sign);
    float value = static_cast<float>(mantissa) / 16777216.0f;  // mantissa * 2^-24
    return sign != 0 ? -value : value;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu) != 0) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

float BFloat16ToFloat(uint16_t bf16) { return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16); }

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

size_t DataTypeBytes(DataType type) {
  switch (type) {
    case DataType::kFloat32: case DataType::kInt32: return 4;
    case DataType::kFloat16: case DataType::kBFloat16: return 2;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 1;
}

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "fp32";
    case DataType::kFloat16: return "fp16";
    case DataType::kBFloat16: return "bf16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "?";
}

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
