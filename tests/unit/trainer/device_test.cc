// The trainer's devices: the host, and a GPU through the CUDA driver table, here the stand-in libcuda.so.1 of
// tests/unit/launcher/fake_gpu.cc (host memory, every call finished at once) when SRUNWAY_FAKE_CUDA_DRIVER names it.
#include "trainer/device/device.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/sanitizers.h"
#include "trainer/device/host_memory.h"

namespace srunway::trainer {
namespace {

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The high-water mark of what the device's buffers held at once, as PyTorch's max_memory_allocated.
void PeakTally(Device& device) {
  const size_t before = device.peak_allocated();  // a fresh device: what opening it took
  {
    auto a = Buffer::Allocate(device, DType::kFloat32, 1000);
    auto b = Buffer::Allocate(device, DType::kFloat32, 1000);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(device.peak_allocated(), before + 8000);
    *a = Buffer();
    auto c = Buffer::Allocate(device, DType::kBFloat16, 1000);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(device.peak_allocated(), before + 8000);  // 6000 held now
    auto d = Buffer::Allocate(device, DType::kInt32, 2000);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(device.peak_allocated(), before + 14000);
  }
  auto e = Buffer::Allocate(device, DType::kFloat32, 1000);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(device.peak_allocated(), before + 14000);
}

// Host -> a on a side stream, an event, a -> b on the main stream after it, b -> host; and a zeroed buffer.
void RoundTrip(Device& device) {
  std::vector<float> host(1000);
  std::iota(host.begin(), host.end(), 0.5f);
  auto a = Buffer::Allocate(device, DType::kFloat32, host.size());
  auto b = Buffer::Allocate(device, DType::kFloat32, host.size());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 256, 0u);
  EXPECT_EQ(a->bytes(), 4000u);
  auto side = device.NewStream();
  auto copied = device.NewEvent();
  ASSERT_TRUE(side.ok() && copied.ok());
  ASSERT_TRUE(device.CopyFromHost(a->data(), host.data(), a->bytes(), **side).ok());
  ASSERT_TRUE(device.Record(**copied, **side).ok());
  ASSERT_TRUE(device.Wait(device.main_stream(), **copied).ok());
  ASSERT_TRUE(device.Copy(b->data(), a->data(), a->bytes(), device.main_stream()).ok());
  std::vector<float> back(host.size());
  ASSERT_TRUE(device.CopyToHost(back.data(), b->data(), b->bytes(), device.main_stream()).ok());
  ASSERT_TRUE(device.Synchronize(device.main_stream()).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(device.Zero(b->data(), b->bytes(), device.main_stream()).ok());
  ASSERT_TRUE(device.CopyToHost(back.data(), b->data(), b->bytes(), device.main_stream()).ok());
  ASSERT_TRUE(device.Synchronize(device.main_stream()).ok());
  EXPECT_EQ(back, std::vector<float>(host.size(), 0.0f));
}

TEST(Device, DTypes) {
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bf16");
}

TEST(Device, Cpu) {
  auto cpu = NewCpuDevice();
  EXPECT_EQ(cpu->kind(), DeviceKind::kCpu);
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_EQ(cpu->native(cpu->main_stream()), nullptr);
  PeakTally(*cpu);
  RoundTrip(*cpu);
  auto event = cpu->NewEvent();
  ASSERT_TRUE(event.ok());
  auto passed = cpu->Passed(**event);
  ASSERT_TRUE(passed.ok());
  EXPECT_TRUE(*passed);
}

// Each allocation alone fitting in the machine was not enough: the model's buffers, each under the machine's
// memory, together over it were all handed out (the kernel overcommits) and the run was OOM-killed as it touched
// them (--max-position-embeddings 16000000). What this device already holds counts, against what the rank may
// hold (host_memory_test.cc: the machine, what was free, the cgroup's limit).
TEST(Device, CpuRefusesWhatTheMachineCannotHoldAltogether) {
#ifdef SRUNWAY_ASAN
  GTEST_SKIP() << "AddressSanitizer writes the shadow of half the machine's memory (20 s); the plain build checks it";
#endif
  const size_t budget = HostMemoryBudget().bytes;
  ASSERT_GT(budget, 0u);
  auto cpu = NewCpuDevice();
  const size_t part = budget / 2 + budget / 8;  // never touched: nothing is committed; two are a quarter too many
  auto first = cpu->Allocate(part);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = cpu->Allocate(part);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), common::StatusCode::kResourceExhausted);
  EXPECT_NE(second.status().message().find(fmt::format("GiB of host memory: this rank holds {:.2f} of the ",
                                                       static_cast<double>(part) / (1 << 30))),
            std::string::npos) << second.status().message();
  cpu->Free(*first);
  auto again = cpu->Allocate(part);  // freed memory counts no more
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  cpu->Free(*again);
}

