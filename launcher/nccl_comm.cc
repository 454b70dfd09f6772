// The NCCL backend of Comm. libnccl and the CUDA driver (libcuda) are opened with dlopen; their headers only give
// the types. Communicators are non-blocking (ncclCommInitRankConfig with blocking = 0), so every NCCL call is
// followed by polling ncclCommGetAsyncError against a deadline, and a communicator that misses it is aborted with
// ncclCommAbort rather than left spinning.
#include "launcher/nccl_comm.h"

#include <cuda.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda_driver.h"
#include "common/dynlib.h"
#include "common/env.h"
#include "common/parse.h"
#include "common/site_library.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;
using Clock = std::chrono::steady_clock;

using common::CudaDriver;

// The NCCL calls. ncclCommInitRankScalable is optional (NCCL 2.23 and later).
struct NcclApi {
  common::DynamicLibrary lib;
  int version = 0;
  decltype(::ncclGetVersion)* get_version = nullptr;
  decltype(::ncclGetUniqueId)* get_unique_id = nullptr;
  decltype(::ncclCommInitRankConfig)* init_rank_config = nullptr;
  decltype(::ncclCommInitRankScalable)* init_rank_scalable = nullptr;
  decltype(::ncclCommSplit)* split = nullptr;
  decltype(::ncclCommGetAsyncError)* async_error = nullptr;
  decltype(::ncclCommFinalize)* finalize = nullptr;
  decltype(::ncclCommDestroy)* destroy = nullptr;
  decltype(::ncclCommAbort)* abort = nullptr;
  decltype(::ncclCommUserRank)* user_rank = nullptr;
  decltype(::ncclCommCount)* count = nullptr;
  decltype(::ncclGetErrorString)* error_string = nullptr;
  decltype(::ncclGetLastError)* last_error = nullptr;
  decltype(::ncclAllReduce)* all_reduce = nullptr;
  decltype(::ncclReduceScatter)* reduce_scatter = nullptr;
  decltype(::ncclAllGather)* all_gather = nullptr;
  decltype(::ncclBroadcast)* broadcast = nullptr;
  decltype(::ncclReduce)* reduce = nullptr;
  decltype(::ncclSend)* send = nullptr;
  decltype(::ncclRecv)* recv = nullptr;
  decltype(::ncclGroupStart)* group_start = nullptr;
  decltype(::ncclGroupEnd)* group_end = nullptr;

