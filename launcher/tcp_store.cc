// A small all-gather exchange over TCP, rooted at rank 0, for steps without PMIx (srun --mpi=none, torchrun).
// Peers prove they belong to the step with a token; every message is bounded and every wait has a deadline.
#include "launcher/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace srunway::launcher {
namespace {

constexpr size_t kHeaderBytes = 4 + 1 + 4 + 4;  // length, type, rank, round
constexpr auto kIdleLimit = std::chrono::seconds(5);  // an unadmitted connection that says nothing is dropped
constexpr int kMaxToken = 4096;
constexpr char kAdmitted[] = "ok";  // the root's answer to an admitted rank's hello

void PutU32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
uint32_t GetU32(std::string_view in, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  return value;
}

int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

// Reads what is there into `pending`; false on EOF or error.
bool ReadSome(int fd, std::string& pending) {
  char buffer[1 << 16];
  ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  pending.append(buffer, static_cast<size_t>(n));
  return true;
}

// Waits for one whole frame on `fd` until the deadline.
common::StatusOr<Frame> ReceiveFrame(int fd, std::string& pending, Deadline deadline, std::string_view what) {
  while (true) {
    SRUNWAY_ASSIGN_OR_RETURN(auto decoded, DecodeFrame(pending));
    if (decoded) {
      pending.erase(0, decoded->second);
      return std::move(decoded->first);
    }
    if (Clock::now() >= deadline) return common::DeadlineExceeded("{}: no answer in time", what);
    pollfd pfd{fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, MillisLeft(deadline));
    if (ready < 0 && errno != EINTR) return common::ErrnoStatus(errno, "poll");
    if (ready > 0 && !ReadSome(fd, pending)) return common::Unavailable("{}: connection closed", what);
  }
}

void Close(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

common::Status SendAll(int fd, std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return common::ErrnoStatus(errno, "send");
    sent += static_cast<size_t>(n);
  }
  return common::Status::Ok();
}

std::string EncodeFrame(const Frame& frame) {
  std::string body;
  if (frame.type == FrameType::kResult) {
    PutU32(body, static_cast<uint32_t>(frame.values.size()));
    for (const std::string& value : frame.values) {
      PutU32(body, static_cast<uint32_t>(value.size()));
      body += value;
    }
  } else {
    body = frame.text;
  }
  std::string out;
  PutU32(out, static_cast<uint32_t>(1 + 4 + 4 + body.size()));
  out.push_back(static_cast<char>(frame.type));
  PutU32(out, frame.rank);
  PutU32(out, frame.round);
  out += body;
  return out;
}

common::StatusOr<std::optional<std::pair<Frame, size_t>>> DecodeFrame(std::string_view buffer) {
  if (buffer.size() < 4) return std::optional<std::pair<Frame, size_t>>();
  uint32_t length = GetU32(buffer, 0);
  if (length > kMaxFrameBytes) return common::InvalidArgument("frame of {} bytes exceeds {}", length, kMaxFrameBytes);
  if (length < kHeaderBytes - 4) return common::InvalidArgument("frame of {} bytes is too short", length);
  if (buffer.size() < 4 + static_cast<size_t>(length)) return std::optional<std::pair<Frame, size_t>>();
  Frame frame;
  uint8_t type = static_cast<uint8_t>(buffer[4]);
  if (type < static_cast<uint8_t>(FrameType::kHello) || type > static_cast<uint8_t>(FrameType::kAbort)) {
    return common::InvalidArgument("unknown frame type {}", type);
  }
  frame.type = static_cast<FrameType>(type);
  frame.rank = GetU32(buffer, 5);
  frame.round = GetU32(buffer, 9);
  std::string_view body = buffer.substr(kHeaderBytes, length - (kHeaderBytes - 4));
  if (frame.type == FrameType::kResult) {
    if (body.size() < 4) return common::InvalidArgument("result frame without a count");
    uint32_t count = GetU32(body, 0);
    size_t at = 4;
    if (count > body.size() / 4) return common::InvalidArgument("result frame claims {} values", count);
    for (uint32_t i = 0; i < count; ++i) {
      if (body.size() - at < 4) return common::InvalidArgument("result frame truncated at value {}", i);
      uint32_t size = GetU32(body, at);
      at += 4;
      if (size > body.size() - at) return common::InvalidArgument("result value {} overruns the frame", i);
      frame.values.emplace_back(body.substr(at, size));
      at += size;
    }
    if (at != body.size()) return common::InvalidArgument("result frame has {} trailing bytes", body.size() - at);
  } else {
    frame.text = body;
    if (frame.type == FrameType::kHello && frame.text.size() > kMaxToken) {
      return common::InvalidArgument("hello with a {}-byte token", frame.text.size());
    }
  }
  return std::optional(std::pair(std::move(frame), 4 + static_cast<size_t>(length)));
}

TcpStoreServer::TcpStoreServer(int listen_fd, uint16_t port, std::string token, int size)
    : listen_fd_(listen_fd), port_(port), token_(std::move(token)), size_(size),
      fds_(static_cast<size_t>(size), -1), pending_(static_cast<size_t>(size)) {}

TcpStoreServer::TcpStoreServer(TcpStoreServer&& other) noexcept
    : listen_fd_(std::exchange(other.listen_fd_, -1)), port_(other.port_), token_(std::move(other.token_)),
      size_(other.size_), round_(other.round_), fds_(std::move(other.fds_)), pending_(std::move(other.pending_)) {
  other.fds_.clear();
}

TcpStoreServer::~TcpStoreServer() {
  Close(listen_fd_);
  for (int& fd : fds_) Close(fd);
}

common::StatusOr<TcpStoreServer> TcpStoreServer::Listen(const std::vector<uint16_t>& ports, std::string token,
                                                        int size) {
  std::string tried;
  for (uint16_t port : ports) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return common::ErrnoStatus(errno, "socket");
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && ::listen(fd, 4096) == 0) {
      socklen_t length = sizeof address;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);  // port 0 asks the kernel for one
      return TcpStoreServer(fd, ntohs(address.sin_port), std::move(token), size);
    }
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", port, std::strerror(errno));
    ::close(fd);
  }
  return common::Unavailable("no free port for the bootstrap exchange: tried {}", tried);
}

