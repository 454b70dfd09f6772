// Tests for the strict parsers and the environment helpers.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "common/env.h"
#include "common/parse.h"

namespace srunway::common {
namespace {

// Timeouts from options (--timeout, --hang-timeout, --run-timeout, --wait-limit, --distributed-timeout-minutes):
// 1e308 s cast to int64 milliseconds was undefined behaviour; 1e-9 s became 0, which some read as "none".
TEST(TimeoutMillis, RoundsUpAndSaturates) {
  using std::chrono::milliseconds;
  EXPECT_EQ(TimeoutMillis(60), milliseconds(60'000));
  EXPECT_EQ(TimeoutMillis(0.0015), milliseconds(2));
  EXPECT_EQ(TimeoutMillis(1e-9), milliseconds(1));
  EXPECT_EQ(TimeoutMillis(1e308), milliseconds(1'000'000'000'000));
  EXPECT_EQ(TimeoutMillis(std::numeric_limits<double>::infinity()), milliseconds(1'000'000'000'000));
  EXPECT_EQ(TimeoutMillis(0), milliseconds(0));
  EXPECT_EQ(TimeoutMillis(-5), milliseconds(0));
  EXPECT_EQ(TimeoutMillis(std::nan("")), milliseconds(0));
  // The largest adds to a steady clock without overflowing it.
  const auto later = std::chrono::steady_clock::now() + TimeoutMillis(1e308);
  EXPECT_GT(later, std::chrono::steady_clock::now());
}

TEST(ParseDouble, WholeFiniteNumbersInRange) {
  EXPECT_DOUBLE_EQ(*ParseDouble("1.5", "x"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseDouble("-2", "x"), -2);
  EXPECT_DOUBLE_EQ(*ParseDouble("3e9", "x"), 3e9);
  EXPECT_EQ(ParseDouble("abc", "NCCL_TESTS_MIN_BW").status().message(), "NCCL_TESTS_MIN_BW='abc' is not a number");
  EXPECT_FALSE(ParseDouble("1.5x", "x").ok());
  EXPECT_FALSE(ParseDouble("", "x").ok());
  EXPECT_FALSE(ParseDouble("inf", "x").ok());
  EXPECT_FALSE(ParseDouble("nan", "x").ok());
  EXPECT_EQ(ParseDouble("-1", "bw", 0).status().message(), "bw=-1 is out of range [0, 1e+308]");
}

TEST(ParseInt, AcceptsWholeIntegersInRange) {
  EXPECT_EQ(*ParseInt("42", "x"), 42);
  EXPECT_EQ(*ParseInt("-7", "x"), -7);
  EXPECT_EQ(*ParseInt("8", "x", 0, 8), 8);
}

TEST(ParseInt, RejectsJunkAndNamesTheValue) {
  for (const char* text : {"", "4x", "x4", " 4", "4 ", "+4", "0x10", "1e3"}) {
    auto result = ParseInt(text, "SLURM_PROCID");
    ASSERT_FALSE(result.ok()) << text;
    EXPECT_EQ(result.status().message(), fmt::format("SLURM_PROCID='{}' is not an integer", text));
  }
  auto big = ParseInt("99999999999999999999", "n");
  EXPECT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("out of range"), std::string::npos);
  EXPECT_FALSE(ParseInt("9", "gpus", 0, 8).ok());
}

// A pointer file or a variable holding a newline or a megabyte of digits made an error of as many lines or bytes
// (`--load ckpt` with a 1 MB latest_checkpointed_iteration.txt printed a 1 MB line).
TEST(ByteSize, PicksTheLargestUnitBelowTheSize) {
  EXPECT_EQ(ByteSize(0), "0 B");
  EXPECT_EQ(ByteSize(1023), "1023 B");
  EXPECT_EQ(ByteSize(1024), "1.0 KiB");
  EXPECT_EQ(ByteSize(1700 * 1024), "1.7 MiB");
  EXPECT_EQ(ByteSize(uintmax_t{3} << 40), "3.0 TiB");
  EXPECT_EQ(ByteSize(uintmax_t{5} << 50), "5120.0 TiB");
}

TEST(Printable, EscapesControlCharactersAndCutsLongText) {
  EXPECT_EQ(Printable("plain text/ü"), "plain text/ü");
  EXPECT_EQ(Printable("4\njunk\r\t\x01\x7f"), "4\\njunk\\r\\t\\x01\\x7f");
  EXPECT_EQ(Printable(std::string(1'000'000, '7'), 8), "77777777... (1000000 bytes)");
  EXPECT_EQ(Printable("abcdü", 5), "abcd... (6 bytes)");  // never half a character
  EXPECT_EQ(Printable("abcd", 4), "abcd");
  EXPECT_EQ(ParseInt("4\njunk", "ckpt/latest_checkpointed_iteration.txt").status().message(),
            "ckpt/latest_checkpointed_iteration.txt='4\\njunk' is not an integer");
  const std::string million(1'000'000, '7');
  EXPECT_LT(ParseInt(million, "n").status().message().size(), 200u);
  EXPECT_LT(ParseDouble(million + "x", "n").status().message().size(), 200u);
  EXPECT_LT(ParseBool(million, "n").status().message().size(), 200u);
}

TEST(ParseBool, Spellings) {
  for (const char* yes : {"yes", "YES", "true", "on", "1"}) EXPECT_TRUE(*ParseBool(yes, "x")) << yes;
  for (const char* no : {"no", "False", "off", "0"}) EXPECT_FALSE(*ParseBool(no, "x")) << no;
  EXPECT_EQ(ParseBool("maybe", "allow_user_profile").status().message(),
            "allow_user_profile='maybe' is not yes or no");
}

TEST(Split, KeepsEmptyFields) {
  auto fields = Split("a,,b", ',');
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[0], "a");
  EXPECT_EQ(fields[1], "");
  EXPECT_EQ(fields[2], "b");
  EXPECT_EQ(Split("", ',').size(), 1u);
  EXPECT_EQ(Trim("  x y \t\n"), "x y");
}

TEST(Env, TypedReads) {
  setenv("SRUNWAY_TEST_INT", "12", 1);
  setenv("SRUNWAY_TEST_BAD", "12a", 1);
  setenv("SRUNWAY_TEST_BOOL", "no", 1);
  unsetenv("SRUNWAY_TEST_UNSET");
  EXPECT_EQ(*GetEnvInt("SRUNWAY_TEST_INT"), 12);
  EXPECT_EQ(GetEnvInt("SRUNWAY_TEST_UNSET").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(GetEnvInt("SRUNWAY_TEST_BAD").status().message(), "SRUNWAY_TEST_BAD='12a' is not an integer");
  EXPECT_FALSE(GetEnvInt("SRUNWAY_TEST_INT", 0, 10).ok());
  EXPECT_FALSE(*GetEnvBool("SRUNWAY_TEST_BOOL"));
  EXPECT_EQ(GetEnvOr("SRUNWAY_TEST_UNSET", "fallback"), "fallback");
  EXPECT_EQ(*GetEnv("SRUNWAY_TEST_INT"), "12");
  EXPECT_FALSE(GetEnv("SRUNWAY_TEST_UNSET").has_value());
}

// The kernel's name for this machine, as /proc has it (the UTS namespace's).
TEST(Env, HostName) {
  std::ifstream proc("/proc/sys/kernel/hostname");
  std::string kernel;
  ASSERT_TRUE(std::getline(proc, kernel));
  EXPECT_EQ(HostName(), kernel);
}

TEST(Env, ValidateAssignment) {
  EXPECT_TRUE(ValidateEnvAssignment("NCCL_SOCKET_IFNAME", "eth0,eth1").ok());
  EXPECT_TRUE(ValidateEnvAssignment("_X1", "").ok());
  EXPECT_FALSE(ValidateEnvAssignment("", "x").ok());
  EXPECT_FALSE(ValidateEnvAssignment("1X", "x").ok());
  EXPECT_FALSE(ValidateEnvAssignment("A-B", "x").ok());
  EXPECT_FALSE(ValidateEnvAssignment("A", "x\ny").ok());
  EXPECT_FALSE(ValidateEnvAssignment("A", std::string_view("x\0y", 3)).ok());
  EXPECT_EQ(ValidateEnvAssignment("A", "1\r").message(), "value of A contains a NUL or newline character");
}

}  // namespace
}  // namespace srunway::common
