// The SPANK plugin's pinning policy: the user's binding wins, Slurm's own computed binding does not count as one,
// and the GPU's cores are intersected with what Slurm allows the task.
#include "topology/binding.h"

#include <gtest/gtest.h>

namespace srunway::topology {
namespace {

BindingRequest Request(std::vector<int> gpu_cpus, std::vector<int> allowed) {
  BindingRequest request;
  request.gpu_cpus = std::move(gpu_cpus);
  request.allowed = std::move(allowed);
  return request;
}

// Under task/affinity every task's environment shows the binding Slurm computed (mask_cpu:0x3); what counts is
// what the step asked for, and here it asked for nothing.
TEST(Binding, WithoutAUserBindingTheTaskGoesToItsGpusCores) {
  BindingDecision decision = DecideBinding(Request({1}, {0, 1}));
  EXPECT_EQ(decision.cpus, (std::vector<int>{1}));
  EXPECT_EQ(decision.note, "bound to its GPU's cores");
  EXPECT_FALSE(decision.warning);
}

TEST(Binding, TheUsersBindingWins) {
  BindingRequest cores = Request({1}, {0, 1});
  cores.user_cpu_bind = "cores";
  BindingDecision decision = DecideBinding(cores);
  EXPECT_TRUE(decision.cpus.empty());
  EXPECT_EQ(decision.note, "the user's --cpu-bind=cores wins over the GPU's cores");
  BindingRequest none = Request({1}, {0, 1});
  none.user_cpu_bind = "none";
  EXPECT_TRUE(DecideBinding(none).cpus.empty());
  EXPECT_EQ(DecideBinding(none).note, "no CPU binding: the user asked for none (--cpu-bind=none)");
  BindingRequest off = Request({1}, {0, 1});
  off.affinity = GpuAffinity::kNone;
  EXPECT_TRUE(DecideBinding(off).cpus.empty());
}

TEST(Binding, OnlyWhatSlurmAllows) {
  BindingDecision part = DecideBinding(Request({1, 2, 3}, {0, 1, 2}));
  EXPECT_EQ(part.cpus, (std::vector<int>{1, 2}));
  EXPECT_EQ(part.note, "bound to the GPU's cores that Slurm allows it (1-2 of 1-3)");
  BindingDecision outside = DecideBinding(Request({2, 3}, {0, 1}));
  EXPECT_TRUE(outside.cpus.empty());
  EXPECT_TRUE(outside.warning);
  EXPECT_EQ(outside.note, "no CPU binding: none of the GPU's cores 2-3 is allowed to this task (0-1)");
  EXPECT_TRUE(DecideBinding(Request({}, {0, 1})).cpus.empty());
  EXPECT_FALSE(DecideBinding(Request({}, {0, 1})).warning);
}

}  // namespace
}  // namespace srunway::topology