  // SRUNWAY_NCCL_LIBRARY names the file; otherwise common::OpenSiteLibrary's search (the linker's path, the CUDA
  // install, Python wheels such as PyTorch's nvidia-nccl).
  static StatusOr<std::unique_ptr<NcclApi>> Load() {
    SRUNWAY_ASSIGN_OR_RETURN(auto lib, common::OpenSiteLibrary({"SRUNWAY_NCCL_LIBRARY", {"libnccl.so.2", "libnccl.so"}}));
    auto api = std::make_unique<NcclApi>(NcclApi{std::move(lib)});
    SRUNWAY_LOAD_SYMBOL(api->get_version, api->lib, ncclGetVersion);
    SRUNWAY_LOAD_SYMBOL(api->get_unique_id, api->lib, ncclGetUniqueId);
    SRUNWAY_LOAD_SYMBOL(api->init_rank_config, api->lib, ncclCommInitRankConfig);
    SRUNWAY_LOAD_SYMBOL(api->split, api->lib, ncclCommSplit);
    SRUNWAY_LOAD_SYMBOL(api->async_error, api->lib, ncclCommGetAsyncError);
    SRUNWAY_LOAD_SYMBOL(api->finalize, api->lib, ncclCommFinalize);
    SRUNWAY_LOAD_SYMBOL(api->destroy, api->lib, ncclCommDestroy);
    SRUNWAY_LOAD_SYMBOL(api->abort, api->lib, ncclCommAbort);
    SRUNWAY_LOAD_SYMBOL(api->user_rank, api->lib, ncclCommUserRank);
    SRUNWAY_LOAD_SYMBOL(api->count, api->lib, ncclCommCount);
    SRUNWAY_LOAD_SYMBOL(api->error_string, api->lib, ncclGetErrorString);
    SRUNWAY_LOAD_SYMBOL(api->last_error, api->lib, ncclGetLastError);
    SRUNWAY_LOAD_SYMBOL(api->all_reduce, api->lib, ncclAllReduce);
    SRUNWAY_LOAD_SYMBOL(api->reduce_scatter, api->lib, ncclReduceScatter);
    SRUNWAY_LOAD_SYMBOL(api->all_gather, api->lib, ncclAllGather);
    SRUNWAY_LOAD_SYMBOL(api->broadcast, api->lib, ncclBroadcast);
    SRUNWAY_LOAD_SYMBOL(api->reduce, api->lib, ncclReduce);
    SRUNWAY_LOAD_SYMBOL(api->send, api->lib, ncclSend);
    SRUNWAY_LOAD_SYMBOL(api->recv, api->lib, ncclRecv);
    SRUNWAY_LOAD_SYMBOL(api->group_start, api->lib, ncclGroupStart);
    SRUNWAY_LOAD_SYMBOL(api->group_end, api->lib, ncclGroupEnd);
    api->init_rank_scalable = api->lib.OptionalSymbol<decltype(::ncclCommInitRankScalable)>("ncclCommInitRankScalable");
    if (api->get_version(&api->version) != ncclSuccess) return common::Internal("ncclGetVersion failed");
    // Non-blocking communicators and ncclCommSplit arrived in 2.14.
    if (api->version < NCCL_VERSION(2, 14, 0)) {
      return common::FailedPrecondition("{} is NCCL {}; srunway needs 2.14 or later", api->lib.path(), api->version);
    }
    return api;
  }
};

// What every communicator of this process shares: the GPU with its driver and context, and NCCL.
struct Runtime {
  std::unique_ptr<common::CudaGpu> gpu;
  std::unique_ptr<NcclApi> nccl;
  const CudaDriver* cuda = nullptr;  // gpu->driver

  Status MakeCurrent() const { return gpu->MakeCurrent(); }
};

StatusOr<std::shared_ptr<Runtime>> OpenRuntime(int local_rank) {
  auto runtime = std::make_shared<Runtime>();
  SRUNWAY_ASSIGN_OR_RETURN(runtime->gpu, common::OpenCudaGpu(local_rank));
  runtime->cuda = runtime->gpu->driver.get();
  SRUNWAY_ASSIGN_OR_RETURN(runtime->nccl, NcclApi::Load());
  return runtime;
}

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

double Seconds(std::chrono::milliseconds timeout) { return static_cast<double>(timeout.count()) / 1000.0; }

class NcclComm;

// An operation on the communicator's stream, finished when the event recorded after it has fired.
class NcclRequest : public Request {
 public:
  NcclRequest(NcclComm* comm, CUevent event, std::string_view what) : comm_(comm), event_(event), what_(what) {}
  ~NcclRequest() override;
  Status Wait() override;
  StatusOr<bool> Test() override;

 private:
  NcclComm* comm_;
  CUevent event_;
  std::string_view what_;
  bool done_ = false;
};

class NcclComm : public Comm {
 public:
  NcclComm(std::shared_ptr<Runtime> runtime, ncclComm_t comm, CUstream stream, int rank, int size,
           std::chrono::milliseconds timeout)
      : runtime_(std::move(runtime)), comm_(comm), stream_(stream), rank_(rank), size_(size), timeout_(timeout) {}

