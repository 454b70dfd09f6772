// The NCCL backend's abort paths against a stand-in libcuda/libnccl (fake_gpu.cc), which ends the test the moment
// a communicator is used after ncclCommAbort freed it: an abort from another thread (the watchdog's) while this
// thread waits in an operation, a deadline that aborts, and everything after an abort.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "launcher/bootstrap.h"
#include "launcher/comm_factory.h"

namespace srunway::launcher {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Comm> MakeNccl(std::chrono::milliseconds timeout) {
  auto bootstrap = CreateSingleBootstrap();
  CommOptions options;
  options.timeout = timeout;
  auto comm = CreateComm(CommKind::kNccl, *bootstrap, options);
  EXPECT_TRUE(comm.ok()) << comm.status().ToString();
  return comm.ok() ? std::move(*comm) : nullptr;
}

TEST(NcclAbort, FromAnotherThreadWhileThisOneWaits) {
  auto comm = MakeNccl(60s);
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(comm->kind(), CommKind::kNccl);
  auto buffer = comm->Allocate(64);
  ASSERT_TRUE(buffer.ok());
  auto handle = comm->IAllReduce(buffer->data(), buffer->data(), 16, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  // The fake's operations never finish, as with a dead peer: only the abort can end the wait.
  std::thread watchdog([&] {
    std::this_thread::sleep_for(50ms);
    comm->Abort();
    comm->Abort();  // twice, as the watchdog and the main thread may both
  });
  common::Status waited = (*handle)->Wait();
  watchdog.join();
  EXPECT_EQ(waited.code(), common::StatusCode::kAborted) << waited.ToString();
  // Everything after the abort says so instead of touching the freed communicator...
  EXPECT_EQ(comm->AllReduce(buffer->data(), 16, DataType::kFloat32, ReduceOp::kSum).code(),
            common::StatusCode::kAborted);
  EXPECT_EQ(comm->Split(0, 0).status().code(), common::StatusCode::kAborted);
  handle->reset();
  // ...and so does the destructor, which must neither finalize nor destroy it.
  comm.reset();
}

TEST(NcclAbort, DeadlineAbortsOnceAndTheDestructorLeavesItAlone) {
  auto comm = MakeNccl(200ms);
  ASSERT_NE(comm, nullptr);
  auto buffer = comm->Allocate(64);
  ASSERT_TRUE(buffer.ok());
  common::Status status = comm->AllReduce(buffer->data(), 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(status.code(), common::StatusCode::kDeadlineExceeded) << status.ToString();
  EXPECT_NE(status.message().find("the communicator was aborted"), std::string::npos) << status.message();
  comm->Abort();
  comm.reset();
}

TEST(NcclAbort, SplitsLiveOnAfterTheirParentIsAborted) {
  ::setenv("FAKE_GPU_OPS_FINISH", "1", 1);
  auto comm = MakeNccl(60s);
  ASSERT_NE(comm, nullptr);
  auto split = comm->Split(0, 0);
  ASSERT_TRUE(split.ok() && *split != nullptr) << split.status().ToString();
  auto none = comm->Split(-1, 0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, nullptr);
  comm->Abort();
  auto buffer = (*split)->Allocate(64);
  ASSERT_TRUE(buffer.ok());
  EXPECT_TRUE((*split)->AllReduce(buffer->data(), 16, DataType::kFloat32, ReduceOp::kSum).ok());
  split->reset();
  comm.reset();
  ::unsetenv("FAKE_GPU_OPS_FINISH");
}

}  // namespace
}  // namespace srunway::launcher
