// Tests for RunCommand: output, exit codes, stderr on request, and a command that does not exist.
#include "common/subprocess.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace srunway::common