common::Status TcpStoreServer::AdmitAll(Deadline deadline, std::string_view phase) {
  struct Candidate {
    int fd;
    std::string pending;
    Clock::time_point since;
    std::string peer;
  };
  std::vector<Candidate> candidates;
  auto admitted = [&] { return std::count_if(fds_.begin() + 1, fds_.end(), [](int fd) { return fd >= 0; }); };
  while (admitted() < size_ - 1) {
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r) {
        if (fds_[static_cast<size_t>(r)] < 0) missing.push_back(r);
      }
      for (auto& c : candidates) Close(c.fd);
      return common::DeadlineExceeded("rank{} {} did not arrive during {}", missing.size() > 1 ? "s" : "",
                                      fmt::join(missing, ","), phase);
    }
    std::vector<pollfd> pfds{{listen_fd_, POLLIN, 0}};
    for (auto& c : candidates) pfds.push_back({c.fd, POLLIN, 0});
    int ready = ::poll(pfds.data(), pfds.size(), MillisLeft(deadline));
    if (ready < 0 && errno != EINTR) return common::ErrnoStatus(errno, "poll");
    if (pfds[0].revents & POLLIN) {
      sockaddr_in peer{};
      socklen_t length = sizeof peer;
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
      if (fd >= 0) {
        char text[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
        candidates.push_back({fd, "", Clock::now(), fmt::format("{}:{}", text, ntohs(peer.sin_port))});
      }
    }
    for (size_t i = 1; i < pfds.size(); ++i) {
      Candidate& c = candidates[i - 1];
      bool alive = !(pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) || ReadSome(c.fd, c.pending);
      auto decoded = DecodeFrame(c.pending);
      std::string refusal;
      if (!alive) {
        refusal = "closed before saying hello";
      } else if (!decoded.ok()) {
        refusal = decoded.status().message();
      } else if (!decoded->has_value()) {
        if (Clock::now() - c.since > kIdleLimit) refusal = "said nothing for 5 s";
      } else {
        const Frame& hello = (*decoded)->first;
        if (hello.type != FrameType::kHello || hello.text != token_) {
          refusal = "wrong token: not a rank of this job step";
        } else if (hello.rank == 0 || hello.rank >= static_cast<uint32_t>(size_)) {
          refusal = fmt::format("rank {} is outside 1..{}", hello.rank, size_ - 1);
        } else if (fds_[hello.rank] >= 0) {
          refusal = fmt::format("rank {} connected twice", hello.rank);
        } else {
          c.pending.erase(0, (*decoded)->second);
          common::Status ack = SendAll(c.fd, EncodeFrame(Frame{FrameType::kHello, 0, 0, kAdmitted, {}}));
          if (ack.ok()) {
            fds_[hello.rank] = c.fd;
            pending_[hello.rank] = std::move(c.pending);
            c.fd = -1;
          } else {
            refusal = "could not be answered";
          }
        }
      }
      if (!refusal.empty() && c.fd >= 0) {
        common::LogWarn("bootstrap: refused connection from {}: {}", c.peer, refusal);
        Close(c.fd);
      }
    }
    std::erase_if(candidates, [](const Candidate& c) { return c.fd < 0; });
  }
  for (auto& c : candidates) Close(c.fd);
  return common::Status::Ok();
}

