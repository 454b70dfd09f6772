// Tests for logging: level parsing, filtering and the host/rank prefix.
#include "common/log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
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

TEST(ParseLogLevel, Names) {
  EXPECT_EQ(*ParseLogLevel("WARN"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
  EXPECT_EQ(LogLevelName(LogLevel::kError), "error");
}

}  // namespace
}  // namespace srunway::common
