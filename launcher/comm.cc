// Comm: collectives between the ranks a Bootstrap found, blocking or non-blocking with a handle. This file has
// the self and MPI backends and the choice between backends; NCCL is in nccl_comm.cc.
#include "launcher/comm.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/env.h"
#include "launcher/nccl_comm.h"

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

Handle Copy(const void* send, void* recv, size_t count, DataType type) {
  if (send != recv) std::memmove(recv, send, count * DataTypeBytes(type));
  return Done();
}

class SelfComm : public Comm {
 public:
  CommKind kind() const override { return CommKind::kSelf; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  // As comm.h promises: a negative color means no communicator.
  StatusOr<std::unique_ptr<Comm>> Split(int color, int) override {
    if (color < 0) return std::unique_ptr<Comm>();
    return std::unique_ptr<Comm>(new SelfComm);
  }
  StatusOr<Handle> IAllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp) override {
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp) override {
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> IBroadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    SRUNWAY_RETURN_IF_ERROR(CheckRoot(root, "broadcast"));
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> IReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp, int root) override {
    SRUNWAY_RETURN_IF_ERROR(CheckRoot(root, "reduce"));
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> IAllToAll(const void* send, void* recv, size_t count, DataType type) override {
    return Copy(send, recv, count, type);
  }
  StatusOr<Handle> ISend(const void*, size_t, DataType, int peer) override {
    return common::InvalidArgument("send to rank {}: a 1-rank communicator has no peer", peer);
  }
  StatusOr<Handle> IRecv(void*, size_t, DataType, int peer) override {
    return common::InvalidArgument("receive from rank {}: a 1-rank communicator has no peer", peer);
  }
  StatusOr<Handle> ISendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type) override {
    if (to != 0 || from != 0) return common::InvalidArgument("send to rank {}, receive from rank {}: a 1-rank communicator has only rank 0", to, from);
    return Copy(send, recv, count, type);
  }
  Status Barrier() override { return Status::Ok(); }

 private:
  static Status CheckRoot(int root, std::string_view what) {
    if (root != 0) return common::InvalidArgument("{} root {} outside a 1-rank communicator", what, root);
    return Status::Ok();
  }
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
    for (MPI_Request& request : requests_) {
      if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  Status Wait() override {
    int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    return MpiStatus(rc, what_);
  }
  MPI_Request* Add() { return &requests_.emplace_back(MPI_REQUEST_NULL); }
  void Reserve(size_t n) { requests_.reserve(n); }

 private:
  std::vector<MPI_Request> requests_;
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
  using Comm::AllReduce;  // the one-buffer forms, next to the overrides below
  using Comm::Broadcast;
  // `world`: this communicator is MPI_COMM_WORLD and finalizes MPI when it goes; split ones free their own.
  explicit MpiComm(MPI_Comm comm, bool world) : comm_(comm), world_(world) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
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
  }
  ~MpiComm() override {
    for (MPI_Op& op : half_ops_) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
    for (MPI_Datatype* type : {&fp16_, &bf16_}) {
      if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
    }
    if (!world_) {
      MPI_Comm_free(&comm_);
      return;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  static StatusOr<std::unique_ptr<Comm>> CreateWorld(const Bootstrap& bootstrap) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return common::Unavailable("MPI_Init failed");
    // Errors come back as codes, so a failing rank prints a line instead of MPI aborting the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    auto comm = std::make_unique<MpiComm>(MPI_COMM_WORLD, true);
    if (comm->rank_ != bootstrap.identity().rank || comm->size_ != bootstrap.identity().size) {
      return common::Internal("MPI sees rank {} of {}, the bootstrap rank {} of {}: not the same job", comm->rank_,
                              comm->size_, bootstrap.identity().rank, bootstrap.identity().size);
    }
    return std::unique_ptr<Comm>(std::move(comm));
  }
  CommKind kind() const override { return CommKind::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    MPI_Comm split = MPI_COMM_NULL;
    SRUNWAY_RETURN_IF_ERROR(MpiStatus(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &split),
                                      "MPI_Comm_split"));
    if (split == MPI_COMM_NULL) return std::unique_ptr<Comm>();
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    return std::unique_ptr<Comm>(std::make_unique<MpiComm>(split, false));
  }