  // Waits for a non-blocking `comm` to finish what it started (init, split, an enqueue) until `deadline`; on an
  // error or the deadline, aborts it. `what` names the step for the error.
  static Status Settle(const NcclApi& api, ncclComm_t comm, ncclResult_t started, std::string_view what,
                       Clock::time_point deadline, std::chrono::milliseconds timeout) {
    ncclResult_t state = started;
    while (state == ncclInProgress) {
      if (Clock::now() > deadline) {
        api.abort(comm);
        return common::DeadlineExceeded("{} did not finish within {:g} s (a rank may be missing or stuck; "
                                        "NCCL_DEBUG=INFO says more); the communicator was aborted",
                                        what, Seconds(timeout));
      }
      std::this_thread::yield();
      if (api.async_error(comm, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) return Status::Ok();
    std::string detail = api.last_error(comm);
    api.abort(comm);
    return common::Unavailable("{} failed: {}{}{}", what, api.error_string(state), detail.empty() ? "" : ": ", detail);
  }

  ~NcclComm() override {
    (void)runtime_->MakeCurrent();
    const NcclApi& api = *runtime_->nccl;
    // Finalize flushes what is in flight and leaves the peers cleanly; one that cannot finish is aborted. An
    // aborted communicator is already gone.
    auto started = WithComm("ncclCommFinalize", [&](ncclComm_t comm) { return api.finalize(comm); });
    Status finalized = started.ok() ? SettleOwn(*started, "ncclCommFinalize", Clock::now() + timeout_)
                                    : started.status();
    {
      std::lock_guard lock(mutex_);
      if (finalized.ok() && comm_ != nullptr) api.destroy(std::exchange(comm_, nullptr));
    }
    runtime_->cuda->stream_destroy(stream_);
  }

  CommKind kind() const override { return CommKind::kNccl; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void* native_stream() const override { return stream_; }

  DeviceInfo device() const override {
    return {runtime_->gpu->ordinal, runtime_->gpu->bus_id, runtime_->gpu->name, runtime_->nccl->version};
  }

  // From any thread: the handle is cleared under the lock every other use of it holds, so no call can reach a
  // communicator that ncclCommAbort has freed.
  void Abort() override {
    std::lock_guard lock(mutex_);
    AbortLocked();
  }

  StatusOr<std::unique_ptr<Comm>> Split(int color, int key) override {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const NcclApi& api = *runtime_->nccl;
    // A non-blocking split may hand out the new communicator only once its background work has made it: NCCL
    // writes it from another thread, so it is read atomically.
    ncclComm_t split = nullptr;
    std::atomic_ref<ncclComm_t> made(split);
    SRUNWAY_ASSIGN_OR_RETURN(ncclResult_t rc, WithComm("ncclCommSplit", [&](ncclComm_t comm) {
      return api.split(comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &split, &config);
    }));
    if (rc != ncclSuccess && rc != ncclInProgress) {
      return common::Unavailable("ncclCommSplit failed: {}", api.error_string(rc));
    }
    const auto deadline = Clock::now() + timeout_;
    // The parent settles first: its error state says whether the split (and, with NOCOLOR, this rank's part in
    // it) is done.
    if (color < 0) {
      SRUNWAY_RETURN_IF_ERROR(SettleOwn(ncclInProgress, "ncclCommSplit", deadline));
      return std::unique_ptr<Comm>();
    }
    while (made.load() == nullptr) {
      SRUNWAY_RETURN_IF_ERROR(Poll("ncclCommSplit", deadline));
      std::this_thread::yield();
    }
    SRUNWAY_RETURN_IF_ERROR(Settle(api, made.load(), rc, "ncclCommSplit", deadline, timeout_));
    int rank = 0, size = 0;
    api.user_rank(made.load(), &rank);
    api.count(made.load(), &size);
    CUstream stream = nullptr;
    if (Status created = runtime_->cuda->Check(runtime_->cuda->stream_create(&stream, CU_STREAM_NON_BLOCKING),
                                               "cuStreamCreate");
        !created.ok()) {
      api.abort(made.load());
      return created;
    }
    return std::unique_ptr<Comm>(std::make_unique<NcclComm>(runtime_, made.load(), stream, rank, size, timeout_));
  }

  StatusOr<Buffer> Allocate(size_t bytes) override {
    SRUNWAY_RETURN_IF_ERROR(runtime_->MakeCurrent());
    const CudaDriver& cuda = *runtime_->cuda;
    CUdeviceptr pointer = 0;
    SRUNWAY_RETURN_IF_ERROR(cuda.Check(cuda.mem_alloc(&pointer, std::max<size_t>(bytes, 1)),
                                       fmt::format("cuMemAlloc of {} bytes", bytes)));
    if (Status zeroed = cuda.Check(cuda.memset(pointer, 0, bytes), "cuMemsetD8"); !zeroed.ok()) {
      cuda.mem_free(pointer);
      return zeroed;
    }
    std::shared_ptr<Runtime> runtime = runtime_;
    return Buffer(reinterpret_cast<void*>(pointer), bytes, [runtime](void* p) {
      (void)runtime->MakeCurrent();
      runtime->cuda->mem_free(reinterpret_cast<CUdeviceptr>(p));
    });
  }
  Status Upload(void* buffer, const void* host, size_t bytes) override {
    SRUNWAY_RETURN_IF_ERROR(runtime_->MakeCurrent());
    return runtime_->cuda->Check(runtime_->cuda->to_device(reinterpret_cast<CUdeviceptr>(buffer), host, bytes),
                                 "cuMemcpyHtoD");
  }
  Status Download(void* host, const void* buffer, size_t bytes) override {
    SRUNWAY_RETURN_IF_ERROR(runtime_->MakeCurrent());
    return runtime_->cuda->Check(runtime_->cuda->to_host(host, reinterpret_cast<CUdeviceptr>(buffer), bytes),
                                 "cuMemcpyDtoH");
  }

  StatusOr<Handle> IAllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Enqueue("ncclAllReduce", [&](const NcclApi& api, ncclComm_t comm) {
      return api.all_reduce(send, recv, count, NcclType(type), NcclOp(op), comm, Stream());
    });
  }
  StatusOr<Handle> IReduceScatter(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return Enqueue("ncclReduceScatter", [&](const NcclApi& api, ncclComm_t comm) {
      return api.reduce_scatter(send, recv, count, NcclType(type), NcclOp(op), comm, Stream());
    });
  }
  StatusOr<Handle> IAllGather(const void* send, void* recv, size_t count, DataType type) override {
    return Enqueue("ncclAllGather", [&](const NcclApi& api, ncclComm_t comm) {
      return api.all_gather(send, recv, count, NcclType(type), comm, Stream());
    });
  }
  StatusOr<Handle> IBroadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    return Enqueue("ncclBroadcast", [&](const NcclApi& api, ncclComm_t comm) {
      return api.broadcast(send, recv, count, NcclType(type), root, comm, Stream());
    });
  }
  StatusOr<Handle> IReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                           int root) override {
    return Enqueue("ncclReduce", [&](const NcclApi& api, ncclComm_t comm) {
      return api.reduce(send, recv, count, NcclType(type), NcclOp(op), root, comm, Stream());
    });
  }
  StatusOr<Handle> IAllToAll(const void* send, void* recv, size_t count, DataType type) override {
    const size_t block = count * DataTypeBytes(type);
    return Enqueue("all-to-all (ncclSend/ncclRecv)", [&](const NcclApi& api, ncclComm_t comm) {
      return Group(api, [&] {
        for (int p = 0; p < size_; ++p) {
          const auto* from = static_cast<const uint8_t*>(send) + static_cast<size_t>(p) * block;
          auto* into = static_cast<uint8_t*>(recv) + static_cast<size_t>(p) * block;
          ncclResult_t rc = api.send(from, count, NcclType(type), p, comm, Stream());
          if (rc == ncclSuccess || rc == ncclInProgress) rc = api.recv(into, count, NcclType(type), p, comm, Stream());
          if (rc != ncclSuccess && rc != ncclInProgress) return rc;
        }
        return ncclSuccess;
      });
    });
  }
  StatusOr<Handle> ISend(const void* buffer, size_t count, DataType type, int peer) override {
    return Enqueue("ncclSend", [&](const NcclApi& api, ncclComm_t comm) {
      return api.send(buffer, count, NcclType(type), peer, comm, Stream());
    });
  }
  StatusOr<Handle> IRecv(void* buffer, size_t count, DataType type, int peer) override {
    return Enqueue("ncclRecv", [&](const NcclApi& api, ncclComm_t comm) {
      return api.recv(buffer, count, NcclType(type), peer, comm, Stream());
    });
  }
  StatusOr<Handle> ISendRecv(const void* send, int to, void* recv, int from, size_t count, DataType type) override {
    return Enqueue("ncclSend/ncclRecv", [&](const NcclApi& api, ncclComm_t comm) {
      return Group(api, [&] {
        ncclResult_t rc = api.send(send, count, NcclType(type), to, comm, Stream());
        if (rc != ncclSuccess && rc != ncclInProgress) return rc;
        return api.recv(recv, count, NcclType(type), from, comm, Stream());
      });
    });
  }
  // NCCL has no barrier: a one-element all-reduce on the GPU, waited for.
  Status Barrier() override {
    if (barrier_.data() == nullptr) {
      SRUNWAY_ASSIGN_OR_RETURN(barrier_, Allocate(sizeof(int32_t)));
    }
    return AllReduce(barrier_.data(), 1, DataType::kInt32, ReduceOp::kSum);
  }

