// Bootstrap: every rank learns who it is and where its peers are, and can exchange small values with them.
// This file: backend choice, the Slurm and torchrun environment backends over the TCP exchange.
#include "launcher/bootstrap.h"

#include <netdb.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <optional>

#include "common/env.h"
#include "common/hostlist.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/subprocess.h"
#include "launcher/tcp_store.h"


namespace srunway::launcher {
namespace {

// Rank 0 is the one that can name a rank that never arrived; the others wait this much longer than it does, so
// its abort, which names that rank, reaches them before their own deadline says only that rank 0 went quiet.
constexpr auto kRootGrace = std::chrono::seconds(3);

using common::Status;
using common::StatusOr;

std::optional<std::string> ResolveIpv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return std::nullopt;
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
  ::freeaddrinfo(found);
  return std::string(text);
}

// Ranks over the TCP exchange; rank 0 hosts it.
class TcpBootstrap : public Bootstrap {
 public:
  TcpBootstrap(BootstrapKind kind, Identity identity, std::chrono::milliseconds timeout) : kind_(kind) {
    identity_ = std::move(identity);
    timeout_ = timeout;
  }
  BootstrapKind kind() const override { return kind_; }

  // Every failure line starts with who saw it: "rank 3 on node1: rank 5 did not arrive during init".
  Status Start(const std::string& root_host, const std::vector<uint16_t>& ports, const std::string& token) {
    Status started = Connect(root_host, ports, token);
    return started.ok() ? started : started.WithContext(Prefix().substr(0, Prefix().size() - 2));
  }

  Status Connect(const std::string& root_host, const std::vector<uint16_t>& ports, const std::string& token) {
    Deadline deadline = Clock::now() + timeout_;
    if (identity_.size == 1) return Status::Ok();
    if (identity_.rank == 0) {
      SRUNWAY_ASSIGN_OR_RETURN(TcpStoreServer server, TcpStoreServer::Listen(ports, token, identity_.size));
      server_.emplace(std::move(server));
      Status admitted = server_->AdmitAll(deadline, "init");
      if (!admitted.ok()) {
        server_->AbortAll(admitted.message());
        return admitted;
      }
      return Status::Ok();
    }
    SRUNWAY_ASSIGN_OR_RETURN(TcpStoreClient client,
                             TcpStoreClient::Connect(root_host, ports, token, identity_.rank, deadline));
    client_.emplace(std::move(client));
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> AllGather(std::string_view mine, std::string_view phase) override {
    Deadline deadline = Clock::now() + timeout_;
    if (identity_.size == 1) return std::vector<std::string>{std::string(mine)};
    if (server_) {
      auto values = server_->Round(mine, phase, deadline, [this](int r) { return NameRank(r); });
      if (!values.ok()) server_->AbortAll(values.status().message());
      return values;
    }
    return client_->Round(mine, phase, deadline + kRootGrace);
  }

  StatusOr<std::string> Broadcast(std::string_view value, int root, std::string_view phase) override {
    SRUNWAY_ASSIGN_OR_RETURN(auto values, AllGather(identity_.rank == root ? value : std::string_view(), phase));
    return values.at(static_cast<size_t>(root));
  }

  Status Barrier(std::string_view phase) override { return AllGather("", phase).status(); }

  void Abort(const std::string& why) override {
    if (server_) server_->AbortAll(why);
    server_.reset();
    client_.reset();
  }

  Status Finalize() override {
    server_.reset();
    client_.reset();
    return Status::Ok();
  }

 private:
  BootstrapKind kind_;
  std::optional<TcpStoreServer> server_;
  std::optional<TcpStoreClient> client_;
};

StatusOr<int> EnvInt(std::string_view name, int min, int max) {
  SRUNWAY_ASSIGN_OR_RETURN(int64_t value, common::GetEnvInt(name, min, max));
  return static_cast<int>(value);
}

// "8(x2)" or "3,2" (SLURM_STEP_TASKS_PER_NODE) -> tasks on node `node_id`.
StatusOr<int> TasksOnNode(std::string_view text, int node_id) {
  int node = 0;
  for (std::string_view field : common::Split(text, ',')) {
    size_t paren = field.find("(x");
    SRUNWAY_ASSIGN_OR_RETURN(int64_t tasks, common::ParseInt(field.substr(0, paren), "SLURM_STEP_TASKS_PER_NODE", 1, 1 << 20));
    int64_t repeat = 1;
    if (paren != std::string_view::npos) {
      if (field.back() != ')') {
        return common::InvalidArgument("SLURM_STEP_TASKS_PER_NODE='{}' is malformed", common::Printable(text));
      }
      SRUNWAY_ASSIGN_OR_RETURN(repeat, common::ParseInt(field.substr(paren + 2, field.size() - paren - 3),
                                                        "SLURM_STEP_TASKS_PER_NODE", 1, 1 << 20));
    }
    if (node_id < node + repeat) return static_cast<int>(tasks);
    node += static_cast<int>(repeat);
  }
  return common::InvalidArgument("SLURM_STEP_TASKS_PER_NODE='{}' has no entry for node {}", common::Printable(text),
                                 node_id);
}

}  // namespace

StatusOr<BootstrapKind> ParseBootstrapKind(std::string_view name) {
  for (BootstrapKind kind : {BootstrapKind::kAuto, BootstrapKind::kPmix, BootstrapKind::kSlurm, BootstrapKind::kEnv}) {
    if (BootstrapKindName(kind) == name) return kind;
  }
  return common::InvalidArgument("unknown bootstrap '{}' (expected auto, pmix, slurm or env)", name);
}

std::string_view BootstrapKindName(BootstrapKind kind) {
  switch (kind) {
    case BootstrapKind::kAuto: return "auto";
    case BootstrapKind::kPmix: return "pmix";
    case BootstrapKind::kSlurm: return "slurm";
    case BootstrapKind::kEnv: return "env";
  }
  return "auto";
}

std::string Bootstrap::NameRank(int rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < peers_.size()) return fmt::format("rank {} on {}", rank, peers_[rank].host);
  return fmt::format("rank {}", rank);
}

