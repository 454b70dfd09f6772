// The MPI backend of Comm.
#include "launcher/mpi_comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/env.h"
#include "common/half.h"
#include "common/log.h"
#include "common/parse.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

Status MpiStatus(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return common::Unavailable("{} failed: {}", what, std::string_view(text, static_cast<size_t>(length)));
}

using Clock = std::chrono::steady_clock;

// SRUNWAY_MPI_DELAY_MS, a test hook for the overlap benchmark: a slow link under the non-blocking operations.
// Each takes at least this long on a link that carries one at a time (it finishes no sooner than this after the
// previous one did, or after it started), so work done meanwhile overlaps it as it would a slow transfer, and
// operations queued at once take their turns. Blocking operations (barriers, small control exchanges) are not
// delayed.
std::chrono::microseconds DelayFromEnvironment() {
  auto text = common::GetEnv("SRUNWAY_MPI_DELAY_MS");
  if (!text) return {};
  auto ms = common::ParseDouble(*text, "SRUNWAY_MPI_DELAY_MS", 0, 60'000);
  if (!ms.ok()) {
    common::LogWarn("{}; no delay", ms.status().message());
    return {};
  }
  return std::chrono::microseconds(static_cast<int64_t>(*ms * 1000));
}

// MPI has no deadline of its own and cannot abandon a call in progress, so a thread watches the calls that wait
// for the other ranks: one still waiting past the timeout means a peer is hung or gone, and only ending the process
// (through `on_stuck`, which ends the step) keeps the job from waiting, silent, to its time limit.
class Deadline {
 public:
  Deadline(std::chrono::milliseconds timeout, std::function<void(const Status&)> on_stuck)
      : timeout_(timeout), on_stuck_(std::move(on_stuck)), thread_([this] { Watch(); }) {}
  ~Deadline() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_one();
    thread_.join();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // One call that waits for the other ranks, for as long as it lives. Calls do not nest (MPI is used from one
  // thread).
  class Waiting {
   public:
    Waiting(Deadline& deadline, std::string_view what) : deadline_(deadline) {
      std::lock_guard lock(deadline_.mutex_);
      deadline_.what_ = what;
      deadline_.since_ = Clock::now();
    }
    ~Waiting() {
      std::lock_guard lock(deadline_.mutex_);
      deadline_.what_ = {};
    }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Deadline& deadline_;
  };

 private:
  void Watch() {
    const auto poll = std::clamp<std::chrono::milliseconds>(timeout_ / 10, std::chrono::milliseconds(10),
                                                            std::chrono::seconds(1));
    std::unique_lock lock(mutex_);
    while (!stop_) {
      changed_.wait_for(lock, poll);
      if (stop_ || what_.empty() || Clock::now() - since_ < timeout_) continue;
      const Status stuck = common::DeadlineExceeded(
          "{} did not finish within {:g} s: a rank may be hung or gone, and MPI cannot abandon the call",
          what_, std::chrono::duration<double>(timeout_).count());
      lock.unlock();
      if (on_stuck_) {
        on_stuck_(stuck);
      } else {
        common::LogError("{}", stuck.message());
      }
      std::fflush(nullptr);
      std::_Exit(EXIT_FAILURE);
    }
  }

  const std::chrono::milliseconds timeout_;
  const std::function<void(const Status&)> on_stuck_;
  std::mutex mutex_;
  std::condition_variable changed_;  // stop_ set
  bool stop_ = false;                // under mutex_
  std::string_view what_;            // under mutex_: the call waiting now (a literal), empty when none
  Clock::time_point since_;          // under mutex_: when it began
  std::thread thread_;               // last: it starts once the rest is ready
};

class MpiRequest : public Request {
 public:
  MpiRequest(std::string_view what, Clock::time_point ready_at, std::shared_ptr<Deadline> deadline)
      : what_(what), ready_at_(ready_at), deadline_(std::move(deadline)) {}
  ~MpiRequest() override {
    Deadline::Waiting waiting(*deadline_, what_);
    for (MPI_Request& request : requests_) {
      if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  Status Wait() override {
    int rc = MPI_SUCCESS;
    {
      Deadline::Waiting waiting(*deadline_, what_);
      rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
    }
    std::this_thread::sleep_until(ready_at_);
    return MpiStatus(rc, what_);
  }
  StatusOr<bool> Test() override {
    int done = 0;
    SRUNWAY_RETURN_IF_ERROR(MpiStatus(
        MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), what_));
    return done != 0 && Clock::now() >= ready_at_;
  }
  MPI_Request* Add() { return &requests_.emplace_back(MPI_REQUEST_NULL); }
  void Reserve(size_t n) { requests_.reserve(n); }

 private:
  std::vector<MPI_Request> requests_;
  std::string_view what_;
  Clock::time_point ready_at_;
  std::shared_ptr<Deadline> deadline_;
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
  MpiComm(MPI_Comm comm, bool world, std::shared_ptr<Deadline> deadline)
      : comm_(comm), world_(world), deadline_(std::move(deadline)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Distinct types, so each half format gets its own reduction.
    MPI_Type_contiguous(1, MPI_UINT16_T, &fp16_);
    MPI_Type_commit(&fp16_);
    MPI_Type_contiguous(1, MPI_UINT16_T, &bf16_);
    MPI_Type_commit(&bf16_);
    MPI_Op_create(&HalfReduce<common::HalfToFloat, common::FloatToHalf, 0>, 1, &half_ops_[0]);
    MPI_Op_create(&HalfReduce<common::HalfToFloat, common::FloatToHalf, 1>, 1, &half_ops_[1]);
    MPI_Op_create(&HalfReduce<common::HalfToFloat, common::FloatToHalf, 2>, 1, &half_ops_[2]);
    MPI_Op_create(&HalfReduce<common::BFloat16ToFloat, common::FloatToBFloat16, 0>, 1, &half_ops_[3]);
    MPI_Op_create(&HalfReduce<common::BFloat16ToFloat, common::FloatToBFloat16, 1>, 1, &half_ops_[4]);
    MPI_Op_create(&HalfReduce<common::BFloat16ToFloat, common::FloatToBFloat16, 2>, 1, &half_ops_[5]);
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
    if (finalized) return;
    Deadline::Waiting waiting(*deadline_, "MPI_Finalize");
    MPI_Finalize();
  }
  static StatusOr<std::unique_ptr<Comm>> CreateWorld(int rank, int size, const CommOptions& options) {
    auto deadline = std::make_shared<Deadline>(options.timeout, options.on_stuck);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      Deadline::Waiting waiting(*deadline, "MPI_Init");
      if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return common::Unavailable("MPI_Init failed");
    }
    // Errors come back as codes, so a failing rank prints a line instead of MPI aborting the job silently.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    auto comm = std::make_unique<MpiComm>(MPI_COMM_WORLD, true, std::move(deadline));
    if (comm->rank_ != rank || comm->size_ != size) {
      return common::Internal("MPI sees rank {} of {}, the bootstrap rank {} of {}: not the same job", comm->rank_,
                              comm->size_, rank, size);
    }
    return std::unique_ptr<Comm>(std::move(comm));
  }
  CommKind kind() const override { return CommKind::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    MPI_Comm split = MPI_COMM_NULL;
    SRUNWAY_RETURN_IF_ERROR(Blocking("MPI_Comm_split", 0, [&] {
      return MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &split);
    }));
    if (split == MPI_COMM_NULL) return std::unique_ptr<Comm>();
    MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
    return std::unique_ptr<Comm>(std::make_unique<MpiComm>(split, false, deadline_));
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
  Status Barrier() override {
    return Blocking("MPI_Barrier", 0, [&] { return MPI_Barrier(comm_); });
  }

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
    Deadline::Waiting waiting(*deadline_, what);
    return MpiStatus(call(), what);
  }
  static const void* InPlace(const void* send, void* recv) { return send == recv ? MPI_IN_PLACE : send; }

  template <typename StartFn>
  StatusOr<Handle> Start(std::string_view what, size_t count, StartFn&& start) {
    Clock::time_point ready_at{};
    if (delay_.count() > 0) {
      ready_at = std::max(Clock::now(), link_free_at_) + delay_;
      link_free_at_ = ready_at;
    }
    auto request = std::make_unique<MpiRequest>(what, ready_at, deadline_);
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
  std::shared_ptr<Deadline> deadline_;  // shared with the communicators split from this one and their requests
  std::chrono::microseconds delay_ = DelayFromEnvironment();
  Clock::time_point link_free_at_{};  // with a delay: when the simulated link has finished what it carries
  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype fp16_ = MPI_DATATYPE_NULL;
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;
  MPI_Op half_ops_[6] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

}  // namespace

StatusOr<std::unique_ptr<Comm>> CreateMpiComm(int rank, int size, const CommOptions& options) {
  return MpiComm::CreateWorld(rank, size, options);
}

}  // namespace srunway::launcher
