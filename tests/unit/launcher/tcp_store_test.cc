// Tests for the TCP exchange: frames, a real root and clients on loopback, refusals and dead peers.
#include "launcher/tcp_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "common/env.h"
#include "launcher/bootstrap.h"
#include "launcher/cpu_share.h"
#include "launcher/launch.h"
#include "tests/unit/temp_dir.h"

namespace srunway::launcher {
namespace {

using namespace std::chrono_literals;

std::string Name(int rank) { return fmt::format("rank {}", rank); }

TEST(Frame, RoundTrips) {
  Frame result{FrameType::kResult, 0, 7, "", {"a", "", std::string(1000, 'x')}};
  std::string bytes = EncodeFrame(result) + EncodeFrame(Frame{FrameType::kAbort, 0, 7, "rank 3 died", {}});
  auto first = DecodeFrame(bytes);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->first.round, 7u);
  EXPECT_EQ((*first)->first.values, result.values);
  auto second = DecodeFrame(std::string_view(bytes).substr((*first)->second));
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->first.type, FrameType::kAbort);
  EXPECT_EQ((*second)->first.text, "rank 3 died");
}

TEST(Frame, PartialInputWaitsForMore) {
  std::string bytes = EncodeFrame(Frame{FrameType::kContribution, 2, 1, "payload", {}});
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    auto decoded = DecodeFrame(std::string_view(bytes).substr(0, cut));
    ASSERT_TRUE(decoded.ok()) << cut;
    EXPECT_FALSE(decoded->has_value()) << cut;
  }
}

TEST(Frame, MalformedIsAnError) {
  std::string huge("\xff\xff\xff\x7f", 4);
  EXPECT_FALSE(DecodeFrame(huge).ok());
  std::string bad_type = EncodeFrame(Frame{FrameType::kHello, 1, 0, "t", {}});
  bad_type[4] = 9;
  EXPECT_FALSE(DecodeFrame(bad_type).ok());
  Frame result{FrameType::kResult, 0, 1, "", {"abc"}};
  std::string overrun = EncodeFrame(result);
  overrun[4 + 1 + 8 + 4] = 100;  // first value's length now runs past the frame
  EXPECT_FALSE(DecodeFrame(overrun).ok());
  std::string too_short("\x02\x00\x00\x00\x01\x00", 6);
  EXPECT_FALSE(DecodeFrame(too_short).ok());
}

struct Ranks {
  std::vector<common::StatusOr<std::vector<std::string>>> results;
};

// Rank 0 serves, the others connect; each contributes "v<rank>" in one round.
Ranks RunRound(int size, const std::function<bool(int)>& skip = [](int) { return false; }) {
  auto server = TcpStoreServer::Listen({0}, "token", size);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  uint16_t port = server->port();
  Ranks ranks;
  ranks.results.resize(static_cast<size_t>(size), common::Internal("not run"));
  std::vector<std::thread> threads;
  for (int r = 1; r < size; ++r) {
    threads.emplace_back([&, r] {
      if (skip(r)) return;
      auto client = TcpStoreClient::Connect("127.0.0.1", {port}, "token", r, Clock::now() + 5s);
      if (!client.ok()) {
        ranks.results[static_cast<size_t>(r)] = client.status();
        return;
      }
      ranks.results[static_cast<size_t>(r)] = client->Round("v" + std::to_string(r), "test", Clock::now() + 5s);
    });
  }
  common::Status admitted = server->AdmitAll(Clock::now() + 2s, "init");
  if (admitted.ok()) {
    ranks.results[0] = server->Round("v0", "test", Clock::now() + 5s, Name);
  } else {
    server->AbortAll(admitted.message());
    ranks.results[0] = admitted;
  }
  for (auto& thread : threads) thread.join();
  return ranks;
}

TEST(TcpStore, AllGatherAcrossFourRanks) {
  Ranks ranks = RunRound(4);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(ranks.results[r].ok()) << r << ": " << ranks.results[r].status().ToString();
    EXPECT_EQ(*ranks.results[r], (std::vector<std::string>{"v0", "v1", "v2", "v3"}));
  }
}