std::string Bootstrap::Prefix() const { return fmt::format("rank {} on {}: ", identity_.rank, identity_.host); }

Status Bootstrap::ExchangePeers(std::string_view announced) {
  const common::Json mine = {{"host", identity_.host}, {"address", LocalAddress()}, {"announced", announced}};
  SRUNWAY_ASSIGN_OR_RETURN(auto values, AllGather(mine.dump(), "init"));
  std::vector<Peer> peers;
  for (size_t r = 0; r < values.size(); ++r) {
    // A peer's part is parsed, never trusted: a malformed one is an error naming it, not an exception.
    const std::string where = fmt::format("rank {}'s part of the init exchange", r);
    SRUNWAY_ASSIGN_OR_RETURN(common::Json value, common::ParseJson(values[r], where));
    Peer peer;
    SRUNWAY_ASSIGN_OR_RETURN(peer.host, common::JsonField<std::string>(value, "host", where));
    SRUNWAY_ASSIGN_OR_RETURN(peer.address, common::JsonField<std::string>(value, "address", where));
    SRUNWAY_ASSIGN_OR_RETURN(peer.announced, common::JsonField<std::string>(value, "announced", where));
    peers.push_back(std::move(peer));
  }
  peers_ = std::move(peers);
  return Status::Ok();
}

StatusOr<std::string> SlurmNodeAddress(const std::string& node) {
  if (auto address = ResolveIpv4(node)) return *address;
  auto shown = common::RunCommand({"scontrol", "show", "node", node, "-o"});
  if (!shown.ok() || shown->exit_code != 0) {
    return common::NotFound("node {} does not resolve and scontrol could not tell its NodeAddr", node);
  }
  const std::string& out = shown->output;
  size_t at = out.find("NodeAddr=");
  if (at == std::string::npos) return common::NotFound("scontrol shows no NodeAddr for node {}", node);
  std::string addr = out.substr(at + 9, out.find_first_of(" \n", at) - at - 9);
  if (auto address = ResolveIpv4(addr)) return *address;
  return common::NotFound("node {} has NodeAddr {}, which does not resolve", node, addr);
}

std::string LocalAddress() {
  if (const std::optional<std::string> name = common::HostName()) {
    if (auto address = ResolveIpv4(*name)) return *address;
  }
  return "127.0.0.1";
}

