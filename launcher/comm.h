// Comm: the data-plane interface, collectives between ranks, blocking or non-blocking with a handle, and its data
// types; nothing else. Backends, each in its own file depending only on this one: NCCL (GPU ranks; libnccl and
// the CUDA driver opened at run time), MPI (CPU ranks, the local cluster) and self (one rank). comm_factory.h
// chooses between them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::launcher {

enum class CommKind { kAuto, kNccl, kMpi, kSelf };
common::StatusOr<CommKind> ParseCommKind(std::string_view name);
std::string_view CommKindName(CommKind kind);

enum class DataType { kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kUInt8 };
enum class ReduceOp { kSum, kMax, kMin };
size_t DataTypeBytes(DataType type);
std::string_view DataTypeName(DataType type);

// An operation in flight; Wait() finishes it and reports how it went. Destroying an unfinished one waits.
class Request {
 public:
  virtual ~Request() = default;
  virtual common::Status Wait() = 0;
  // Whether it has finished, without blocking; each call also lets the backend make progress (MPI moves
  // non-blocking collectives forward only inside its calls), so a caller that overlaps work with communication
  // tests between pieces of work. An error is the operation's failure, as Wait() would report it.
  virtual common::StatusOr<bool> Test() = 0;
};
using Handle = std::unique_ptr<Request>;

// Memory a communicator's operations take: host memory for MPI and self, memory on the rank's GPU for NCCL.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* data, size_t bytes, std::function<void(void*)> release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(release_, other.release_);
    return *this;
  }
  ~Buffer() {
    if (data_ != nullptr && release_) release_(data_);
  }
  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::function<void(void*)> release_;
};

// The device a rank's operations run on.
struct DeviceInfo {
  int ordinal = -1;          // CUDA device number among those visible; -1 on a CPU rank
  std::string bus_id = "cpu";  // PCI bus id of the GPU
  std::string name = "CPU";
  int nccl_version = 0;  // the loaded NCCL's version code (ncclGetVersion, 22803 for 2.28.3); 0 without NCCL
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual CommKind kind() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // A communicator of the ranks that pass the same `color`, ordered by `key` (then by rank); every rank calls it,
  // and one that passes a negative color gets none (an empty pointer).
  virtual common::StatusOr<std::unique_ptr<Comm>> Split(int color, int key) = 0;
  // Stops whatever is in flight so no rank is left spinning; the communicator is unusable afterwards. Safe to
  // call from another thread (the watchdog's) while an operation waits.
  virtual void Abort() {}
  virtual DeviceInfo device() const { return {}; }
  // The CUstream a GPU communicator queues its operations on (nullptr for host backends), so a caller can order
  // them after its own GPU work with an event rather than waiting on the host.
  virtual void* native_stream() const { return nullptr; }

  // Zeroed memory the operations can take, and copies between it and host memory.
  virtual common::StatusOr<Buffer> Allocate(size_t bytes);
  virtual common::Status Upload(void* buffer, const void* host, size_t bytes);
  virtual common::Status Download(void* host, const void* buffer, size_t bytes);

  // Non-blocking forms: buffers must stay valid until Wait(). `send` == `recv` works in place.
  // All-reduce of `count` elements.
  virtual common::StatusOr<Handle> IAllReduce(const void* send, void* recv, size_t count, DataType type,
                                              ReduceOp op) = 0;
  // `send` holds size() * `recv_count` elements; rank r receives the reduction of block r.
  virtual common::StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t recv_count, DataType type,
                                                  ReduceOp op) = 0;
  // `recv` holds size() * `count` elements, rank r's at offset r * count.
  virtual common::StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual common::StatusOr<Handle> IBroadcast(const void* send, void* recv, size_t count, DataType type,
                                              int root) = 0;
  // Only `root`'s `recv` receives the reduction.
  virtual common::StatusOr<Handle> IReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                                           int root) = 0;
  // `send` and `recv` hold size() * `count` elements: block p of `send` goes to rank p, block p of `recv` comes
  // from rank p.
  virtual common::StatusOr<Handle> IAllToAll(const void* send, void* recv, size_t count, DataType type) = 0;
  virtual common::StatusOr<Handle> ISend(const void* buffer, size_t count, DataType type, int peer) = 0;
  virtual common::StatusOr<Handle> IRecv(void* buffer, size_t count, DataType type, int peer) = 0;
  // Sends `send` to rank `to` while receiving into `recv` from rank `from`, without the deadlock that two separate
  // calls can make on a GPU stream (NCCL runs them as one group).
  virtual common::StatusOr<Handle> ISendRecv(const void* send, int to, void* recv, int from, size_t count,
                                             DataType type) = 0;
  virtual common::Status Barrier() = 0;

  // Blocking forms: by default the non-blocking one, waited for; a backend whose own blocking calls are faster
  // (MPI runs other algorithms for them) overrides the collectives. The one-buffer forms work in place.
  common::Status AllReduce(void* buffer, size_t count, DataType type, ReduceOp op);
  virtual common::Status AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  virtual common::Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  virtual common::Status AllGather(const void* send, void* recv, size_t count, DataType type);
  common::Status Broadcast(void* buffer, size_t count, DataType type, int root);
  virtual common::Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  virtual common::Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root);
  virtual common::Status AllToAll(const void* send, void* recv, size_t count, DataType type);
  common::Status Send(const void* buffer, size_t count, DataType type, int peer);
  common::Status Recv(void* buffer, size_t count, DataType type, int peer);
  virtual common::Status SendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type);
};

struct CommOptions {
  // How long communicator set-up, and each operation's Wait(), may take before the communicator is aborted.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Told each set-up phase as it starts ("id broadcast", "communicator init", "split"), for timings and the
  // watchdog's failure messages.
  std::function<void(std::string_view phase)> on_phase;
  // MPI only, which cannot abandon a call in progress: when one has waited for the other ranks past `timeout` (one
  // of them is hung or gone), a watchdog thread calls this with the error; it should say so and end the step (the
  // trainer: PMIx_Abort). The process exits 1 when it returns; without it, the error line is printed first.
  std::function<void(const common::Status& stuck)> on_stuck;
};

}  // namespace srunway::launcher
