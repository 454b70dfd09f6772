// Comm: what every backend shares: the blocking forms over the non-blocking ones, host memory, names.
#include "launcher/comm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace srunway::launcher {

using common::Status;
using common::StatusOr;

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

}  // namespace srunway::launcher