StatusOr<std::unique_ptr<Bootstrap>> CreateSlurmBootstrap(std::chrono::milliseconds timeout) {
  Identity id;
  SRUNWAY_ASSIGN_OR_RETURN(id.rank, EnvInt("SLURM_PROCID", 0, 1 << 24));
  auto size = EnvInt("SLURM_STEP_NUM_TASKS", 1, 1 << 24);
  if (!size.ok()) size = EnvInt("SLURM_NTASKS", 1, 1 << 24);
  if (!size.ok()) return size.status().WithContext("slurm bootstrap");
  id.size = *size;
  SRUNWAY_ASSIGN_OR_RETURN(id.local_rank, EnvInt("SLURM_LOCALID", 0, 1 << 20));
  SRUNWAY_ASSIGN_OR_RETURN(id.node_id, EnvInt("SLURM_NODEID", 0, 1 << 20));
  auto nodes = EnvInt("SLURM_STEP_NUM_NODES", 1, 1 << 20);
  id.node_count = nodes.ok() ? *nodes : 1;
  auto tasks_per_node = common::GetEnv("SLURM_STEP_TASKS_PER_NODE");
  if (tasks_per_node) {
    SRUNWAY_ASSIGN_OR_RETURN(id.local_size, TasksOnNode(*tasks_per_node, id.node_id));
  }
  id.host = common::GetEnvOr("SLURMD_NODENAME", "localhost");
  if (id.rank >= id.size) return common::InvalidArgument("SLURM_PROCID={} is not below {} tasks", id.rank, id.size);
  auto nodelist = common::GetEnv("SLURM_STEP_NODELIST");
  if (!nodelist) return common::NotFound("slurm bootstrap: SLURM_STEP_NODELIST is not set (not inside srun?)");
  SRUNWAY_ASSIGN_OR_RETURN(auto hosts, common::ExpandHostlist(*nodelist));
  if (hosts.empty()) return common::InvalidArgument("SLURM_STEP_NODELIST is empty");
  SRUNWAY_ASSIGN_OR_RETURN(int64_t job, common::GetEnvInt("SLURM_JOB_ID", 0, INT64_MAX));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t step, common::GetEnvInt("SLURM_STEP_ID", 0, INT64_MAX));

  const std::vector<uint16_t> ports = SlurmBootstrapPorts(job, step);
  std::string token = fmt::format("srunway-slurm:{}.{}:{}:{}:{}", job, step, ::getuid(), *nodelist, id.size);
  std::string root_address = "127.0.0.1";
  if (id.rank != 0) {
    SRUNWAY_ASSIGN_OR_RETURN(root_address, SlurmNodeAddress(hosts.front()));
  }
  auto bootstrap = std::make_unique<TcpBootstrap>(BootstrapKind::kSlurm, id, timeout);
  SRUNWAY_RETURN_IF_ERROR(bootstrap->Start(root_address, ports, token));
  return std::unique_ptr<Bootstrap>(std::move(bootstrap));
}

std::vector<uint16_t> SlurmBootstrapPorts(int64_t job, int64_t step) {
  // 1276 bases ten apart: 20000 + 1275 * 10 + 7 = 32757. Unsigned: the ids come from the environment, any size.
  const auto mixed = static_cast<uint64_t>(job) * 131 + static_cast<uint64_t>(step);
  const auto base = static_cast<uint16_t>(20000 + (mixed % 1276) * 10);
  std::vector<uint16_t> ports;
  for (uint16_t i = 0; i < 8; ++i) ports.push_back(static_cast<uint16_t>(base + i));
  return ports;
}