  // Each collective once: with a request it starts MPI's non-blocking call, without one it runs the blocking
  // call, which Open MPI gives faster algorithms than its non-blocking one waited for at once.
  StatusOr<Handle> IAllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Start("MPI_Iallreduce", count, [&](MpiRequest& r) {
      return CallAllReduce(send, recv, count, type, op, r.Add());
    });
  }
  Status AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Blocking("MPI_Allreduce", count, [&] { return CallAllReduce(send, recv, count, type, op, nullptr); });
  }
  StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Start("MPI_Ireduce_scatter_block", count,
                 [&](MpiRequest& r) { return CallReduceScatter(send, recv, count, type, op, r.Add()); });
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Blocking("MPI_Reduce_scatter_block", count, [&] {
      return CallReduceScatter(send, recv, count, type, op, nullptr);
    });
  }
  StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Start("MPI_Iallgather", count, [&](MpiRequest& r) {
      return CallAllGather(send, recv, count, type, r.Add());
    });
  }
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Blocking("MPI_Allgather", count, [&] { return CallAllGather(send, recv, count, type, nullptr); });
  }
  StatusOr<Handle> IBroadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    return Start("MPI_Ibcast", count, [&](MpiRequest& r) {
      return CallBroadcast(send, recv, count, type, root, r.Add());
    });
  }
  Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    return Blocking("MPI_Bcast", count, [&] { return CallBroadcast(send, recv, count, type, root, nullptr); });
  }
  StatusOr<Handle> IReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                           int root) override {
    return Start("MPI_Ireduce", count, [&](MpiRequest& r) {
      return CallReduce(send, recv, count, type, op, root, r.Add());
    });
  }
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) override {
    return Blocking("MPI_Reduce", count, [&] { return CallReduce(send, recv, count, type, op, root, nullptr); });
  }
  StatusOr<Handle> IAllToAll(const void* send, void* recv, size_t count, DataType type) override {
    return Start("MPI_Ialltoall", count, [&](MpiRequest& r) { return CallAllToAll(send, recv, count, type, r.Add()); });
  }
  Status AllToAll(const void* send, void* recv, size_t count, DataType type) override {
    return Blocking("MPI_Alltoall", count, [&] { return CallAllToAll(send, recv, count, type, nullptr); });
  }
  StatusOr<Handle> ISend(const void* buffer, size_t count, DataType type, int peer) override {
    return Start("MPI_Isend", count, [&](MpiRequest& r) {
      return MPI_Isend(buffer, Count(count), Type(type), peer, kTag, comm_, r.Add());
    });
  }
  StatusOr<Handle> IRecv(void* buffer, size_t count, DataType type, int peer) override {
    return Start("MPI_Irecv", count, [&](MpiRequest& r) {
      return MPI_Irecv(buffer, Count(count), Type(type), peer, kTag, comm_, r.Add());
    });
  }
  StatusOr<Handle> ISendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type) override {
    return Start("MPI_Irecv/MPI_Isend", count, [&](MpiRequest& r) {
      r.Reserve(2);
      int rc = MPI_Irecv(recv, Count(count), Type(type), from, kTag, comm_, r.Add());
      return rc != MPI_SUCCESS ? rc : MPI_Isend(send, Count(count), Type(type), to, kTag, comm_, r.Add());
    });
  }
  Status SendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type) override {
    return Blocking("MPI_Sendrecv", count, [&] {
      return MPI_Sendrecv(send, Count(count), Type(type), to, kTag, recv, Count(count), Type(type), from, kTag, comm_,
                          MPI_STATUS_IGNORE);
    });
  }
  Status Barrier() override { return MpiStatus(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  static constexpr int kTag = 7;
  // Every call checks its count with CheckCount first, so this never truncates.
  static int Count(size_t count) { return static_cast<int>(count); }

  // MPI counts are ints: a larger count is refused before MPI is called, never truncated (a truncated count
  // would reduce part of the buffer and report success).
  static Status CheckCount(size_t count, std::string_view what) {
    if (count <= static_cast<size_t>(INT_MAX)) return Status::Ok();
    return common::InvalidArgument("{}: {} elements is more than MPI's int counts allow ({})", what, count, INT_MAX);
  }

  template <typename CallFn>
  Status Blocking(std::string_view what, size_t count, CallFn&& call) {
    SRUNWAY_RETURN_IF_ERROR(CheckCount(count, what));
    return MpiStatus(call(), what);
  }
  static const void* InPlace(const void* send, void* recv) { return send == recv ? MPI_IN_PLACE : send; }

  template <typename StartFn>
  StatusOr<Handle> Start(std::string_view what, size_t count, StartFn&& start) {
    auto request = std::make_unique<MpiRequest>(what);
    SRUNWAY_RETURN_IF_ERROR(CheckCount(count, what));
    SRUNWAY_RETURN_IF_ERROR(MpiStatus(start(*request), what));
    return Handle(std::move(request));
  }

  int CallAllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, MPI_Request* r) {
    const void* in = InPlace(send, recv);
    if (r != nullptr) return MPI_Iallreduce(in, recv, Count(count), Type(type), Op(type, op), comm_, r);
    return MPI_Allreduce(in, recv, Count(count), Type(type), Op(type, op), comm_);
  }
  int CallReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op, MPI_Request* r) {
    if (r != nullptr) return MPI_Ireduce_scatter_block(send, recv, Count(count), Type(type), Op(type, op), comm_, r);
    return MPI_Reduce_scatter_block(send, recv, Count(count), Type(type), Op(type, op), comm_);
  }
  int CallAllGather(const void* send, void* recv, size_t count, DataType type, MPI_Request* r) {
    // In place when this rank's input already sits in its block of the output.
    const bool in_place =
        send == static_cast<const uint8_t*>(recv) + static_cast<size_t>(rank_) * count * DataTypeBytes(type);
    const void* in = in_place ? MPI_IN_PLACE : send;
    if (r != nullptr) return MPI_Iallgather(in, Count(count), Type(type), recv, Count(count), Type(type), comm_, r);
    return MPI_Allgather(in, Count(count), Type(type), recv, Count(count), Type(type), comm_);
  }
  int CallBroadcast(const void* send, void* recv, size_t count, DataType type, int root, MPI_Request* r) {
    if (rank_ == root && send != recv) std::memmove(recv, send, count * DataTypeBytes(type));
    if (r != nullptr) return MPI_Ibcast(recv, Count(count), Type(type), root, comm_, r);
    return MPI_Bcast(recv, Count(count), Type(type), root, comm_);
  }
  int CallReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root, MPI_Request* r) {
    const void* in = rank_ == root ? InPlace(send, recv) : send;
    if (r != nullptr) return MPI_Ireduce(in, recv, Count(count), Type(type), Op(type, op), root, comm_, r);
    return MPI_Reduce(in, recv, Count(count), Type(type), Op(type, op), root, comm_);
  }
  int CallAllToAll(const void* send, void* recv, size_t count, DataType type, MPI_Request* r) {
    if (r != nullptr) return MPI_Ialltoall(send, Count(count), Type(type), recv, Count(count), Type(type), comm_, r);
    return MPI_Alltoall(send, Count(count), Type(type), recv, Count(count), Type(type), comm_);
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

  MPI_Comm comm_;
  bool world_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype fp16_ = MPI_DATATYPE_NULL;
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;
  MPI_Op half_ops_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};
