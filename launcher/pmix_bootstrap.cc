// The PMIx bootstrap backend, under srun --mpi=pmix. libpmix is opened at run time, so programs start (and
// say what is missing) on nodes without it; Slurm's PMIx server applies no fence timeout, so we do.
#include <pmix_common.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/dynlib.h"
#include "common/env.h"
#include "common/log.h"
#include "launcher/bootstrap.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

constexpr auto kAbortGrace = std::chrono::seconds(2);
constexpr auto kAbortSettle = std::chrono::seconds(5);

struct PmixApi {
  common::DynamicLibrary library;
  pmix_status_t (*init)(pmix_proc_t*, pmix_info_t*, size_t);
  pmix_status_t (*finalize)(const pmix_info_t*, size_t);
  pmix_status_t (*get)(const pmix_proc_t*, const char[], const pmix_info_t[], size_t, pmix_value_t**);
  pmix_status_t (*get_nb)(const pmix_proc_t*, const char[], const pmix_info_t[], size_t, pmix_value_cbfunc_t, void*);
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
  auto api = std::make_unique<PmixApi>(PmixApi{std::move(library), {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}});
  auto bind = [&](auto& fn, const char* symbol) -> Status {
    auto address = api->library.RawSymbol(symbol);
    if (!address.ok()) return address.status().WithContext("PMIx library too old or not PMIx v3+");
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(*address);
    return Status::Ok();
  };
  SRUNWAY_RETURN_IF_ERROR(bind(api->init, "PMIx_Init"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->finalize, "PMIx_Finalize"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->get, "PMIx_Get"));
  SRUNWAY_RETURN_IF_ERROR(bind(api->get_nb, "PMIx_Get_nb"));
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

// After a fence misses its deadline: which ranks have posted the key of that exchange. Every peer is asked at
// once (PMIx_Get_nb); Slurm's PMIx server answers from the peer's node (direct modex) as soon as the peer has
// committed the key, and holds the question while it has not, so a peer with no answer after kProbeWait never got
// there. The answers may come after we stopped waiting: the state is shared with the callbacks.
constexpr auto kProbeWait = std::chrono::seconds(2);

struct Probe {
  std::mutex mutex;
  std::vector<bool> arrived;
  int answers = 0;
};

void ProbeAnswered(pmix_status_t status, pmix_value_t*, void* data) {
  auto* context = static_cast<std::pair<std::shared_ptr<Probe>, int>*>(data);
  {
    std::lock_guard lock(context->first->mutex);
    context->first->arrived[static_cast<size_t>(context->second)] = status == PMIX_SUCCESS;
    ++context->first->answers;
  }
  delete context;
}

// "rank 3 on node2", "ranks 3 and 9 on node2", "ranks 3 (node2), 4 (node3) and 12 more".
std::string NameRanks(const std::vector<std::pair<int, std::string>>& ranks) {
  constexpr size_t kShown = 8;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  bool one_host = true;
  for (const auto& [rank, host] : ranks) one_host = one_host && host == ranks.front().second;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i].first);
    if (!one_host && !ranks[i].second.empty()) text += " (" + ranks[i].second + ")";
  }
  if (ranks.size() > kShown) text += fmt::format(" and {} more", ranks.size() - kShown);
  if (one_host && !ranks.front().second.empty()) text += " on " + ranks.front().second;
  return text;
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
    SRUNWAY_RETURN_IF_ERROR(Fence(phase, true, key));
    std::vector<std::string> values;
    for (int rank = 0; rank < identity_.size; ++rank) {
      SRUNWAY_ASSIGN_OR_RETURN(std::string value, GetBytes(rank, key, phase));
      values.push_back(std::move(value));
    }
    return values;
  }

  StatusOr<std::string> Broadcast(std::string_view value, int root, std::string_view phase) override {
    // Every rank posts the key (the others an empty value), so a fence that misses its deadline can tell which
    // ranks never got here.
    std::string key = NextKey(phase);
    SRUNWAY_RETURN_IF_ERROR(Put(key, identity_.rank == root ? value : std::string_view()));
    SRUNWAY_RETURN_IF_ERROR(Fence(phase, true, key));
    return GetBytes(root, key, phase);
  }

  // A fence without data; each rank still posts a key of its own, for the deadline's question (see Missing).
  Status Barrier(std::string_view phase) override {
    std::string key = NextKey(phase);
    SRUNWAY_RETURN_IF_ERROR(Put(key, ""));
    SRUNWAY_RETURN_IF_ERROR(Commit(phase));
    return Fence(phase, false, key);
  }

  void Abort(const std::string& why) override {
    if (!initialized_) return;
    // Slurm's PMIx server answers PMIx_Abort by ending the whole step, so nothing is left hanging. The other
    // ranks reach the same deadline within moments; give them that long to print their own line first.
    std::this_thread::sleep_for(kAbortGrace);
    api_->abort(1, (Prefix() + why).c_str(), nullptr, 0);
    // PMIx_Abort returns before the server has ended the step; a rank that exits now is seen gone by its MPI
    // peers first, and each printed Open MPI's page-long "peer process has unexpectedly disconnected".
    std::this_thread::sleep_for(kAbortSettle);
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

  // A fence over the whole step that gives up at our deadline, and then names the ranks that never posted
  // `probe_key`, the key every rank posts for this exchange.
  Status Fence(std::string_view phase, bool collect, const std::string& probe_key) {
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
      lock.unlock();
      std::vector<std::pair<int, std::string>> missing = Missing(probe_key);
      if (missing.empty()) {
        return common::DeadlineExceeded("{} did not complete within {} s: every rank posted its part, so one died "
                                        "or is stuck inside the fence", phase, timeout_.count() / 1000.0);
      }
      return common::DeadlineExceeded("{} did not complete within {} s: {} did not arrive", phase,
                                      timeout_.count() / 1000.0, NameRanks(missing));
    }
    if (wait->status != PMIX_SUCCESS) {
      return common::MakeStatus(common::StatusCode::kAborted, "a rank failed during {}: {}", phase,
                                api_->error_string(wait->status));
    }
    return Status::Ok();
  }

  // The ranks (and their hosts) that have not posted `key` within kProbeWait of being asked.
  std::vector<std::pair<int, std::string>> Missing(const std::string& key) {
    auto probe = std::make_shared<Probe>();
    probe->arrived.assign(static_cast<size_t>(identity_.size), false);
    int asked = 0;
    for (int rank = 0; rank < identity_.size; ++rank) {
      pmix_proc_t peer;
      PMIX_LOAD_PROCID(&peer, me_.nspace, static_cast<pmix_rank_t>(rank));
      auto* context = new std::pair<std::shared_ptr<Probe>, int>(probe, rank);
      if (api_->get_nb(&peer, key.c_str(), nullptr, 0, ProbeAnswered, context) == PMIX_SUCCESS) {
        ++asked;
      } else {
        delete context;
        std::lock_guard lock(probe->mutex);
        probe->arrived[static_cast<size_t>(rank)] = true;  // no way to ask: not named
      }
    }
    const auto give_up = std::chrono::steady_clock::now() + kProbeWait;
    while (std::chrono::steady_clock::now() < give_up) {
      {
        std::lock_guard lock(probe->mutex);
        if (probe->answers == asked) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<int> ranks;
    {
      std::lock_guard lock(probe->mutex);
      for (int rank = 0; rank < identity_.size; ++rank) {
        if (rank != identity_.rank && !probe->arrived[static_cast<size_t>(rank)]) ranks.push_back(rank);
      }
    }
    std::vector<std::pair<int, std::string>> named;
    for (int rank : ranks) named.emplace_back(rank, HostOf(rank));
    return named;
  }

  // A rank's host from the job data Slurm's PMIx server gave every client; empty when it is not there.
  std::string HostOf(int rank) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me_.nspace, static_cast<pmix_rank_t>(rank));
    pmix_info_t info;
    std::memset(&info, 0, sizeof info);
    std::strncpy(info.key, PMIX_OPTIONAL, PMIX_MAX_KEYLEN);  // the local store only: never wait on a dead peer
    info.value.type = PMIX_BOOL;
    info.value.data.flag = true;
    pmix_value_t* value = nullptr;
    std::string host;
    if (api_->get(&peer, PMIX_HOSTNAME, &info, 1, &value) == PMIX_SUCCESS && value != nullptr &&
        value->type == PMIX_STRING && value->data.string != nullptr) {
      host = value->data.string;
    }
    if (value != nullptr) Release(value);
    return host;
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