  // For NcclRequest: polls `event` and the communicator's error state until the operation is done.
  Status WaitFor(CUevent event, std::string_view what) {
    const CudaDriver& cuda = *runtime_->cuda;
    const auto deadline = Clock::now() + timeout_;
    for (int spins = 0;; ++spins) {
      if (aborted_) return common::Aborted("{}: the communicator was aborted", what);
      CUresult state = cuda.event_query(event);
      if (state == CUDA_SUCCESS) return Status::Ok();
      if (state != CUDA_ERROR_NOT_READY) return cuda.Check(state, fmt::format("{} (cuEventQuery)", what));
      // The event query is cheap; the communicator's error state is looked at less often.
      if (spins % 64 == 63) SRUNWAY_RETURN_IF_ERROR(Poll(what, deadline));
      std::this_thread::yield();
    }
  }
  // For NcclRequest::Test: one look at `event`.
  StatusOr<bool> EventDone(CUevent event, std::string_view what) {
    if (aborted_) return common::Aborted("{}: the communicator was aborted", what);
    const CudaDriver& cuda = *runtime_->cuda;
    CUresult state = cuda.event_query(event);
    if (state == CUDA_SUCCESS) return true;
    if (state != CUDA_ERROR_NOT_READY) return cuda.Check(state, fmt::format("{} (cuEventQuery)", what));
    return false;
  }
  void Release(CUevent event) { runtime_->cuda->event_destroy(event); }