common::StatusOr<std::vector<std::string>> TcpStoreServer::Round(std::string_view mine, std::string_view phase,
                                                                 Deadline deadline, const RankNamer& name) {
  ++round_;
  std::vector<std::optional<std::string>> values(static_cast<size_t>(size_));
  values[0] = std::string(mine);
  while (true) {
    // Decode what has arrived; a rank that sends garbage is as good as dead.
    for (int r = 1; r < size_; ++r) {
      if (values[static_cast<size_t>(r)]) continue;
      auto decoded = DecodeFrame(pending_[static_cast<size_t>(r)]);
      if (!decoded.ok() || (decoded->has_value() && ((*decoded)->first.type != FrameType::kContribution ||
                                                     (*decoded)->first.round != round_))) {
        return common::MakeStatus(common::StatusCode::kAborted, "{} sent a malformed message during {}", name(r), phase);
      }
      if (decoded->has_value()) {
        values[static_cast<size_t>(r)] = std::move((*decoded)->first.text);
        pending_[static_cast<size_t>(r)].erase(0, (*decoded)->second);
      }
    }
    std::vector<int> missing;
    for (int r = 1; r < size_; ++r) {
      if (!values[static_cast<size_t>(r)]) missing.push_back(r);
    }
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      std::vector<std::string> names;
      for (int r : missing) names.push_back(name(r));
      return common::DeadlineExceeded("{} did not arrive within the deadline during {}", fmt::join(names, ", "), phase);
    }
    std::vector<pollfd> pfds;
    for (int r : missing) pfds.push_back({fds_[static_cast<size_t>(r)], POLLIN, 0});
    pfds.push_back({listen_fd_, POLLIN, 0});
    int ready = ::poll(pfds.data(), pfds.size(), MillisLeft(deadline));
    if (ready < 0 && errno != EINTR) return common::ErrnoStatus(errno, "poll");
    for (size_t i = 0; i < missing.size(); ++i) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int r = missing[i];
      if (!ReadSome(fds_[static_cast<size_t>(r)], pending_[static_cast<size_t>(r)])) {
        Close(fds_[static_cast<size_t>(r)]);
        return common::MakeStatus(common::StatusCode::kAborted, "{} died during {}", name(r), phase);
      }
    }
    if (pfds.back().revents & POLLIN) {  // stray connections after admission are refused at once
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        common::LogWarn("bootstrap: refused a connection during {}: every rank is already admitted", phase);
        ::close(fd);
      }
    }
  }
  std::vector<std::string> result;
  for (auto& value : values) result.push_back(std::move(*value));
  std::string encoded = EncodeFrame(Frame{FrameType::kResult, 0, round_, "", result});
  for (int r = 1; r < size_; ++r) {
    common::Status sent = SendAll(fds_[static_cast<size_t>(r)], encoded);
    if (!sent.ok()) return common::MakeStatus(common::StatusCode::kAborted, "{} died during {}", name(r), phase);
  }
  return result;
}

