// Bootstrap: every rank learns who it is and where its peers are, and can exchange small values with them.
// Three backends (PMIx, Slurm environment + TCP, torchrun environment + TCP); every call has a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::launcher {

enum class BootstrapKind { kAuto, kPmix, kSlurm, kEnv };

// "auto", "pmix", "slurm", "env"; anything else is an InvalidArgument listing these.
common::StatusOr<BootstrapKind> ParseBootstrapKind(std::string_view name);
std::string_view BootstrapKindName(BootstrapKind kind);

struct Identity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_id = 0;
  int node_count = 1;
  std::string host;  // this rank's node name (SLURMD_NODENAME under Slurm)
};

struct Peer {
  std::string host;       // node name
  std::string address;    // an IPv4 address the node can be reached at
  std::string announced;  // what the rank added to the "init" exchange (CreateBootstrap's `announce`)
};

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  const Identity& identity() const { return identity_; }
  // Every rank's node and address, from the first exchange (phase "init").
  const std::vector<Peer>& peers() const { return peers_; }
  virtual BootstrapKind kind() const = 0;

  // Every rank contributes `mine`; all receive every contribution in rank order.
  virtual common::StatusOr<std::vector<std::string>> AllGather(std::string_view mine, std::string_view phase) = 0;
  // `value` from `root` reaches every rank (the others' `value` is ignored).
  virtual common::StatusOr<std::string> Broadcast(std::string_view value, int root, std::string_view phase) = 0;
  virtual common::Status Barrier(std::string_view phase) = 0;
  // Ends the whole step on purpose, after telling the peers `why` (without this rank's prefix; each peer
  // prints its own) where the backend can.
  virtual void Abort(const std::string& why) = 0;
  virtual common::Status Finalize() = 0;

  // "rank 5 on node2" once hosts are known, else "rank 5".
  std::string NameRank(int rank) const;
  // "rank 3 on node1: " for the start of a failure line.
  std::string Prefix() const;
  // Runs the "init" exchange that fills peers(), each rank adding `announced`; CreateBootstrap does it.
  common::Status ExchangePeers(std::string_view announced = {});

 protected:
  Identity identity_;
  std::vector<Peer> peers_;
  std::chrono::milliseconds timeout_{60000};
};

// Tells the user about a failure; called before the step is ended, since ending it may kill this process.
using FailureReporter = std::function<void(const common::Status& failure)>;
// What a rank adds to the "init" exchange (Peer::announced), once it knows its identity: one exchange then
// carries what would otherwise need a broadcast of its own (exec mode's master address).
using Announcer = std::function<std::string(const Identity& identity)>;

// Chooses the backend (auto: torchrun's environment when RANK, WORLD_SIZE and MASTER_ADDR are all set, as
// torchrun and srunway-launch set them for their programs; else PMIx under srun --mpi=pmix, else Slurm's
// environment, else a single rank), starts it, and runs the "init" exchange, all within `timeout`. When the exchange fails, the
// failure (which names this rank and host) goes to `report` (when given) before the backend ends the step.
common::StatusOr<std::unique_ptr<Bootstrap>> CreateBootstrap(BootstrapKind kind, std::chrono::milliseconds timeout,
                                                             const FailureReporter& report,
                                                             const Announcer& announce = nullptr);

// An IPv4 address of this node: its hostname's, else 127.0.0.1.
std::string LocalAddress();
// A Slurm node's IPv4 address: its name's when that resolves, else its NodeAddr from `scontrol show node`
// (node names need not resolve); NotFound naming the node otherwise.
common::StatusOr<std::string> SlurmNodeAddress(const std::string& node);

// The slurm backend's eight ports for a job step, derived from the ids alone (every rank computes the same ones):
// the root listens on the first free, peers try them in order. All in 20000-32767, below Linux's default
// ephemeral range (32768-60999), where another program's outgoing connection could hold one.
std::vector<uint16_t> SlurmBootstrapPorts(int64_t job, int64_t step);

// Backend constructors, for CreateBootstrap and the tests.
common::StatusOr<std::unique_ptr<Bootstrap>> CreatePmixBootstrap(std::chrono::milliseconds timeout);
common::StatusOr<std::unique_ptr<Bootstrap>> CreateSlurmBootstrap(std::chrono::milliseconds timeout);
common::StatusOr<std::unique_ptr<Bootstrap>> CreateEnvBootstrap(std::chrono::milliseconds timeout);
// One rank, nothing to exchange: for a program started without srun or torchrun.
std::unique_ptr<Bootstrap> CreateSingleBootstrap();

}  // namespace srunway::launcher
