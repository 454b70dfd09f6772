// Heartbeat watchdog: after the bootstrap, every rank keeps a connection to rank 0 and beats on it. A rank that
// dies (its connection closes) or falls silent is reported to every rank, which can then end the step instead of
// waiting forever in a collective. Works under every bootstrap backend; PMIx alone cannot say which rank died.
#include "launcher/watchdog.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <random>
#include <utility>

#include "common/env.h"
#include "common/parse.h"
#include "launcher/tcp_store.h"

namespace srunway::launcher {
namespace {

constexpr std::string_view kBeat = "beat:";  // followed by the sender's phase
constexpr std::string_view kBye = "bye";

// A failed send means the peer is gone; the reading side notices and reports it.
void SendFrame(int fd, const Frame& frame) { (void)SendAll(fd, EncodeFrame(frame)); }

// What arrived on `fd`: decoded frames, or false when the connection closed or sent garbage.
bool Drain(int fd, std::string& pending, std::vector<Frame>& frames) {
  char buffer[4096];
  ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
  if (n > 0) pending.append(buffer, static_cast<size_t>(n));
  while (true) {
    auto decoded = DecodeFrame(pending);
    if (!decoded.ok()) return false;
    if (!decoded->has_value()) return true;
    pending.erase(0, (*decoded)->second);
    frames.push_back(std::move((*decoded)->first));
  }
}

}  // namespace

common::StatusOr<std::unique_ptr<Watchdog>> Watchdog::Start(Bootstrap& bootstrap, std::chrono::milliseconds silence,
                                                            OnFailure on_failure) {
  std::unique_ptr<Watchdog> watchdog(new Watchdog());
  watchdog->bootstrap_ = &bootstrap;
  watchdog->on_failure_ = std::move(on_failure);
  if (::pipe2(watchdog->wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) return common::ErrnoStatus(errno, "watchdog pipe");
  const Identity& id = bootstrap.identity();
  if (id.size == 1) {
    watchdog->finished_ = true;
    return watchdog;
  }

  std::optional<TcpStoreServer> server;
  std::string mine;
  if (id.rank == 0) {
    std::random_device random;
    std::string token = fmt::format("srunway-watchdog:{:x}{:x}", random(), random());
    SRUNWAY_ASSIGN_OR_RETURN(TcpStoreServer listening, TcpStoreServer::Listen({0}, token, id.size));
    server.emplace(std::move(listening));
    mine = fmt::format("{} {}", server->port(), token);
  }
  SRUNWAY_ASSIGN_OR_RETURN(std::string shared, bootstrap.Broadcast(mine, 0, "watchdog"));
  size_t space = shared.find(' ');
  SRUNWAY_ASSIGN_OR_RETURN(int64_t port, common::ParseInt(shared.substr(0, space), "watchdog port", 1, 65535));
  std::string token = shared.substr(space + 1);
  Deadline deadline = Clock::now() + silence;
  if (id.rank == 0) {
    SRUNWAY_RETURN_IF_ERROR(server->AdmitAll(deadline, "watchdog"));
    watchdog->fds_ = server->ReleaseConnections();
    watchdog->thread_ = std::thread([w = watchdog.get(), silence] {
      w->RunRoot(silence);
      w->MarkFinished();
    });
  } else {
    const std::string& root = bootstrap.peers().at(0).address;
    SRUNWAY_ASSIGN_OR_RETURN(TcpStoreClient client,
                             TcpStoreClient::Connect(root, {static_cast<uint16_t>(port)}, token, id.rank, deadline));
    watchdog->fds_ = {client.ReleaseConnection()};
    watchdog->thread_ = std::thread([w = watchdog.get(), silence] {
      w->RunPeer(silence / 10);
      w->MarkFinished();
    });
  }
  return watchdog;
}

void Watchdog::MarkFinished() {
  {
    std::lock_guard lock(finished_mutex_);
    finished_ = true;
  }
  finished_changed_.notify_all();
}

bool Watchdog::WaitFinished(std::chrono::milliseconds timeout) {
  std::unique_lock lock(finished_mutex_);
  return finished_changed_.wait_for(lock, timeout, [this] { return finished_.load(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (wake_fd_[1] >= 0) (void)::write(wake_fd_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
  for (int fd : wake_fd_) {
    if (fd >= 0) ::close(fd);
  }
}

void Watchdog::SetPhase(std::string phase) {
  {
    std::lock_guard lock(phase_mutex_);
    phase_ = std::move(phase);
  }
  // A beat now, so rank 0 knows the new phase even if this rank dies in it soon.
  if (wake_fd_[1] >= 0) (void)::write(wake_fd_[1], "p", 1);
}

std::string Watchdog::Phase() {
  std::lock_guard lock(phase_mutex_);
  return phase_;
}

void Watchdog::Abort(const std::string& why) {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(phase_mutex_);
      announce_ = why;
    }
    (void)::write(wake_fd_[1], "a", 1);
    const auto give_up = Clock::now() + std::chrono::seconds(1);
    while (!announced_ && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// What Abort() asked this rank to tell the others, once.
std::string Watchdog::TakeAnnouncement() {
  std::lock_guard lock(phase_mutex_);
  return std::exchange(announce_, std::string());
}

Watchdog::CommGuard Watchdog::Guard(Comm& comm) {
  std::lock_guard lock(guard_mutex_);
  guarded_ = &comm;
  return CommGuard(this);
}

Watchdog::CommGuard::~CommGuard() {
  if (watchdog_ == nullptr) return;
  std::lock_guard lock(watchdog_->guard_mutex_);
  watchdog_->guarded_ = nullptr;
}

void Watchdog::Fail(const std::string& why) {
  if (failed_.exchange(true)) return;
  {
    std::lock_guard lock(guard_mutex_);
    if (guarded_ != nullptr) guarded_->Abort();
  }
  on_failure_(why);
}

void Watchdog::RunRoot(std::chrono::milliseconds silence) {
  const int size = bootstrap_->identity().size;
  std::vector<std::string> pending(static_cast<size_t>(size));
  std::vector<Clock::time_point> last_heard(static_cast<size_t>(size), Clock::now());
  std::vector<bool> done(static_cast<size_t>(size), false);
  std::vector<std::string> phases(static_cast<size_t>(size), "startup");
  done[0] = true;
  auto tell_everyone = [&](const Frame& frame) {
    for (int r = 1; r < size; ++r) {
      if (!done[static_cast<size_t>(r)]) SendFrame(fds_[static_cast<size_t>(r)], frame);
    }
  };
  while (!stop_) {
    std::vector<pollfd> pfds{{wake_fd_[0], POLLIN, 0}};
    char drained[64];
    while (::read(wake_fd_[0], drained, sizeof drained) > 0) {  // rank 0's own phase changes need no beat
    }
    std::vector<int> ranks;
    for (int r = 1; r < size; ++r) {
      if (done[static_cast<size_t>(r)]) continue;
      pfds.push_back({fds_[static_cast<size_t>(r)], POLLIN, 0});
      ranks.push_back(r);
    }
    if (ranks.empty()) return;
    ::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(silence.count() / 10, 10)));
    if (std::string why = TakeAnnouncement(); !why.empty()) {
      tell_everyone(Frame{FrameType::kAbort, 0, 0, why, {}});
      announced_ = true;
      return;
    }
    if (stop_) break;
    for (size_t i = 0; i < ranks.size(); ++i) {
      int r = ranks[i];
      std::vector<Frame> frames;
      bool alive = !(pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) ||
                   Drain(fds_[static_cast<size_t>(r)], pending[static_cast<size_t>(r)], frames);
      std::string why;
      for (const Frame& frame : frames) {
        last_heard[static_cast<size_t>(r)] = Clock::now();
        if (frame.type == FrameType::kAbort) why = frame.text;  // rank r failed and says why
        if (frame.text == kBye) done[static_cast<size_t>(r)] = true;
        if (frame.text.starts_with(kBeat)) phases[static_cast<size_t>(r)] = frame.text.substr(kBeat.size());
      }
      if (done[static_cast<size_t>(r)]) continue;
      // A rank that failed says why (and exits by itself); one that did not may have died or fallen silent.
      if (why.empty() && !alive) {
        why = fmt::format("{} died during {}", bootstrap_->NameRank(r), phases[static_cast<size_t>(r)]);
      } else if (why.empty() && Clock::now() - last_heard[static_cast<size_t>(r)] > silence) {
        why = fmt::format("{} stopped answering for {} s during {}", bootstrap_->NameRank(r),
                          silence.count() / 1000.0, phases[static_cast<size_t>(r)]);
      }
      if (!why.empty()) {
        done[static_cast<size_t>(r)] = true;
        tell_everyone(Frame{FrameType::kAbort, 0, 0, why, {}});
        Fail(why);
        return;
      }
    }
  }
  tell_everyone(Frame{FrameType::kContribution, 0, 0, std::string(kBye), {}});
}

void Watchdog::RunPeer(std::chrono::milliseconds interval) {
  const int fd = fds_.at(0);
  const uint32_t rank = static_cast<uint32_t>(bootstrap_->identity().rank);
  std::string pending;
  while (!stop_) {
    SendFrame(fd, Frame{FrameType::kContribution, rank, 0, std::string(kBeat) + Phase(), {}});
    pollfd pfds[2] = {{wake_fd_[0], POLLIN, 0}, {fd, POLLIN, 0}};
    ::poll(pfds, 2, static_cast<int>(std::max<int64_t>(interval.count(), 10)));
    if (std::string why = TakeAnnouncement(); !why.empty()) {
      SendFrame(fd, Frame{FrameType::kAbort, rank, 0, why, {}});
      announced_ = true;
      return;
    }
    if (stop_) break;
    if (pfds[0].revents & POLLIN) {  // a new phase: drain the wake-ups and beat at once
      char drained[64];
      while (::read(wake_fd_[0], drained, sizeof drained) > 0) {
      }
    }
    if (!(pfds[1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::vector<Frame> frames;
    bool alive = Drain(fd, pending, frames);
    for (const Frame& frame : frames) {
      if (frame.type == FrameType::kAbort) return Fail(frame.text);
      if (frame.text == kBye) return;  // rank 0 finished cleanly
    }
    if (!alive) return Fail(fmt::format("{} died during {}", bootstrap_->NameRank(0), Phase()));
  }
  SendFrame(fd, Frame{FrameType::kContribution, rank, 0, std::string(kBye), {}});
}

void MaybeInjectFault(int rank, std::string_view phase) {
  auto stalled = common::GetEnvInt("SRUNWAY_FAULT_STALL_RANK");
  if (stalled.ok() && *stalled == rank && common::GetEnvOr("SRUNWAY_FAULT_STALL_PHASE", "") == phase) {
    std::this_thread::sleep_for(std::chrono::hours(1));  // alive (the watchdog still beats) but never arrives
  }
  auto who = common::GetEnvInt("SRUNWAY_FAULT_KILL_RANK");
  if (!who.ok() || *who != rank) return;
  if (common::GetEnvOr("SRUNWAY_FAULT_KILL_PHASE", "") != phase) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // lets the watchdog's beat carry the new phase
  ::raise(SIGKILL);
}

}  // namespace srunway::launcher