 private:
  CUstream Stream() const { return stream_; }

  // Runs `call` on the communicator under the lock Abort() takes; Aborted once it is gone.
  template <typename Call>
  StatusOr<ncclResult_t> WithComm(std::string_view what, Call&& call) {
    std::lock_guard lock(mutex_);
    if (comm_ == nullptr) return common::Aborted("{}: the communicator was aborted", what);
    return call(comm_);
  }

  void AbortLocked() {
    aborted_ = true;
    if (comm_ != nullptr) runtime_->nccl->abort(std::exchange(comm_, nullptr));
  }

  // One look at the communicator's error state, under the lock: true when it has finished what it was doing,
  // false while that is in progress; an error, or a passed `deadline`, aborts it and says why.
  StatusOr<bool> Look(std::string_view what, Clock::time_point deadline, ncclResult_t state = ncclInProgress) {
    const NcclApi& api = *runtime_->nccl;
    std::lock_guard lock(mutex_);
    if (comm_ == nullptr) return common::Aborted("{}: the communicator was aborted", what);
    if (state == ncclInProgress && api.async_error(comm_, &state) != ncclSuccess) state = ncclSystemError;
    if (state != ncclSuccess && state != ncclInProgress) {
      std::string detail = api.last_error(comm_);
      AbortLocked();
      return common::Unavailable("{} failed: {}{}{}", what, api.error_string(state), detail.empty() ? "" : ": ",
                                 detail);
    }
    if (state == ncclInProgress && Clock::now() > deadline) return ExpireLocked(what);
    return state == ncclSuccess;
  }

