// Tests for RunCommand (output, exit codes, stderr on request, a command that does not exist) and for signals.h.
#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "common/signals.h"

namespace srunway::common {
namespace {

TEST(RunCommand, OutputAndExitCode) {
  auto result = RunCommand({"printf", "hello %s", "node1"});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(result->output, "hello node1");
  auto failing = RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(failing.ok());
  EXPECT_EQ(failing->exit_code, 3);
  EXPECT_EQ(failing->output, "out\n");
  auto both = RunCommand({"sh", "-c", "echo err >&2"}, true);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->output, "err\n");
}

TEST(RunCommand, MissingCommandIsAnErrorNamingIt) {
  auto result = RunCommand({"srunway-no-such-command"});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("run srunway-no-such-command"), std::string::npos);
  EXPECT_FALSE(RunCommand({}).ok());
}

// A command that outlives its deadline is killed with everything it started, and the error says so; one that
// closes its output and keeps running is held to the deadline as well.
TEST(RunCommand, DeadlineKillsTheCommandAndItsChildren) {
  for (const char* script : {"sleep 60 & sleep 60", "exec >/dev/null; sleep 60"}) {
    auto result = RunCommand({"sh", "-c", script}, false, std::chrono::milliseconds(300));
    ASSERT_FALSE(result.ok()) << script;
    EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded) << script;
    EXPECT_EQ(result.status().message(), "sh did not finish within 0.3 s and was killed");
  }
  auto quick = RunCommand({"sh", "-c", "echo done"}, false, std::chrono::milliseconds(5000));
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  EXPECT_EQ(quick->output, "done\n");
}

// What a shell reads back as the same one word: `sh -c 'printf %s WORD'` prints the word itself.
TEST(ShellQuote, TheShellReadsBackTheSameWord) {
  EXPECT_EQ(ShellQuote("/opt/nccl-tests/build"), "/opt/nccl-tests/build");
  EXPECT_EQ(ShellQuote("--network-profile=a3mega"), "--network-profile=a3mega");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  for (const std::string word : {"a b", "it's", "$HOME", "`id`", "x;rm -rf y", "a\nb", "*", "'", "\\", "~"}) {
    auto printed = RunCommand({"sh", "-c", "printf %s " + ShellQuote(word)});
    ASSERT_TRUE(printed.ok()) << printed.status().message();
    EXPECT_EQ(printed->output, word) << ShellQuote(word);
  }
}

TEST(SignalName, NamesTheSignalOrItsNumber) {
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(SignalName(0), "signal 0");
  EXPECT_EQ(SignalName(1000), "signal 1000");
}

TEST(StopOnSignals, ASignalSetsTheFlagInsteadOfEndingTheProcess) {
  const volatile std::sig_atomic_t* stop = StopOnSignals();
  ASSERT_NE(stop, nullptr);
  ::raise(SIGHUP);
  EXPECT_EQ(*stop, SIGHUP);
  ::signal(SIGHUP, SIG_DFL);
}

}  // namespace
}  // namespace srunway::common