// This process's resident memory in bytes.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A model too large for the machine was refused only once its buffers, zero-filled as they were made, held nearly
// all of it (RSS 23 of 23.5 GB, two minutes into srunway-train --max-position-embeddings 16000000). A large zeroed
// buffer is fresh pages, committed only as it is written.
TEST(Device, CpuZeroedBuffersAreCommittedOnlyWhenWritten) {
#ifdef SRUNWAY_ASAN
  GTEST_SKIP() << "under AddressSanitizer every buffer comes from its heap, whose bounds it checks";
#endif
  auto cpu = NewCpuDevice();
  constexpr size_t kCount = size_t{128} << 20;  // 512 MiB of fp32
  const int64_t before = ResidentBytes();
  auto buffer = Buffer::AllocateZeroed(*cpu, DType::kFloat32, kCount);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  EXPECT_LT(ResidentBytes() - before, int64_t{64} << 20);
  float* values = buffer->as<float>();
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_EQ(values[kCount / 2], 0.0f);
  EXPECT_EQ(values[kCount - 1], 0.0f);
  std::fill(values, values + kCount, 1.0f);  // written: now it is held
  EXPECT_GT(ResidentBytes() - before, int64_t{256} << 20);
  auto small = Buffer::AllocateZeroed(*cpu, DType::kFloat32, 1000);  // from the heap, zeroed there
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(std::all_of(small->as<float>(), small->as<float>() + 1000, [](float v) { return v == 0.0f; }));
}

TEST(Device, BufferOwnsItsMemory) {
  auto cpu = NewCpuDevice();
  auto a = Buffer::Allocate(*cpu, DType::kBFloat16, 10);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes(), 20u);
  EXPECT_EQ(a->device(), cpu.get());
  void* data = a->data();
  Buffer b = std::move(*a);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a->data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(a->count(), 0u);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  auto empty = Buffer::Allocate(*cpu, DType::kFloat32, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
  auto huge = Buffer::Allocate(*cpu, DType::kFloat32, SIZE_MAX / 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(), fmt::format("a buffer of {} fp32 elements does not fit in memory", SIZE_MAX / 2));
  auto too_big = Buffer::Allocate(*cpu, DType::kFloat32, SIZE_MAX / 8);  // 2^63 bytes: more than any machine
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), common::StatusCode::kResourceExhausted);
  EXPECT_TRUE(too_big.status().message().starts_with("cannot allocate 8589934592.00 GiB of host memory: this rank "
                                                     "holds 0.00 of the ")) << too_big.status().message();
}

// The CPU device, with every Synchronize and Free written down in order.
class Journaled : public Device {
 public:
  std::vector<std::string> journal;