  // For an operation that waits on an event: the communicator's error state, and the deadline even while that
  // state is fine.
  Status Poll(std::string_view what, Clock::time_point deadline) {
    SRUNWAY_RETURN_IF_ERROR(Look(what, deadline).status());
    if (Clock::now() <= deadline) return Status::Ok();
    std::lock_guard lock(mutex_);
    return ExpireLocked(what);
  }

  Status ExpireLocked(std::string_view what) {
    AbortLocked();
    return common::DeadlineExceeded("{} did not finish within {:g} s (a rank may be missing or stuck; "
                                    "NCCL_DEBUG=INFO says more); the communicator was aborted",
                                    what, Seconds(timeout_));
  }

  // Settle for this communicator: waits until what returned `started` has finished.
  Status SettleOwn(ncclResult_t started, std::string_view what, Clock::time_point deadline) {
    for (ncclResult_t state = started;; state = ncclInProgress) {
      SRUNWAY_ASSIGN_OR_RETURN(bool done, Look(what, deadline, state));
      if (done) return Status::Ok();
      std::this_thread::yield();
    }
  }

  // ncclGroupStart, the calls, ncclGroupEnd; the first failure wins.
  template <typename Calls>
  static ncclResult_t Group(const NcclApi& api, Calls&& calls) {
    ncclResult_t rc = api.group_start();
    if (rc != ncclSuccess) return rc;
    ncclResult_t inside = calls();
    ncclResult_t ended = api.group_end();
    return inside != ncclSuccess && inside != ncclInProgress ? inside : ended;
  }

  // Starts an operation, waits until NCCL has enqueued it (a non-blocking communicator may still be working on
  // that when the call returns), and records the event its request waits on.
  template <typename StartFn>
  StatusOr<Handle> Enqueue(std::string_view what, StartFn&& start) {
    SRUNWAY_RETURN_IF_ERROR(runtime_->MakeCurrent());
    const NcclApi& api = *runtime_->nccl;
    SRUNWAY_ASSIGN_OR_RETURN(ncclResult_t rc, WithComm(what, [&](ncclComm_t comm) { return start(api, comm); }));
    if (rc != ncclSuccess) SRUNWAY_RETURN_IF_ERROR(SettleOwn(rc, what, Clock::now() + timeout_));
    const CudaDriver& cuda = *runtime_->cuda;
    CUevent event = nullptr;
    SRUNWAY_RETURN_IF_ERROR(cuda.Check(cuda.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    if (Status recorded = cuda.Check(cuda.event_record(event, stream_), "cuEventRecord"); !recorded.ok()) {
      cuda.event_destroy(event);
      return recorded;
    }
    return Handle(std::make_unique<NcclRequest>(this, event, what));
  }

  std::shared_ptr<Runtime> runtime_;
  std::mutex mutex_;  // guards comm_: every use of it, and Abort() from the watchdog's thread
  ncclComm_t comm_;   // nullptr once aborted or destroyed
  CUstream stream_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};
  Buffer barrier_;
};

NcclRequest::~NcclRequest() {
  if (!done_) (void)comm_->WaitFor(event_, what_);
  comm_->Release(event_);
}

Status NcclRequest::Wait() {
  if (done_) return Status::Ok();
  done_ = true;
  return comm_->WaitFor(event_, what_);
}

StatusOr<bool> NcclRequest::Test() {
  if (done_) return true;
  SRUNWAY_ASSIGN_OR_RETURN(done_, comm_->EventDone(event_, what_));
  return done_;
}

}  // namespace

