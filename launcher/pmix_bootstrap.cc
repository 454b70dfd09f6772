// The PMIx bootstrap backend, under srun --mpi=pmix. libpmix is opened at run time, so programs start (and
// say what is missing) on nodes without it; Slurm's PMIx server applies no fence timeout, so we do.
#include <pmix_common.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "common/dynlib.h"
#include "common/env.h"
#include "common/log.h"
#include "launcher/bootstrap.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

constexpr auto kAbortGrace = std::chrono::seconds(2);

struct PmixApi {
  common::DynamicLibrary library;
  pmix_status_t (*init)(pmix_proc_t*, pmix_info_t*, size_t);
  pmix_status_t (*finalize)(const pmix_info_t*, size_t);
  pmix_status_t (*get)(const pmix_proc_t*, const char[], const pmix_info_t[], size_t, pmix_value_t**);
  pmix_status_t (*put)(pmix_scope_t, const char[], pmix_value_t*);
  pmix_status_t (*commit)();
  pmix_status_t (*fence_nb)(const pmix_proc_t[], size_t, const pmix_info_t[], size_t, pmix_op_cbfunc_t, void*);
  pmix_status_t (*abort)(int, const char[], pmix_proc_t[], size_t);
  const char* (*error_string)(pmix_status_t);
  void (*value_destruct)(pmix_value_t*);
  const char* (*version)();
};

StatusOr<std::unique_ptr<PmixApi>> LoadPmix() {
  std::vector<std::string> names = {"libpmix.so.2", "libpmix.so"};
  std::vector<std::string> dirs;
  if (auto dir = common::GetEnv("SRUNWAY_PMIX_LIB_DIR")) dirs.push_back(*dir);
  SRUNWAY_ASSIGN_OR_RETURN(common::DynamicLibrary library, common::DynamicLibrary::OpenFirst(names, dirs));
  auto api = std::make_unique<PmixApi>(PmixApi{std::move(library), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}});
  auto bind = [&](auto& fn, const char* symbol) -> Status {
    auto address = api->library.RawSymbol(symbol);
    if (!address.ok()) return address.status().WithContext("PMIx library too old or not PMIx v3+");
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(*address);
    return Status::Ok();
  };
  SRUNWAY_RETURN_IF_ERROR(bind(api->init, "PMIx_Init"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->finalize, "PMIx_Finalize"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->get, "PMIx_Get"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->put, "PMIx_Put"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->commit, "PMIx_Commit"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->fence_nb, "PMIx_Fence_nb"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->abort, "PMIx_Abort"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->error_string, "PMIx_Error_string"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->value_destruct, "PMIx_Value_destruct"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->version, "PMIx_Get_version"));
  return api;
}

// A fence's completion, shared with PMIx's callback, which may fire after we stopped waiting.
struct FenceWait {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
};

void FenceDone(pmix_status_t status, void* data) {
  auto* wait = static_cast<std::shared_ptr<FenceWait>*>(data);
  {
    std::lock_guard lock((*wait)->mutex);
    (*wait)->done = true;
    (*wait)->status = status;
  }
  (*wait)->done_cv.notify_all();
  delete wait;
}

std::optional<int64_t> AsInteger(const pmix_value_t& value) {
  switch (value.type) {
    case PMIX_UINT8: return value.data.uint8;
    case PMIX_UINT16: return value.data.uint16;
    case PMIX_UINT32: return value.data.uint32;
    case PMIX_UINT64: return static_cast<int64_t>(value.data.uint64);
    case PMIX_INT: return value.data.integer;
    case PMIX_INT32: return value.data.int32;
    case PMIX_INT64: return value.data.int64;
    case PMIX_PROC_RANK: return value.data.rank;
    default: return std::nullopt;
  }
}

class PmixBootstrap : public Bootstrap {
 public:
  PmixBootstrap(std::unique_ptr<PmixApi> api, std::chrono::milliseconds timeout) : api_(std::move(api)) {
    timeout_ = timeout;
  }
  ~PmixBootstrap() override {
    if (initialized_) (void)Finalize();
  }
  BootstrapKind kind() const override { return BootstrapKind::kPmix; }