  DeviceKind kind() const override { return cpu_->kind(); }
  const std::string& name() const override { return cpu_->name(); }
  common::StatusOr<void*> Allocate(size_t bytes) override { return cpu_->Allocate(bytes); }
  void Free(void* data) noexcept override {
    journal.push_back("free");
    cpu_->Free(data);
  }
  size_t peak_allocated() const override { return cpu_->peak_allocated(); }
  AllocationStats allocations() const override { return cpu_->allocations(); }
  Stream& main_stream() override { return cpu_->main_stream(); }
  void* native(Stream& stream) const override { return cpu_->native(stream); }
  common::StatusOr<std::unique_ptr<Stream>> NewStream() override { return cpu_->NewStream(); }
  std::unique_ptr<Stream> Adopt(void* native) override { return cpu_->Adopt(native); }
  common::StatusOr<std::unique_ptr<Event>> NewEvent() override { return cpu_->NewEvent(); }
  common::Status CopyFromHost(void* dst, const void* host, size_t bytes, Stream& stream) override {
    return cpu_->CopyFromHost(dst, host, bytes, stream);
  }
  common::Status CopyToHost(void* host, const void* src, size_t bytes, Stream& stream) override {
    return cpu_->CopyToHost(host, src, bytes, stream);
  }
  common::Status Copy(void* dst, const void* src, size_t bytes, Stream& stream) override {
    return cpu_->Copy(dst, src, bytes, stream);
  }
  common::Status Zero(void* dst, size_t bytes, Stream& stream) override { return cpu_->Zero(dst, bytes, stream); }
  common::Status Record(Event& event, Stream& stream) override { return cpu_->Record(event, stream); }
  common::Status Wait(Stream& stream, const Event& event) override { return cpu_->Wait(stream, event); }
  common::StatusOr<bool> Passed(const Event& event) override { return cpu_->Passed(event); }
  common::Status Synchronize(Stream& stream) override {
    journal.push_back(&stream == &cpu_->main_stream() ? "synchronize main" : "synchronize other");
    return cpu_->Synchronize(stream);
  }
  common::Status Profile(bool on) override { return cpu_->Profile(on); }

 private:
  std::unique_ptr<Device> cpu_ = NewCpuDevice();
};

// A buffer grows only when it must, and its old memory, which queued work may still read, is freed only after the
// stream that work was queued on has finished.
TEST(Device, GrowWaitsForTheStreamBeforeFreeing) {
  Journaled device;
  Buffer buffer;
  ASSERT_TRUE(Grow(buffer, device, DType::kFloat32, 100, device.main_stream()).ok());
  EXPECT_EQ(buffer.count(), 100u);
  EXPECT_TRUE(device.journal.empty());  // nothing to free, nothing to wait for
  void* first = buffer.data();
  ASSERT_TRUE(Grow(buffer, device, DType::kFloat32, 60, device.main_stream()).ok());
  EXPECT_EQ(buffer.data(), first);  // large enough: kept
  EXPECT_TRUE(device.journal.empty());
  ASSERT_TRUE(Grow(buffer, device, DType::kFloat32, 300, device.main_stream()).ok());
  EXPECT_EQ(buffer.count(), 300u);
  EXPECT_EQ(device.journal, (std::vector<std::string>{"synchronize main", "free"}));
  device.journal.clear();
  ASSERT_TRUE(Grow(buffer, device, DType::kBFloat16, 10, device.main_stream()).ok());
  EXPECT_EQ(buffer.dtype(), DType::kBFloat16);  // another type: a new buffer
  EXPECT_EQ(device.journal, (std::vector<std::string>{"synchronize main", "free"}));
  auto side = device.NewStream();
  ASSERT_TRUE(side.ok());
  device.journal.clear();
  common::Status full = Grow(buffer, device, DType::kBFloat16, SIZE_MAX / 4, **side);
  EXPECT_EQ(device.journal, (std::vector<std::string>{"synchronize other", "free"}));
  EXPECT_EQ(full.code(), common::StatusCode::kResourceExhausted) << full.message();
  EXPECT_EQ(buffer.data(), nullptr);
}

