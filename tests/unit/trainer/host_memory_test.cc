// HostMemoryBudget over a made-up /proc and /sys: the machine's RAM, what of it was free, and the room under the
// tightest cgroup limit (v2 and v1), each said in its own words.
#include "trainer/device/host_memory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/temp_dir.h"

namespace srunway::trainer {
namespace {

constexpr size_t kGib = size_t{1} << 30;

class HostMemoryTest : public ::testing::Test {
 protected:
  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = root() / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  // MemTotal 16 GiB, MemAvailable `available_gib`.
  void Meminfo(int available_gib) {
    Write("proc/meminfo", "MemTotal:       16777216 kB\nMemFree:         1000 kB\nMemAvailable:   " +
                              std::to_string(available_gib * 1048576) + " kB\n");
  }
  const std::filesystem::path& root() const { return temp_.path(); }

 private:
  testing::TempDir temp_{"srunway-host-memory-test"};
};

TEST_F(HostMemoryTest, TheMachineWhenNothingIsUsed) {
  Meminfo(16);
  const HostMemory memory = HostMemoryBudget(root());
  EXPECT_EQ(memory.bytes, 16 * kGib);
  EXPECT_EQ(memory.why, "this machine's memory");
}

TEST_F(HostMemoryTest, WhatWasFree) {
  Meminfo(6);
  const HostMemory memory = HostMemoryBudget(root());
  EXPECT_EQ(memory.bytes, 6 * kGib);
  EXPECT_EQ(memory.why, "what of this machine's 16.00 GiB was free when it started");
}

// Slurm's task/cgroup on cgroup v2: the job's --mem on the job's cgroup, none on the task's or the step's; the
// tightest room is the job's limit less what the job already uses.
TEST_F(HostMemoryTest, TheJobsCgroupV2) {
  Meminfo(12);
  Write("proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n");
  const std::string job = "sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/";
  Write(job + "memory.max", "4294967296\n");
  Write(job + "memory.current", "1073741824\n");
  Write(job + "step_0/memory.max", "max\n");
  Write(job + "step_0/memory.current", "536870912\n");
  Write(job + "step_0/user/task_0/memory.max", "max\n");
  Write("sys/fs/cgroup/system.slice/memory.max", "max\n");
  const HostMemory memory = HostMemoryBudget(root());
  EXPECT_EQ(memory.bytes, 3 * kGib);
  EXPECT_EQ(memory.why, "what cgroup /system.slice/slurmstepd.scope/job_7 had left of its 4.00 GiB limit when it "
                        "started: Slurm's --mem sets it");
}

// cgroup v1's memory controller, named among others on its line; "no limit" is a number near 2^63.
TEST_F(HostMemoryTest, TheJobsCgroupV1) {
  Meminfo(12);
  Write("proc/self/cgroup", "5:cpuacct,cpu:/slurm/uid_0/job_8/step_0\n4:memory:/slurm/uid_0/job_8/step_0\n"
                            "0::/\n");
  Write("sys/fs/cgroup/memory/slurm/uid_0/job_8/step_0/memory.limit_in_bytes", "2147483648\n");
  Write("sys/fs/cgroup/memory/slurm/uid_0/job_8/step_0/memory.usage_in_bytes", "0\n");
  Write("sys/fs/cgroup/memory/slurm/memory.limit_in_bytes", "9223372036854771712\n");
  Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  const HostMemory memory = HostMemoryBudget(root());
  EXPECT_EQ(memory.bytes, 2 * kGib);
  EXPECT_EQ(memory.why, "what cgroup /slurm/uid_0/job_8/step_0 had left of its 2.00 GiB limit when it started: "
                        "Slurm's --mem sets it");
}

// The page cache a job's cgroup holds (the files its earlier steps wrote or read) is given back before anyone is
// OOM-killed: it is not counted as used. tmpfs pages (shmem, on the anonymous lists) are.
TEST_F(HostMemoryTest, PageCacheIsRoom) {
  Meminfo(12);
  Write("proc/self/cgroup", "0::/job_7/step_1\n");
  Write("sys/fs/cgroup/job_7/memory.max", "4294967296\n");
  Write("sys/fs/cgroup/job_7/memory.current", "3221225472\n");
  Write("sys/fs/cgroup/job_7/memory.stat", "anon 536870912\nfile 2684354560\nshmem 268435456\n"
                                           "active_file 1073741824\ninactive_file 1342177280\nunevictable 0\n");
  EXPECT_EQ(HostMemoryBudget(root()).bytes, 3 * kGib + kGib / 4);  // 4 GiB less 3 used, 2.25 of them cache
  // v1: the subtree's counts (total_*), as its usage is; the cgroup's own are a part of them.
  Write("proc/self/cgroup", "4:memory:/slurm/job_8\n");
  const std::string job = "sys/fs/cgroup/memory/slurm/job_8/";
  Write(job + "memory.limit_in_bytes", "2147483648\n");
  Write(job + "memory.usage_in_bytes", "2147483648\n");
  Write(job + "memory.stat", "cache 4096\nactive_file 4096\ninactive_file 0\ntotal_cache 1610612736\n"
                             "total_inactive_file 1073741824\ntotal_active_file 536870912\n");
  EXPECT_EQ(HostMemoryBudget(root()).bytes, kGib + kGib / 2);
  // More cache than usage (the counts are read one after another): no use, not a wrapped number.
  Write(job + "memory.usage_in_bytes", "1024\n");
  EXPECT_EQ(HostMemoryBudget(root()).bytes, 2 * kGib);
}

// A limit wider than what the machine has free does not bound the rank; nor does an unreadable one.
TEST_F(HostMemoryTest, ALooseLimitOrNone) {
  Meminfo(5);
  Write("proc/self/cgroup", "0::/user.slice\n");
  Write("sys/fs/cgroup/user.slice/memory.max", "68719476736\n");
  Write("sys/fs/cgroup/memory.max", "garbage\n");
  EXPECT_EQ(HostMemoryBudget(root()).bytes, 5 * kGib);
}

// A node's ranks share its memory and their job's cgroup: each may hold an even share.
TEST_F(HostMemoryTest, RanksOfANodeShareIt) {
  Meminfo(12);
  const HostMemory shared = ShareOf(HostMemoryBudget(root()), 4);
  EXPECT_EQ(shared.bytes, 3 * kGib);
  EXPECT_EQ(shared.why, "this node's 4 ranks share what of this machine's 16.00 GiB was free when it started");
  EXPECT_EQ(ShareOf(HostMemoryBudget(root()), 1).why, "what of this machine's 16.00 GiB was free when it started");
  EXPECT_EQ(ShareOf(HostMemory{}, 8).bytes, 0u);  // no bound stays none
}

// Nothing readable: no bound, nothing refused on its account.
TEST_F(HostMemoryTest, NothingToTell) {
  const HostMemory memory = HostMemoryBudget(root());
  EXPECT_EQ(memory.bytes, 0u);
}

// This machine, read for real: some bound, never more than its RAM.
TEST(HostMemory, ThisMachine) {
  const HostMemory memory = HostMemoryBudget();
  EXPECT_GT(memory.bytes, 0u);
  EXPECT_FALSE(memory.why.empty());
}

}  // namespace
}  // namespace srunway::trainer
