// Tests for logging: level parsing, filtering and the host/rank prefix.
#include "common/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <csignal>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace srunway::common {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SLURMD_NODENAME", "node7", 1);
    setenv("SLURM_PROCID", "3", 1);
    unsetenv("SRUNWAY_LOG");
    InitLogging("srunway-test");
    SetLogLevel(LogLevel::kInfo);
    SetLogSink([this](LogLevel, std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override { SetLogSink({}); }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, PrefixesProgramHostAndRank) {
  LogInfo("loaded {} GPUs", 8);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0], "srunway-test[node7 rank 3] info: loaded 8 GPUs");
}

TEST_F(LogTest, RankUnknownIsLeftOut) {
  SetLogRank(-1);
  LogWarn("no rank yet");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0], "srunway-test[node7] warning: no rank yet");
}

TEST_F(LogTest, LevelFilters) {
  LogDebug("hidden");
  LogError("shown");
  SetLogLevel(LogLevel::kTrace);
  LogTrace("now shown");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_NE(lines_[0].find("error: shown"), std::string::npos);
  EXPECT_NE(lines_[1].find("trace: now shown"), std::string::npos);
}

TEST_F(LogTest, LevelFromEnvironment) {
  setenv("SRUNWAY_LOG", "debug", 1);
  InitLogging("srunway-test");
  EXPECT_EQ(GetLogLevel(), LogLevel::kDebug);
  setenv("SRUNWAY_LOG", "loud", 1);
  InitLogging("srunway-test");  // complains once through the sink and keeps the level it had
  EXPECT_EQ(GetLogLevel(), LogLevel::kDebug);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("SRUNWAY_LOG='loud' is not one of"), std::string::npos);
  unsetenv("SRUNWAY_LOG");
}

// Runs `body` in a child whose stdout is /dev/full and whose stderr is a pipe; returns its exit code and stderr.
std::pair<int, std::string> RunWithFullStdout(const std::function<int()>& body) {
  int err[2];
  EXPECT_EQ(::pipe(err), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int full = ::open("/dev/full", O_WRONLY);
    if (full < 0 || ::dup2(full, STDOUT_FILENO) < 0 || ::dup2(err[1], STDERR_FILENO) < 0) ::_exit(99);
    SetLogSink({});
    std::exit(body());  // exit(), not _exit(): the at-exit check runs
  }
  ::close(err[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(err[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

// Output to a full disk: fmt::print threw past stdio's buffer (the program aborted), and output still in the buffer
// at exit was lost with exit 0.
TEST(Stdout, AFullDiskIsOneErrorLineAndTheGivenExitCode) {
  InitLogging("srunway-test");
  auto [code, err] = RunWithFullStdout([] {
    Print("{}\n", std::string(100'000, 'x'));  // past the buffer: a failed write here, no exception
    return FlushStdout().message() == "cannot write to stdout: No space left on device" ? 0 : 98;
  });
  EXPECT_EQ(code, 0) << err;
  std::tie(code, err) = RunWithFullStdout([] {
    ExitIfStdoutLost(7);
    Print("a short report\n");  // in the buffer until exit
    return 0;
  });
  EXPECT_EQ(code, 7);
  EXPECT_TRUE(err.ends_with("error: cannot write to stdout: No space left on device; the output is incomplete\n"))
      << err;
  std::tie(code, err) = RunWithFullStdout([] {
    ExitIfStdoutLost(7);
    ExitIfStdoutLost(0);  // the program handles its stdout itself from here
    Print("a short report\n");
    return 0;
  });
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(err, "");
}

// An exception that nothing catches (here one escaping a thread) is one error line with the program, host and rank,
// then SIGABRT as before; libstdc++'s "terminate called after throwing an instance of" named neither host nor rank.
TEST(Terminate, AnUncaughtExceptionIsOneLogLineThenAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto uncaught = [](auto thrown) {
    setenv("SLURMD_NODENAME", "node7", 1);
    setenv("SLURM_PROCID", "3", 1);
    InitLogging("srunway-test");
    SetLogSink({});
    std::thread([thrown] { throw thrown; }).join();
  };
  EXPECT_EXIT(uncaught(std::out_of_range("index 9 past 3")), testing::KilledBySignal(SIGABRT),
              "^srunway-test\\[node7 rank 3\\] error: internal error: uncaught std::out_of_range: index 9 past 3\n$");
  EXPECT_EXIT(uncaught(42), testing::KilledBySignal(SIGABRT),
              "^srunway-test\\[node7 rank 3\\] error: internal error: uncaught int \\(not a std::exception\\)\n$");
}

TEST(ParseLogLevel, Names) {
  EXPECT_EQ(*ParseLogLevel("WARN"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
  EXPECT_EQ(LogLevelName(LogLevel::kError), "error");
}

}  // namespace
}  // namespace srunway::common