TEST(Device, Choice) {
  EXPECT_EQ(*ParseDeviceChoice("auto"), DeviceChoice::kAuto);
  EXPECT_EQ(*ParseDeviceChoice("cpu"), DeviceChoice::kCpu);
  EXPECT_EQ(*ParseDeviceChoice("cuda"), DeviceChoice::kCuda);
  auto bad = ParseDeviceChoice("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "device 'gpu': use auto, cpu or cuda");
}

TEST(Device, NoDriver) {
  ScopedEnv driver("SRUNWAY_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  auto cuda = OpenDevice(DeviceChoice::kCuda, 0);
  ASSERT_FALSE(cuda.ok());
#if SRUNWAY_HAS_CUDA_DEVICE
  EXPECT_TRUE(cuda.status().message().starts_with("no CUDA driver: ")) << cuda.status().message();
  EXPECT_NE(cuda.status().message().find("/nonexistent/libcuda.so.1"), std::string::npos) << cuda.status().message();
#endif
  std::string note;
  auto fallback = OpenDevice(DeviceChoice::kAuto, 0, 1, &note);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ((*fallback)->kind(), DeviceKind::kCpu);
  EXPECT_EQ(note, "training on the CPU: " + cuda.status().message());
  EXPECT_EQ(note.find('\n'), std::string::npos);
}

#if SRUNWAY_HAS_CUDA_DEVICE
class FakeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* fake = getenv("SRUNWAY_FAKE_CUDA_DRIVER");
    if (fake == nullptr) GTEST_SKIP() << "SRUNWAY_FAKE_CUDA_DRIVER is not set (no stand-in driver in this build)";
    driver_.emplace("SRUNWAY_CUDA_DRIVER", fake);
  }
  std::optional<ScopedEnv> driver_;
};

TEST_F(FakeGpu, RoundTrip) {
  ScopedEnv finish("FAKE_GPU_OPS_FINISH", "1");
  auto gpu = OpenDevice(DeviceChoice::kAuto, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ((*gpu)->kind(), DeviceKind::kCuda);
  EXPECT_EQ((*gpu)->name(), "Fake GPU (0000:1b:00.0)");
  auto side = (*gpu)->NewStream();
  ASSERT_TRUE(side.ok());
  void* main = (*gpu)->native((*gpu)->main_stream());
  EXPECT_NE(main, nullptr);
  EXPECT_NE((*gpu)->native(**side), main);
  PeakTally(**gpu);
  RoundTrip(**gpu);
}

TEST_F(FakeGpu, EventsAnswerWithoutWaiting) {
  auto gpu = OpenDevice(DeviceChoice::kCuda, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto event = (*gpu)->NewEvent();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE((*gpu)->Record(**event, (*gpu)->main_stream()).ok());
  {
    ScopedEnv pending("FAKE_GPU_OPS_FINISH", nullptr);
    auto passed = (*gpu)->Passed(**event);
    ASSERT_TRUE(passed.ok());
    EXPECT_FALSE(*passed);
  }
  ScopedEnv finish("FAKE_GPU_OPS_FINISH", "1");
  EXPECT_TRUE(*(*gpu)->Passed(**event));
}

TEST_F(FakeGpu, FullSaysHowFull) {
  auto gpu = OpenDevice(DeviceChoice::kCuda, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto huge = (*gpu)->Allocate(size_t{1} << 60);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), common::StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().message(),
            "cannot allocate 1073741824.00 GiB on Fake GPU (0000:1b:00.0): 1.00 of 80.00 GiB free");
}

TEST_F(FakeGpu, ForeignHandlesAndOldDrivers) {
  auto gpu = OpenDevice(DeviceChoice::kCuda, 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto cpu = NewCpuDevice();
  auto foreign = cpu->NewStream();
  ASSERT_TRUE(foreign.ok());
  common::Status status = (*gpu)->Synchronize(**foreign);
  EXPECT_EQ(status.message(), "a stream of another device was used on Fake GPU (0000:1b:00.0)");
  ScopedEnv old("FAKE_CUDA_DRIVER_VERSION", "11080");
  auto refused = OpenDevice(DeviceChoice::kCuda, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().message().ends_with(" is the driver of CUDA 11.8; srunway needs CUDA 12.0 or later"))
      << refused.status().message();
}
#endif

}  // namespace
}  // namespace srunway::trainer