// What the backend keeps open for every communicator of this process.
struct NcclRuntime {
  std::shared_ptr<Runtime> runtime;
};

NcclLocal OpenNccl(int local_rank) {
  NcclLocal local;
  auto runtime = OpenRuntime(local_rank);
  if (!runtime.ok()) {
    local.why_not = runtime.status().message();
    return local;
  }
  local.bus_id = (*runtime)->gpu->bus_id;
  local.scalable = (*runtime)->nccl->init_rank_scalable != nullptr;
  local.runtime = std::make_shared<NcclRuntime>(NcclRuntime{std::move(*runtime)});
  return local;
}

StatusOr<std::string> MakeNcclUniqueId(const NcclLocal& local) {
  if (local.runtime == nullptr) return common::FailedPrecondition("no NCCL here: {}", local.why_not);
  const NcclApi& api = *local.runtime->runtime->nccl;
  ncclUniqueId id;
  if (ncclResult_t rc = api.get_unique_id(&id); rc != ncclSuccess) {
    return common::Unavailable("ncclGetUniqueId failed: {}", api.error_string(rc));
  }
  return std::string(id.internal, sizeof id.internal);
}

StatusOr<std::unique_ptr<Comm>> CreateNcclComm(const NcclLocal& local, const std::vector<std::string>& ids, int rank,
                                               int size, std::chrono::milliseconds timeout) {
  if (local.runtime == nullptr) return common::FailedPrecondition("no NCCL here: {}", local.why_not);
  if (ids.empty()) return common::Internal("no NCCL unique id");
  std::vector<ncclUniqueId> unique_ids(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].size() != sizeof(ncclUniqueId)) {
      return common::Internal("NCCL unique id {} has {} bytes, not {}", i, ids[i].size(), sizeof(ncclUniqueId));
    }
    std::memcpy(unique_ids[i].internal, ids[i].data(), sizeof(ncclUniqueId));
  }
  std::shared_ptr<Runtime> rt = local.runtime->runtime;
  SRUNWAY_RETURN_IF_ERROR(rt->MakeCurrent());
  const NcclApi& api = *rt->nccl;
  const bool scalable = unique_ids.size() > 1;
  if (scalable && api.init_rank_scalable == nullptr) {
    return common::FailedPrecondition("{} has no ncclCommInitRankScalable (NCCL 2.23 or later)", api.lib.path());
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = scalable ? api.init_rank_scalable(&comm, size, rank, static_cast<int>(unique_ids.size()),
                                                      unique_ids.data(), &config)
                             : api.init_rank_config(&comm, size, unique_ids[0], rank, &config);
  const char* what = scalable ? "ncclCommInitRankScalable" : "ncclCommInitRankConfig";
  if (comm == nullptr) return common::Unavailable("{} failed: {}", what, api.error_string(rc));
  SRUNWAY_RETURN_IF_ERROR(NcclComm::Settle(api, comm, rc, what, Clock::now() + timeout, timeout));
  CUstream stream = nullptr;
  if (Status made = rt->cuda->Check(rt->cuda->stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      !made.ok()) {
    api.abort(comm);
    return made;
  }
  return std::unique_ptr<Comm>(std::make_unique<NcclComm>(rt, comm, stream, rank, size, timeout));
}

}  // namespace srunway::launcher
