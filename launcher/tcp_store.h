// A small all-gather exchange over TCP, rooted at rank 0, for steps without PMIx (srun --mpi=none, torchrun).
// Peers prove they belong to the step with a token; every message is bounded and every wait has a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace srunway::launcher {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

enum class FrameType : uint8_t { kHello = 1, kContribution = 2, kResult = 3, kAbort = 4 };

struct Frame {
  FrameType type = FrameType::kHello;
  uint32_t rank = 0;    // hello, contribution: the sender
  uint32_t round = 0;   // contribution, result
  std::string text;     // hello: token; contribution: payload; abort: reason
  std::vector<std::string> values;  // result: one value per rank
};

// Whether a connected socket's two ends are the same address and port (a connection to itself).
bool ConnectedToItself(int fd);

std::string EncodeFrame(const Frame& frame);
// Sends all of `bytes` on a socket (no SIGPIPE if the peer is gone).
common::Status SendAll(int fd, std::string_view bytes);
// Decodes one frame from the front of `buffer`: the frame and the bytes it used, nullopt when more bytes are
// needed, or InvalidArgument for anything malformed (unknown type, oversized, inconsistent lengths).
common::StatusOr<std::optional<std::pair<Frame, size_t>>> DecodeFrame(std::string_view buffer);

// Names a rank in messages: "rank 5" before hosts are known, "rank 5 on node2" after.
using RankNamer = std::function<std::string(int rank)>;

// The root's side: listens, admits the step's ranks, and runs rounds. Not thread-safe.
class TcpStoreServer {
 public:
  // Binds the first free port of `ports` on all addresses (0: any free port; see port()).
  static common::StatusOr<TcpStoreServer> Listen(const std::vector<uint16_t>& ports, std::string token, int size);
  TcpStoreServer(TcpStoreServer&& other) noexcept;
  TcpStoreServer& operator=(TcpStoreServer&&) = delete;
  ~TcpStoreServer();

  uint16_t port() const { return port_; }
  // Accepts ranks 1..size-1 until all have said hello or the deadline passes (the error names who is missing).
  common::Status AdmitAll(Deadline deadline, std::string_view phase);
  // One all-gather round: the root's value plus every client's, in rank order, sent back to every client.
  common::StatusOr<std::vector<std::string>> Round(std::string_view mine, std::string_view phase, Deadline deadline,
                                                   const RankNamer& name);
  // Tells every client why the step ends.
  void AbortAll(std::string_view reason);
  // Hands over the admitted connections (index = rank; index 0 is -1), for the watchdog.
  std::vector<int> ReleaseConnections() { return std::exchange(fds_, std::vector<int>(fds_.size(), -1)); }

 private:
  TcpStoreServer(int listen_fd, uint16_t port, std::string token, int size);
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::string token_;
  int size_ = 0;
  uint32_t round_ = 0;
  std::vector<int> fds_;  // by rank; -1 until admitted
  std::vector<std::string> pending_;  // bytes read but not yet decoded, by fd index
};

class TcpStoreClient {
 public:
  // Connects to host:port (trying each port in turn) and says hello; retries refused connections until the
  // deadline, since the root may start later than its peers.
  static common::StatusOr<TcpStoreClient> Connect(const std::string& host, const std::vector<uint16_t>& ports,
                                                  const std::string& token, int rank, Deadline deadline);
  TcpStoreClient(TcpStoreClient&& other) noexcept;
  TcpStoreClient& operator=(TcpStoreClient&&) = delete;
  ~TcpStoreClient();

  common::StatusOr<std::vector<std::string>> Round(std::string_view mine, std::string_view phase, Deadline deadline);
  // Hands over the connection, for the watchdog.
  int ReleaseConnection() { return std::exchange(fd_, -1); }

 private:
  TcpStoreClient(int fd, int rank) : fd_(fd), rank_(rank) {}
  int fd_ = -1;
  int rank_ = 0;
  uint32_t round_ = 0;
  std::string pending_;
};

}  // namespace srunway::launcher
