// The one-rank communicator.
#include "launcher/self_comm.h"

#include <cstring>

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

// A request that finished when it was made.
class DoneRequest : public Request {
 public:
  Status Wait() override { return Status::Ok(); }
  StatusOr<bool> Test() override { return true; }
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

}  // namespace

std::unique_ptr<Comm> CreateSelfComm() { return std::make_unique<SelfComm>(); }

}  // namespace srunway::launcher
