// The host as a Device: every call has finished when it returns, so streams and events only stand in for those
// of a GPU.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/sanitizers.h"
#include "trainer/device/device.h"
#include "trainer/device/host_memory.h"

namespace srunway::trainer {
namespace {

constexpr size_t kAlignment = 256;
// Buffers from this size on are mappings of their own: fresh zero pages, committed only as they are written, and
// returned to the system whole when freed. Not under AddressSanitizer, which checks heap buffers' bounds only.
#ifdef SRUNWAY_ASAN
constexpr size_t kMapFrom = SIZE_MAX;
#else
constexpr size_t kMapFrom = size_t{1} << 20;
#endif

class CpuStream : public Stream {};
class CpuEvent : public Event {};

class CpuDevice : public Device {
 public:
  explicit CpuDevice(int local_ranks) : local_ranks_(local_ranks) {}
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  const std::string& name() const override { return name_; }

  common::StatusOr<void*> Allocate(size_t bytes) override {
    // More than the rank may hold, with what this device already holds, is refused before asking: the kernel
    // overcommits (each buffer alone fitting, the run was killed as it touched them), a cgroup over its limit is
    // OOM-killed, and under a sanitizer the allocator may abort instead of failing.
    // Read at the first allocation, after what the rank built before its model (the sample index) is in use.
    std::call_once(budget_read_, [this] { budget_ = ShareOf(HostMemoryBudget(), local_ranks_); });
    const size_t held = tally_.current();
    if (budget_.bytes > 0 && (bytes > budget_.bytes || held > budget_.bytes - bytes)) {
      return common::ResourceExhausted("cannot allocate {:.2f} GiB of host memory: this rank holds {:.2f} of the "
                                       "{:.2f} GiB it may ({})", Gib(bytes), Gib(held), Gib(budget_.bytes),
                                       budget_.why);
    }
    void* data = nullptr;
    if (bytes >= kMapFrom) {
      data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (data == MAP_FAILED) data = nullptr;
    } else {
      const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
      data = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    }
    if (data == nullptr) return common::ResourceExhausted("cannot allocate {:.2f} GiB of host memory", Gib(bytes));
    tally_.Add(data, bytes);
    return data;
  }
  common::StatusOr<void*> AllocateZeroed(size_t bytes) override {
    SRUNWAY_ASSIGN_OR_RETURN(void* data, Allocate(bytes));
    if (bytes < kMapFrom) std::memset(data, 0, bytes);  // a mapping's pages are zero already
    return data;
  }
  void Free(void* data) noexcept override {
    const size_t bytes = tally_.Remove(data);
    if (bytes >= kMapFrom) {
      munmap(data, bytes);
    } else {
      std::free(data);
    }
  }
  size_t peak_allocated() const override { return tally_.peak(); }
  AllocationStats allocations() const override { return tally_.Stats(); }

  Stream& main_stream() override { return main_; }
  void* native(Stream&) const override { return nullptr; }
  common::StatusOr<std::unique_ptr<Stream>> NewStream() override { return std::make_unique<CpuStream>(); }
  common::StatusOr<std::unique_ptr<Event>> NewEvent() override { return std::make_unique<CpuEvent>(); }
  std::unique_ptr<Stream> Adopt(void*) override { return std::make_unique<CpuStream>(); }

  common::Status CopyFromHost(void* dst, const void* host, size_t bytes, Stream&) override {
    return Copy(dst, host, bytes, main_);
  }
  common::Status CopyToHost(void* host, const void* src, size_t bytes, Stream&) override {
    return Copy(host, src, bytes, main_);
  }
  common::Status Copy(void* dst, const void* src, size_t bytes, Stream&) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return common::Status::Ok();
  }
  common::Status Zero(void* dst, size_t bytes, Stream&) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
    return common::Status::Ok();
  }

  common::Status Record(Event&, Stream&) override { return common::Status::Ok(); }
  common::Status Wait(Stream&, const Event&) override { return common::Status::Ok(); }
  common::StatusOr<bool> Passed(const Event&) override { return true; }
  common::Status Synchronize(Stream&) override { return common::Status::Ok(); }
  common::Status Profile(bool) override { return common::Status::Ok(); }

 private:
  std::string name_ = "cpu";
  const int local_ranks_;
  std::once_flag budget_read_;
  HostMemory budget_;
  CpuStream main_;
  AllocationTally tally_;
};

}  // namespace

std::unique_ptr<Device> NewCpuDevice(int local_ranks) { return std::make_unique<CpuDevice>(local_ranks); }

}  // namespace srunway::trainer