TEST(TcpStore, MissingRankIsNamedAndOthersAreTold) {
  Ranks ranks = RunRound(4, [](int r) { return r == 2; });
  ASSERT_FALSE(ranks.results[0].ok());
  EXPECT_EQ(ranks.results[0].status().message(), "rank 2 did not arrive during init");
  // The connected ranks get the root's reason instead of waiting for their own deadline.
  for (int r : {1, 3}) {
    ASSERT_FALSE(ranks.results[r].ok());
    EXPECT_EQ(ranks.results[r].status().message(), "rank 2 did not arrive during init") << r;
  }
}

TEST(TcpStore, WrongTokenIsRefused) {
  auto server = TcpStoreServer::Listen({0}, "right", 2);
  ASSERT_TRUE(server.ok());
  uint16_t port = server->port();
  common::Status stray_result;
  std::thread stray([&] {
    auto client = TcpStoreClient::Connect("127.0.0.1", {port}, "wrong", 1, Clock::now() + 1500ms);
    stray_result = client.status();
  });
  common::Status admitted = server->AdmitAll(Clock::now() + 1s, "init");
  stray.join();
  EXPECT_EQ(admitted.message(), "rank 1 did not arrive during init");
  EXPECT_EQ(stray_result.code(), common::StatusCode::kDeadlineExceeded);
}

// A new TCP socket bound to a free loopback port; `address` gets that address and port.
int BoundToLoopback(sockaddr_in& address) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0) << std::strerror(errno);
  return fd;
}

// A rank that connects before the root listens, to a port of the ephemeral range on its own host, can connect to
// itself (TCP's simultaneous open); its hello then came back as the root's answer, and its first round failed
// with "rank 0 sent an unexpected message" while the root waited for it (seen on the local cluster).
TEST(TcpStore, ASocketConnectedToItselfIsRecognised) {
  sockaddr_in address;
  int fd = BoundToLoopback(address);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  EXPECT_TRUE(ConnectedToItself(fd));
  ::close(fd);

  auto server = TcpStoreServer::Listen({0}, "token", 2);
  ASSERT_TRUE(server.ok());
  int client = ::socket(AF_INET, SOCK_STREAM, 0);
  address.sin_port = htons(server->port());
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_FALSE(ConnectedToItself(client));
  ::close(client);
}

// Only the root's own answer admits a rank: a peer that sends the hello back (as a connection to itself does) does
// not.
TEST(TcpStore, AnEchoedHelloIsNotAnAnswer) {
  sockaddr_in address;
  int listener = BoundToLoopback(address);
  ASSERT_EQ(::listen(listener, 8), 0);
  std::thread echo([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    char bytes[4096];
    for (ssize_t n; fd >= 0 && (n = ::read(fd, bytes, sizeof bytes)) > 0;) {
      if (::write(fd, bytes, static_cast<size_t>(n)) != n) break;
    }
    if (fd >= 0) ::close(fd);
  });
  common::Status connected;
  {  // the client's connection closes here (if it was taken), so the echo ends
    auto client = TcpStoreClient::Connect("127.0.0.1", {ntohs(address.sin_port)}, "token", 1, Clock::now() + 1500ms);
    connected = client.status();
  }
  ::shutdown(listener, SHUT_RDWR);
  ::close(listener);
  echo.join();
  EXPECT_EQ(connected.code(), common::StatusCode::kDeadlineExceeded) << connected.ToString();
}

TEST(TcpStore, ARankThatDiesMidRoundIsNamed) {
  auto server = TcpStoreServer::Listen({0}, "token", 2);
  ASSERT_TRUE(server.ok());
  uint16_t port = server->port();
  std::thread client_thread([&] {
    auto client = TcpStoreClient::Connect("127.0.0.1", {port}, "token", 1, Clock::now() + 5s);
    ASSERT_TRUE(client.ok());
    // Leaves without contributing: the destructor closes the connection.
  });
  ASSERT_TRUE(server->AdmitAll(Clock::now() + 5s, "init").ok());
  client_thread.join();
  auto result = server->Round("v0", "fence", Clock::now() + 5s, [](int r) { return fmt::format("rank {} on node2", r); });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), common::StatusCode::kAborted);
  EXPECT_EQ(result.status().message(), "rank 1 on node2 died during fence");
}

