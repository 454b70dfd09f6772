// Comm: collectives between the ranks a Bootstrap found. Backends so far: MPI (CPU ranks, the local cluster)
// and self (one rank).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "launcher/bootstrap.h"

namespace srunway::launcher {

enum class CommKind { kAuto, kMpi, kSelf };
common::StatusOr<CommKind> ParseCommKind(std::string_view name);
std::string_view CommKindName(CommKind kind);

enum class DataType { kFloat32, kInt32, kInt64 };
enum class ReduceOp { kSum, kMax };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual CommKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual common::Status AllReduce(void* buffer, size_t count, DataType type, ReduceOp op) = 0;
  // `recv` holds size() * count elements, rank r's at offset r * count.
  virtual common::Status AllGather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual common::Status Barrier() = 0;
};

// auto: MPI when built with it and there is more than one rank, self for one rank.
common::StatusOr<std::unique_ptr<Comm>> CreateComm(CommKind kind, Bootstrap& bootstrap);

size_t DataTypeBytes(DataType type);

}  // namespace srunway::launcher