void TcpStoreServer::AbortAll(std::string_view reason) {
  std::string encoded = EncodeFrame(Frame{FrameType::kAbort, 0, round_, std::string(reason), {}});
  for (int& fd : fds_) {
    if (fd >= 0) (void)SendAll(fd, encoded);
  }
}

TcpStoreClient::TcpStoreClient(TcpStoreClient&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), rank_(other.rank_), round_(other.round_), pending_(std::move(other.pending_)) {}

TcpStoreClient::~TcpStoreClient() { Close(fd_); }

common::StatusOr<TcpStoreClient> TcpStoreClient::Connect(const std::string& host, const std::vector<uint16_t>& ports,
                                                         const std::string& token, int rank, Deadline deadline) {
  std::string last_error = "no attempt";
  // Peers usually start before the root listens; retry often, since every retry is cheap and a long sleep is not.
  auto pause = std::chrono::milliseconds(5);
  while (Clock::now() < deadline) {
    for (uint16_t port : ports) {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      int error = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      if (error != 0) return common::NotFound("cannot resolve the root's address '{}': {}", host, gai_strerror(error));
      int fd = -1;
      for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          last_error = fmt::format("{}:{}: {}", host, port, std::strerror(errno));
          Close(fd);
        }
      }
      ::freeaddrinfo(found);
      if (fd < 0) continue;
      // A port in the ephemeral range with no listener yet on this host can connect to itself (TCP's simultaneous
      // open: the kernel picks that very port as the source): the hello would come back as its own answer.
      if (ConnectedToItself(fd)) {
        last_error = fmt::format("{}:{}: connected to itself (the root was not listening yet)", host, port);
        Close(fd);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      TcpStoreClient client(fd, rank);
      common::Status sent = SendAll(fd, EncodeFrame(Frame{FrameType::kHello, static_cast<uint32_t>(rank), 0, token, {}}));
      auto ack_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(3));
      auto ack = sent.ok() ? ReceiveFrame(fd, client.pending_, ack_deadline, "hello") : common::StatusOr<Frame>(sent);
      if (ack.ok() && ack->type == FrameType::kHello && ack->rank == 0 && ack->text == kAdmitted) return client;
      last_error = fmt::format("{}:{} did not accept rank {} ({})", host, port, rank,
                               ack.ok() ? "unexpected answer" : ack.status().message());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return common::DeadlineExceeded("could not reach the root of the bootstrap exchange: {}", last_error);
}

common::StatusOr<std::vector<std::string>> TcpStoreClient::Round(std::string_view mine, std::string_view phase,
                                                                 Deadline deadline) {
  ++round_;
  SRUNWAY_RETURN_IF_ERROR(
      SendAll(fd_, EncodeFrame(Frame{FrameType::kContribution, static_cast<uint32_t>(rank_), round_, std::string(mine), {}})));
  auto frame = ReceiveFrame(fd_, pending_, deadline, phase);
  if (!frame.ok()) {
    if (frame.status().code() == common::StatusCode::kUnavailable) {
      return common::MakeStatus(common::StatusCode::kAborted, "rank 0 died during {}", phase);
    }
    if (frame.status().code() == common::StatusCode::kDeadlineExceeded) {
      return common::DeadlineExceeded("rank 0 did not answer within the deadline during {}", phase);
    }
    return frame.status();
  }
  if (frame->type == FrameType::kAbort) return common::MakeStatus(common::StatusCode::kAborted, "{}", frame->text);
  if (frame->type != FrameType::kResult || frame->round != round_) {
    return common::MakeStatus(common::StatusCode::kAborted, "rank 0 sent an unexpected message during {}", phase);
  }
  return std::move(frame->values);
}

bool ConnectedToItself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_size = sizeof local, peer_size = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
    return false;
  }
  return local_size == peer_size && std::memcmp(&local, &peer, local_size) == 0;
}

}  // namespace srunway::launcher