TEST(Launch, TorchrunEnvironment) {
  Identity id{5, 16, 1, 8, 0, 2, "node1"};
  auto env = TorchrunEnv(id, "10.0.0.1", 12345);
  std::map<std::string, std::string> map(env.begin(), env.end());
  EXPECT_EQ(map["RANK"], "5");
  EXPECT_EQ(map["WORLD_SIZE"], "16");
  EXPECT_EQ(map["LOCAL_RANK"], "1");
  EXPECT_EQ(map["LOCAL_WORLD_SIZE"], "8");
  EXPECT_EQ(map["GROUP_RANK"], "0");
  EXPECT_EQ(map["NODE_RANK"], "0");
  EXPECT_EQ(map["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(map["ROLE_NAME"], "default");
  EXPECT_EQ(map["ROLE_RANK"], "5");
  EXPECT_EQ(map["ROLE_WORLD_SIZE"], "16");
  EXPECT_EQ(map["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(map["MASTER_PORT"], "12345");
}

TEST(Launch, ExecEnvironmentComesFromRankZerosAnnouncement) {
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "23456", 1);
  auto bootstrap = CreateSingleBootstrap();
  std::string announced = AnnounceMaster(bootstrap->identity());
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(announced, R"({"master_addr":"10.1.2.3","master_port":23456,"cpus":")" + AffinityMaskText() + R"("})");
  ASSERT_TRUE(bootstrap->ExchangePeers(announced).ok());
  ASSERT_EQ(bootstrap->peers().size(), 1u);
  EXPECT_EQ(bootstrap->peers()[0].host, bootstrap->identity().host);
  auto env = ExecEnvironment(*bootstrap);
  ASSERT_TRUE(env.ok()) << env.status().message();
  std::map<std::string, std::string> map(env->begin(), env->end());
  EXPECT_EQ(map["MASTER_ADDR"], "10.1.2.3");
  EXPECT_EQ(map["MASTER_PORT"], "23456");

  // Without MASTER_PORT, rank 0 picks a free one; other ranks announce only their CPUs.
  std::string picked = AnnounceMaster(bootstrap->identity());
  EXPECT_TRUE(picked.find("\"master_port\":1") != std::string::npos) << picked;
  Identity other = bootstrap->identity();
  other.rank = 1;
  EXPECT_EQ(AnnounceMaster(other), R"({"cpus":")" + AffinityMaskText() + R"("})");
}

// Ranks that Slurm did not pin each see every CPU of their node; a thread per CPU in each oversubscribed it.
TEST(Launch, ARankSharesItsCpusWithTheRanksOfItsNodeThatMayRunOnThem) {
  auto share = [](int rank, std::vector<std::string> hosts, std::vector<std::string> masks) {
    auto got = ShareOf(rank, hosts, masks);
    return got.ok() ? fmt::format("{}/{}={}", got->cpus, got->ranks, got->threads()) : got.status().message();
  };
  // Four unpinned ranks on one 8-CPU node, one on another: 2 threads each there, 8 for the one alone.
  const std::vector<std::string> hosts{"a", "a", "a", "a", "b"}, unpinned{"ff", "ff", "ff", "ff", "ff"};
  EXPECT_EQ(share(0, hosts, unpinned), "8/4=2");
  EXPECT_EQ(share(4, hosts, unpinned), "8/1=8");
  // Pinned ranks (CPUs 0-1, 2-3, 4-5, 6-7) keep their own; one that overlaps two others shares with them.
  EXPECT_EQ(share(1, hosts, {"03", "0c", "30", "c0", "ff"}), "2/1=2");
  EXPECT_EQ(share(1, hosts, {"03", "06", "0c", "c0", "ff"}), "2/3=1");
  // Trailing zero bytes are optional; CPUs past the first byte count (CPUs 8-15).
  EXPECT_EQ(share(0, {"a", "a"}, {"00ff", "00ff000000"}), "8/2=4");
  // A peer's mask that does not parse counts as apart; this rank's own must parse.
  EXPECT_EQ(share(0, {"a", "a", "a"}, {"ff", "zz", "f"}), "8/1=8");
  EXPECT_EQ(share(0, {"a"}, {"xyz"}), "rank 0's CPU mask does not parse");
  EXPECT_EQ(share(0, {"a"}, {"00"}), "rank 0's CPU mask does not parse");
  EXPECT_EQ(share(2, {"a"}, {"ff"}), "rank 2 of 1 masks and 1 hosts");
  // This process's own mask reads back as its CPU count.
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(share(0, {"a"}, {AffinityMaskText()}), fmt::format("{0}/1={0}", CPU_COUNT(&set)));
}

// A program gets OMP_NUM_THREADS where it has none: --cpus-per-task, else its share where ranks share CPUs.
TEST(Launch, TheProgramsThreadsComeFromCpusPerTaskOrTheShare) {
  ::unsetenv("OMP_NUM_THREADS");
  ::unsetenv("SLURM_CPUS_PER_TASK");
  auto bootstrap = CreateSingleBootstrap();
  ASSERT_TRUE(bootstrap->ExchangePeers(AnnounceMaster(bootstrap->identity())).ok());
  EXPECT_EQ(ThreadsForProgram(*bootstrap), std::nullopt);  // one rank: its CPUs are its own
  ::setenv("SLURM_CPUS_PER_TASK", "6", 1);
  EXPECT_EQ(ThreadsForProgram(*bootstrap), "6");
  ::setenv("OMP_NUM_THREADS", "", 1);  // as OpenMP reads it: none
  EXPECT_EQ(ThreadsForProgram(*bootstrap), "6");
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(ThreadsForProgram(*bootstrap), std::nullopt);  // the user's stands
  ::unsetenv("OMP_NUM_THREADS");
  ::setenv("SLURM_CPUS_PER_TASK", "six", 1);  // not a count: passed on as it was, now left out
  EXPECT_EQ(ThreadsForProgram(*bootstrap), std::nullopt);
  ::unsetenv("OMP_NUM_THREADS");
  ::unsetenv("SLURM_CPUS_PER_TASK");
}

TEST(Launch, RankZerosFailureReachesEveryRank) {
  auto bootstrap = CreateSingleBootstrap();
  ASSERT_TRUE(bootstrap->ExchangePeers(R"({"error":"no free MASTER_PORT in 10000-10063 on this host"})").ok());
  auto env = ExecEnvironment(*bootstrap);
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().message(),
            "rank 0 on " + bootstrap->identity().host + ": no free MASTER_PORT in 10000-10063 on this host");
  // Whatever a peer announces is parsed, never trusted: malformed announcements are errors, not exceptions.
  for (const char* announced : {"no-space-here", "{}", R"({"master_addr":"a","master_port":70000})",
                                R"({"master_addr":1,"master_port":1})", R"({"master_addr":"a","master_port":1e30})"}) {
    ASSERT_TRUE(bootstrap->ExchangePeers(announced).ok());
    EXPECT_FALSE(ExecEnvironment(*bootstrap).ok()) << announced;
  }
}

// A rank whose own wait ended because another rank died passes that word on as it came: the survivors all name
// the dead rank, whichever of the watchdog's word and this rank's reaches them first (CI once saw rank 2 say
// "rank 0 on node1 failed: rank 3 on node2 died during id broadcast" where ranks 0 and 1 said the plain line).
TEST(Launch, AFailureAnotherRankCausedIsPassedOnAsItCame) {
  EXPECT_EQ(FailureForPeers("rank 0 on node1", common::Aborted("rank 3 on node2 died during id broadcast")),
            "rank 3 on node2 died during id broadcast");
  EXPECT_EQ(FailureForPeers("rank 0 on node1", common::Unavailable("communicator init: no GPU")),
            "rank 0 on node1 failed: communicator init: no GPU");
  EXPECT_EQ(FailureForPeers("rank 1 on node1", common::DeadlineExceeded("first collective: past 5 s")),
            "rank 1 on node1 failed: first collective: past 5 s");
}

// Below the ephemeral range (32768-60999 by default), where they used to be too (20000-59999): a rank's or any
// program's outgoing connection could hold the root's port there. Apart from MASTER_PORT's 10000-19999.
TEST(Launch, SlurmBootstrapPortsAreEightBelowTheEphemeralRange) {
  std::set<uint16_t> bases;
  for (int64_t job : {int64_t{0}, int64_t{1}, int64_t{4242}, int64_t{999'999}, INT64_MAX}) {
    for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{0xfffffffe}, INT64_MAX}) {
      const std::vector<uint16_t> ports = SlurmBootstrapPorts(job, step);
      ASSERT_EQ(ports.size(), 8u);
      for (size_t i = 0; i < ports.size(); ++i) {
        EXPECT_GE(ports[i], 20000) << job << "." << step;
        EXPECT_LT(ports[i], 32768) << job << "." << step;
        EXPECT_EQ(ports[i], ports[0] + i);
      }
      EXPECT_EQ(SlurmBootstrapPorts(job, step), ports);  // every rank derives the same
      bases.insert(ports[0]);
    }
  }
  for (int64_t job = 0; job < 2000; ++job) {
    for (uint16_t port : SlurmBootstrapPorts(job, 0)) EXPECT_LT(port, 32768) << job;
    bases.insert(SlurmBootstrapPorts(job, 0)[0]);
  }
  EXPECT_GT(bases.size(), 1200u);  // consecutive jobs spread over the range
}

TEST(Launch, MasterPortIsFreeAndInItsRange) {
  auto port = PickMasterPort(4242, 1);
  ASSERT_TRUE(port.ok());
  EXPECT_GE(*port, 10000);
  EXPECT_LT(*port, 20000);
  EXPECT_FALSE(ParseBootstrapKind("mpi").ok());
  EXPECT_EQ(*ParseBootstrapKind("pmix"), BootstrapKind::kPmix);
}

// An `scontrol` first on PATH that prints `output` and exits with `code`, for the test's lifetime.
class FakeScontrol {
 public:
  FakeScontrol(const std::string& output, int code) : dir_("fake-scontrol"), path_(common::GetEnvOr("PATH", "")) {
    std::ofstream script(dir_.path() / "scontrol");
    script << "#!/bin/sh\nprintf '%s\\n' '" << output << "'\nexit " << code << "\n";
    script.close();
    std::filesystem::permissions(dir_.path() / "scontrol", std::filesystem::perms::owner_all);
    ::setenv("PATH", (dir_.path().string() + ":" + path_).c_str(), 1);
  }
  ~FakeScontrol() { ::setenv("PATH", path_.c_str(), 1); }

 private:
  srunway::testing::TempDir dir_;
  std::string path_;
};

TEST(SlurmNodeAddress, AResolvableNameNeedsNoScontrol) {
  FakeScontrol broken("", 1);
  auto address = SlurmNodeAddress("localhost");
  ASSERT_TRUE(address.ok()) << address.status().message();
  EXPECT_EQ(*address, "127.0.0.1");
}

TEST(SlurmNodeAddress, AnUnresolvableNameTakesScontrolsNodeAddr) {
  // As `scontrol show node NAME -o` prints it (Slurm 22.05, shortened).
  FakeScontrol scontrol("NodeName=gpu7.invalid Arch=x86_64 CoresPerSocket=4 NodeAddr=127.0.0.1 NodeHostName=h "
                        "Version=22.05.8", 0);
  auto address = SlurmNodeAddress("gpu7.invalid");
  ASSERT_TRUE(address.ok()) << address.status().message();
  EXPECT_EQ(*address, "127.0.0.1");
}

TEST(SlurmNodeAddress, EachWayOfNotFindingItIsNamed) {
  {
    FakeScontrol scontrol("slurm_load_node error: Invalid node name specified", 1);
    EXPECT_EQ(SlurmNodeAddress("gpu7.invalid").status().message(),
              "node gpu7.invalid does not resolve and scontrol could not tell its NodeAddr");
  }
  {
    FakeScontrol scontrol("NodeName=gpu7.invalid Arch=x86_64", 0);
    EXPECT_EQ(SlurmNodeAddress("gpu7.invalid").status().message(), "scontrol shows no NodeAddr for node gpu7.invalid");
  }
  {
    FakeScontrol scontrol("NodeName=gpu7.invalid NodeAddr=gpu7-ib.invalid NodeHostName=gpu7", 0);
    EXPECT_EQ(SlurmNodeAddress("gpu7.invalid").status().message(),
              "node gpu7.invalid has NodeAddr gpu7-ib.invalid, which does not resolve");
  }
}

}  // namespace
}  // namespace srunway::launcher
