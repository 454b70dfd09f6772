// Comm: collectives between the ranks a Bootstrap found, blocking or non-blocking with a handle. Backends so
// far: MPI (CPU ranks, the local cluster) and self (one rank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "launcher/bootstrap.h"

namespace srunway::launcher {

enum class CommKind { kAuto, kMpi, kSelf };
common::StatusOr<CommKind> ParseCommKind(std::string_view name);
std::string_view CommKindName(CommKind kind);

enum class DataType { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
enum class ReduceOp { kSum, kMax, kMin };
size_t DataTypeBytes(DataType type);
std::string_view DataTypeName(DataType type);

// IEEE half and bfloat16 to and from float (round to nearest even), for the ops the transports lack.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bf16);

// An operation in flight; Wait() finishes it and reports how it went. Destroying an unfinished one waits.
class Request {
 public:
  virtual ~Request() = default;
  virtual common::Status Wait() = 0;
};
using Handle = std::unique_ptr<Request>;

class Comm {
 public:
  virtual ~Comm() = default;
  virtual CommKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Non-blocking forms: buffers must stay valid until Wait().
  // All-reduce in place on `count` elements.
  virtual common::StatusOr<Handle> IAllReduce(void* buffer, size_t count, DataType type, ReduceOp op) = 0;
  // `send` holds size() * `recv_count` elements; rank r receives the reduction of block r.
  virtual common::StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t recv_count, DataType type,
                                                  ReduceOp op) = 0;
  // `recv` holds size() * `count` elements, rank r's at offset r * count.
  virtual common::StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual common::StatusOr<Handle> IBroadcast(void* buffer, size_t count, DataType type, int root) = 0;
  virtual common::StatusOr<Handle> ISend(const void* buffer, size_t count, DataType type, int peer) = 0;
  virtual common::StatusOr<Handle> IRecv(void* buffer, size_t count, DataType type, int peer) = 0;
  virtual common::Status Barrier() = 0;

  // Blocking forms: the non-blocking one, waited for.
  common::Status AllReduce(void* buffer, size_t count, DataType type, ReduceOp op);
  common::Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  common::Status AllGather(const void* send, void* recv, size_t count, DataType type);
  common::Status Broadcast(void* buffer, size_t count, DataType type, int root);
  common::Status Send(const void* buffer, size_t count, DataType type, int peer);
  common::Status Recv(void* buffer, size_t count, DataType type, int peer);
};

// auto: MPI when there is more than one rank, self for one rank.
common::StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap);

}  // namespace srunway::launcher