#endif

}  // namespace

Status Comm::AllReduce(void* buffer, size_t count, DataType type, ReduceOp op) {
  return AllReduce(buffer, buffer, count, type, op);
}
Status Comm::AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IAllReduce(send, recv, count, type, op));
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
  return Broadcast(buffer, buffer, count, type, root);
}
Status Comm::Broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IBroadcast(send, recv, count, type, root));
  return handle->Wait();
}
Status Comm::Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IReduce(send, recv, count, type, op, root));
  return handle->Wait();
}
Status Comm::AllToAll(const void* send, void* recv, size_t count, DataType type) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, IAllToAll(send, recv, count, type));
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
Status Comm::SendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type) {
  SRUNWAY_ASSIGN_OR_RETURN(Handle handle, ISendRecv(send, to, recv, from, count, type));
  return handle->Wait();
}

StatusOr<Buffer> Comm::Allocate(size_t bytes) {
  void* data = std::calloc(std::max<size_t>(bytes, 1), 1);
  if (data == nullptr) return common::ResourceExhausted("cannot allocate {} bytes of host memory", bytes);
  return Buffer(data, bytes, [](void* p) { std::free(p); });
}
Status Comm::Upload(void* buffer, const void* host, size_t bytes) {
  std::memcpy(buffer, host, bytes);
  return Status::Ok();
}
Status Comm::Download(void* host, const void* buffer, size_t bytes) {
  std::memcpy(host, buffer, bytes);
  return Status::Ok();
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
  for (CommKind kind : {CommKind::kAuto, CommKind::kNccl, CommKind::kMpi, CommKind::kSelf}) {
    if (CommKindName(kind) == name) return kind;
  }
  return common::InvalidArgument("unknown communicator '{}' (expected auto, nccl, mpi or self)", name);
}

std::string_view CommKindName(CommKind kind) {
  switch (kind) {
    case CommKind::kAuto: return "auto";
    case CommKind::kNccl: return "nccl";
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

StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap, const CommOptions& options) {
  const int size = bootstrap.identity().size;
  if (kind == CommKind::kAuto || kind == CommKind::kNccl) {
    // Under auto, an empty result: some rank cannot use NCCL, and every rank knows it and falls back alike.
    SRUNWAY_ASSIGN_OR_RETURN(auto nccl, CreateNcclComm(bootstrap, options, /*required=*/kind == CommKind::kNccl));
    if (nccl != nullptr) return nccl;
    kind = size == 1 ? CommKind::kSelf : CommKind::kMpi;
  }
  if (options.on_phase) options.on_phase("communicator init");
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
      return MpiComm::CreateWorld(bootstrap);
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