  Status Init() {
    pmix_status_t rc = api_->init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      return common::Unavailable("PMIx_Init failed: {} (libpmix {} at {}; expected a PMIx server from "
                                 "srun --mpi=pmix)", api_->error_string(rc), api_->version(), api_->library.path());
    }
    initialized_ = true;
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    SRUNWAY_ASSIGN_OR_RETURN(int64_t size, GetInteger(job, PMIX_JOB_SIZE));
    SRUNWAY_ASSIGN_OR_RETURN(int64_t local_rank, GetInteger(me_, PMIX_LOCAL_RANK));
    SRUNWAY_ASSIGN_OR_RETURN(int64_t local_size, GetInteger(job, PMIX_LOCAL_SIZE));
    SRUNWAY_ASSIGN_OR_RETURN(int64_t node_id, GetInteger(me_, PMIX_NODEID));
    SRUNWAY_ASSIGN_OR_RETURN(int64_t nodes, GetInteger(job, PMIX_NUM_NODES));
    identity_ = Identity{static_cast<int>(me_.rank), static_cast<int>(size), static_cast<int>(local_rank),
                         static_cast<int>(local_size), static_cast<int>(node_id), static_cast<int>(nodes),
                         common::GetEnvOr("SLURMD_NODENAME", "")};
    if (identity_.host.empty()) {
      pmix_value_t* value = nullptr;
      if (api_->get(&me_, PMIX_HOSTNAME, nullptr, 0, &value) == PMIX_SUCCESS && value->type == PMIX_STRING) {
        identity_.host = value->data.string;
      }
      if (value != nullptr) Release(value);
    }
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> AllGather(std::string_view mine, std::string_view phase) override {
    std::string key = NextKey(phase);
    SRUNWAY_RETURN_IF_ERROR(Put(key, mine));
    SRUNWAY_RETURN_IF_ERROR(Fence(phase, true));
    std::vector<std::string> values;
    for (int rank = 0; rank < identity_.size; ++rank) {
      SRUNWAY_ASSIGN_OR_RETURN(std::string value, GetBytes(rank, key, phase));
      values.push_back(std::move(value));
    }
    return values;
  }

  StatusOr<std::string> Broadcast(std::string_view value, int root, std::string_view phase) override {
    std::string key = NextKey(phase);
    if (identity_.rank == root) SRUNWAY_RETURN_IF_ERROR(Put(key, value));
    if (identity_.rank == root) SRUNWAY_RETURN_IF_ERROR(Commit(phase));
    SRUNWAY_RETURN_IF_ERROR(Fence(phase, true));
    return GetBytes(root, key, phase);
  }

  Status Barrier(std::string_view phase) override { return Fence(phase, false); }

  void Abort(const std::string& why) override {
    if (!initialized_) return;
    // Slurm's PMIx server answers PMIx_Abort by ending the whole step, so nothing is left hanging. The other
    // ranks reach the same deadline within moments; give them that long to print their own line first.
    std::this_thread::sleep_for(kAbortGrace);
    api_->abort(1, (Prefix() + why).c_str(), nullptr, 0);
  }

  Status Finalize() override {
    if (!initialized_) return Status::Ok();
    initialized_ = false;
    pmix_status_t rc = api_->finalize(nullptr, 0);
    if (rc != PMIX_SUCCESS) return common::Unavailable("PMIx_Finalize failed: {}", api_->error_string(rc));
    return Status::Ok();
  }

 private:
  std::string NextKey(std::string_view phase) { return fmt::format("srunway.{}.{}", phase, ++sequence_); }

  void Release(pmix_value_t* value) {
    api_->value_destruct(value);
    std::free(value);
  }