StatusOr<std::unique_ptr<Bootstrap>> CreateEnvBootstrap(std::chrono::milliseconds timeout) {
  Identity id;
  SRUNWAY_ASSIGN_OR_RETURN(id.size, EnvInt("WORLD_SIZE", 1, 1 << 24));
  SRUNWAY_ASSIGN_OR_RETURN(id.rank, EnvInt("RANK", 0, id.size - 1));
  if (common::GetEnv("LOCAL_WORLD_SIZE")) {
    SRUNWAY_ASSIGN_OR_RETURN(id.local_size, EnvInt("LOCAL_WORLD_SIZE", 1, id.size));
  }
  if (common::GetEnv("LOCAL_RANK")) {
    SRUNWAY_ASSIGN_OR_RETURN(id.local_rank, EnvInt("LOCAL_RANK", 0, id.local_size - 1));
  }
  if (auto group = common::GetEnv("GROUP_RANK"); group) {
    SRUNWAY_ASSIGN_OR_RETURN(id.node_id, EnvInt("GROUP_RANK", 0, 1 << 20));
  } else {
    id.node_id = id.rank / id.local_size;
  }
  id.node_count = (id.size + id.local_size - 1) / id.local_size;
  id.host = common::GetEnvOr("SLURMD_NODENAME", common::HostName().value_or(""));
  std::string master = common::GetEnvOr("MASTER_ADDR", id.size == 1 ? "127.0.0.1" : "");
  if (master.empty()) return common::NotFound("env bootstrap: MASTER_ADDR is not set");
  int master_port = 29500;
  if (common::GetEnv("MASTER_PORT")) {
    SRUNWAY_ASSIGN_OR_RETURN(master_port, EnvInt("MASTER_PORT", 1, 65534));
  }
  // Our exchange uses the next port: MASTER_PORT itself stays free for the program torchrun-style code starts.
  int store_port = master_port + 1;
  if (common::GetEnv("SRUNWAY_STORE_PORT")) {
    SRUNWAY_ASSIGN_OR_RETURN(store_port, EnvInt("SRUNWAY_STORE_PORT", 1, 65535));
  }
  std::string token = common::GetEnvOr(
      "SRUNWAY_BOOTSTRAP_TOKEN", fmt::format("srunway-env:{}:{}:{}:{}", master, master_port, id.size,
                                             common::GetEnvOr("TORCHELASTIC_RUN_ID", "")));
  auto bootstrap = std::make_unique<TcpBootstrap>(BootstrapKind::kEnv, id, timeout);
  SRUNWAY_RETURN_IF_ERROR(bootstrap->Start(master, {static_cast<uint16_t>(store_port)}, token));
  return std::unique_ptr<Bootstrap>(std::move(bootstrap));
}

std::unique_ptr<Bootstrap> CreateSingleBootstrap() {
  Identity id;
  id.host = common::HostName().value_or("");
  return std::make_unique<TcpBootstrap>(BootstrapKind::kEnv, id, std::chrono::milliseconds(0));
}

StatusOr<std::unique_ptr<Bootstrap>> CreateBootstrap(BootstrapKind kind, std::chrono::milliseconds timeout,
                                                     const FailureReporter& report, const Announcer& announce) {
  StatusOr<std::unique_ptr<Bootstrap>> bootstrap = common::Internal("no backend");
  if (kind == BootstrapKind::kAuto) {
    // A program that torchrun or srunway-launch started has its rendezvous in the environment; the step's PMIx
    // was the launcher's (a second client for the same rank is refused).
    if (common::GetEnv("RANK") && common::GetEnv("WORLD_SIZE") && common::GetEnv("MASTER_ADDR")) {
      kind = BootstrapKind::kEnv;
    } else if (common::GetEnv("PMIX_RANK") && common::GetEnv("PMIX_NAMESPACE")) {
      kind = BootstrapKind::kPmix;
    } else if (common::GetEnv("SLURM_PROCID") && common::GetEnv("SLURM_STEP_ID")) {
      kind = BootstrapKind::kSlurm;
    } else if (common::GetEnv("WORLD_SIZE") || common::GetEnv("RANK")) {
      kind = BootstrapKind::kEnv;
    } else {
      bootstrap = CreateSingleBootstrap();
    }
  }
  if (kind != BootstrapKind::kAuto) {
    switch (kind) {
      case BootstrapKind::kPmix: bootstrap = CreatePmixBootstrap(timeout); break;
      case BootstrapKind::kSlurm: bootstrap = CreateSlurmBootstrap(timeout); break;
      default: bootstrap = CreateEnvBootstrap(timeout); break;
    }
  }
  if (!bootstrap.ok()) {
    if (report) report(bootstrap.status());
    return bootstrap.status();
  }
  Status peers = (*bootstrap)->ExchangePeers(announce ? announce((*bootstrap)->identity()) : std::string());
  if (!peers.ok()) {
    std::string prefix = (*bootstrap)->Prefix();
    Status failure = peers.WithContext(prefix.substr(0, prefix.size() - 2));
    if (report) report(failure);
    (*bootstrap)->Abort(peers.message());
    return failure;
  }
  common::SetLogRank((*bootstrap)->identity().rank);
  return bootstrap;
}

}  // namespace srunway::launcher
