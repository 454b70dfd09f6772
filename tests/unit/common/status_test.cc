// Tests for Status, StatusOr and the early-return macros.
#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace srunway::common {
namespace {

StatusOr<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgument("{} is odd", n);
  return n / 2;
}

StatusOr<int> Quarter(int n) {
  SRUNWAY_ASSIGN_OR_RETURN(int half, Half(n));
  SRUNWAY_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int n) {
  SRUNWAY_RETURN_IF_ERROR(Half(n).status());
  return Status::Ok();
}

TEST(Status, OkByDefault) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.ToString(), "ok");
  EXPECT_EQ(status, Status::Ok());
}

TEST(Status, CarriesCodeAndMessage) {
  Status status = NotFound("no {} in {}", "libnccl.so.2", "/opt");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no libnccl.so.2 in /opt");
  EXPECT_EQ(status.ToString(), "not found: no libnccl.so.2 in /opt");
  EXPECT_EQ(fmt::format("{}", status), "not found: no libnccl.so.2 in /opt");
}

TEST(Status, WithContextKeepsCode) {
  Status status = DataLoss("truncated").WithContext("data.idx");
  EXPECT_EQ(status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), "data.idx: truncated");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(Status, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "open /x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write /x").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(ETIMEDOUT, "connect").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write /x").message(), "write /x: No space left on device");
}

TEST(StatusOr, ValueOrError) {
  StatusOr<int> good = Half(8);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 4);
  EXPECT_TRUE(good.status().ok());

  StatusOr<int> bad = Half(7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "7 is odd");
}

TEST(StatusOr, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(12), 3);
  EXPECT_EQ(Quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(Quarter(5).status().message(), "5 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
}

TEST(StatusOr, HoldsMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> holder = std::make_unique<int>(5);
  ASSERT_TRUE(holder.ok());
  std::unique_ptr<int> taken = std::move(holder).value();
  EXPECT_EQ(*taken, 5);
}

}  // namespace
}  // namespace srunway::common