  StatusOr<int64_t> GetInteger(const pmix_proc_t& proc, const char* key) {
    pmix_value_t* value = nullptr;
    pmix_status_t rc = api_->get(&proc, key, nullptr, 0, &value);
    if (rc != PMIX_SUCCESS || value == nullptr) {
      return common::Unavailable("PMIx_Get({}) failed: {}", key, api_->error_string(rc));
    }
    auto number = AsInteger(*value);
    Release(value);
    if (!number) return common::Internal("PMIx key {} is not an integer", key);
    return *number;
  }

  Status Put(const std::string& key, std::string_view bytes) {
    pmix_value_t value;
    std::memset(&value, 0, sizeof value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = const_cast<char*>(bytes.data());
    value.data.bo.size = bytes.size();
    pmix_status_t rc = api_->put(PMIX_GLOBAL, key.c_str(), &value);
    if (rc != PMIX_SUCCESS) return common::Unavailable("PMIx_Put({}) failed: {}", key, api_->error_string(rc));
    return Status::Ok();
  }

  Status Commit(std::string_view phase) {
    pmix_status_t rc = api_->commit();
    if (rc != PMIX_SUCCESS) return common::Unavailable("PMIx_Commit failed during {}: {}", phase, api_->error_string(rc));
    return Status::Ok();
  }

  // A fence over the whole step that gives up at our deadline.
  Status Fence(std::string_view phase, bool collect) {
    if (collect) SRUNWAY_RETURN_IF_ERROR(Commit(phase));
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    std::memset(&info, 0, sizeof info);
    std::strncpy(info.key, PMIX_COLLECT_DATA, PMIX_MAX_KEYLEN);
    info.value.type = PMIX_BOOL;
    info.value.data.flag = collect;
    auto wait = std::make_shared<FenceWait>();
    auto* handle = new std::shared_ptr<FenceWait>(wait);
    pmix_status_t rc = api_->fence_nb(&job, 1, &info, 1, FenceDone, handle);
    if (rc != PMIX_SUCCESS) {
      delete handle;
      return common::Unavailable("PMIx_Fence failed during {}: {}", phase, api_->error_string(rc));
    }
    std::unique_lock lock(wait->mutex);
    if (!wait->done_cv.wait_for(lock, timeout_, [&] { return wait->done; })) {
      return common::DeadlineExceeded("{} did not complete within {} s: a rank died or did not arrive (PMIx cannot "
                                      "say which)", phase, timeout_.count() / 1000.0);
    }
    if (wait->status != PMIX_SUCCESS) {
      return common::MakeStatus(common::StatusCode::kAborted, "a rank failed during {}: {}", phase,
                                api_->error_string(wait->status));
    }
    return Status::Ok();
  }

  StatusOr<std::string> GetBytes(int rank, const std::string& key, std::string_view phase) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me_.nspace, static_cast<pmix_rank_t>(rank));
    pmix_value_t* value = nullptr;
    pmix_status_t rc = api_->get(&peer, key.c_str(), nullptr, 0, &value);
    if (rc != PMIX_SUCCESS || value == nullptr) {
      return common::Unavailable("could not read {}'s value during {}: {}", NameRank(rank), phase,
                                 api_->error_string(rc));
    }
    std::string bytes;
    if (value->type == PMIX_BYTE_OBJECT && value->data.bo.bytes != nullptr) {
      bytes.assign(value->data.bo.bytes, value->data.bo.size);
    }
    Release(value);
    return bytes;
  }

  std::unique_ptr<PmixApi> api_;
  pmix_proc_t me_{};
  bool initialized_ = false;
  uint64_t sequence_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Bootstrap>> CreatePmixBootstrap(std::chrono::milliseconds timeout) {
  auto api = LoadPmix();
  if (!api.ok()) return api.status().WithContext("pmix bootstrap");
  auto bootstrap = std::make_unique<PmixBootstrap>(std::move(*api), timeout);
  SRUNWAY_RETURN_IF_ERROR(bootstrap->Init());
  return std::unique_ptr<Bootstrap>(std::move(bootstrap));
}

}  // namespace srunway::launcher
