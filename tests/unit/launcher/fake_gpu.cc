// A stand-in for the CUDA driver and NCCL, built as libcuda.so.1 and libnccl.so.2 for the NCCL backend's tests on
// machines without a GPU. Functions carry the names cuda.h gives them (its macros map cuMemAlloc to cuMemAlloc_v2),
// which are the symbols the backend asks dlsym for. ncclCommAbort and ncclCommDestroy end a communicator, and any
// later call that names it aborts the process with a line saying so: the use-after-free real NCCL would make,
// caught with or without a sanitizer. Operations never finish (cuEventQuery answers "not ready"), the state of a
// rank waiting on a dead peer, unless FAKE_GPU_OPS_FINISH=1; a communicator's init never finishes with
// FAKE_NCCL_INIT_NEVER_FINISHES=1. "GPU memory" is host memory, and a one-rank
// communicator's collectives move their data as real NCCL's would (with one rank every collective is a copy), so
// the trainer's GPU path runs whole on top of the host's ops (tests/unit/trainer/train_device_test.cc). With
// FAKE_NCCL_SHARED=1 the ranks of a larger communicator, each a process, meet in shared memory named by the
// unique id and their collectives move and reduce the data (in rank order, so every rank gets the same bits), at
// once in the calling thread as everything here; a rank that waits FAKE_NCCL_TIMEOUT seconds (default 300) for
// its peers ends with a line saying so. FAKE_CUDA_DEVICES=N shows N GPUs (default 1), each with its own bus id.
#include <cuda.h>
#include <cudaProfiler.h>
#include <nccl.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace {

// Whether the environment turns the switch `name` on (FAKE_...=1).
bool EnvFlag(const char* name) {
  const char* set = std::getenv(name);
  return set != nullptr && set[0] == '1';
}

// The memory the ranks of one FAKE_NCCL_SHARED communicator share: a barrier, then one slot per rank through
// which collectives move in pieces of at most kSlotBytes.
constexpr size_t kSlotBytes = size_t{1} << 20;
constexpr size_t kHeaderBytes = 4096;
struct SharedHeader {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> generation;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the barrier lives in memory shared by processes");

struct FakeComm {
  int rank = 0;
  int size = 1;
  bool pending = false;    // a non-blocking init that never finishes (FAKE_NCCL_INIT_NEVER_FINISHES=1)
  void* shared = nullptr;  // FAKE_NCCL_SHARED=1 and more than one rank: the SharedHeader and the slots
  size_t shared_bytes = 0;
  int timeout_s = 300;  // FAKE_NCCL_TIMEOUT: how long Barrier waits for the peers

  SharedHeader& header() const { return *static_cast<SharedHeader*>(shared); }
  unsigned char* Slot(int r) const {
    return static_cast<unsigned char*>(shared) + kHeaderBytes + static_cast<size_t>(r) * kSlotBytes;
  }

  // Returns once every rank has called it as often; ends the process after FAKE_NCCL_TIMEOUT seconds.
  void Barrier(const char* call) const {
    SharedHeader& h = header();
    const uint32_t generation = h.generation.load(std::memory_order_acquire);
    if (h.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(size)) {
      h.arrived.store(0, std::memory_order_relaxed);
      h.generation.fetch_add(1, std::memory_order_release);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (h.generation.load(std::memory_order_acquire) == generation) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "fake NCCL: rank %d of %d waited %d s for its peers in %s\n", rank, size, timeout_s, call);
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

std::mutex g_mutex;
std::set<const FakeComm*> g_live;  // communicators made and not yet aborted or destroyed

ncclComm_t Make(int rank, int size) {
  auto* comm = new FakeComm{rank, size};
  std::lock_guard lock(g_mutex);
  g_live.insert(comm);
  return reinterpret_cast<ncclComm_t>(comm);
}

int g_context = 0;
std::atomic<int> g_events{0};

// What every real NCCL call does first: use the communicator. One that is gone ends the test loudly.
const FakeComm* Use(const void* comm, const char* call) {
  std::lock_guard lock(g_mutex);
  auto it = g_live.find(static_cast<const FakeComm*>(comm));
  if (it == g_live.end()) {
    std::fprintf(stderr, "fake NCCL: %s on a communicator that was already aborted or destroyed (use after free)\n",
                 call);
    std::abort();
  }
  return *it;
}

ncclResult_t Free(ncclComm_t comm, const char* call) {
  const FakeComm* fake = Use(comm, call);
  {
    std::lock_guard lock(g_mutex);
    g_live.erase(fake);
  }
  if (fake->shared != nullptr) munmap(fake->shared, fake->shared_bytes);
  delete fake;
  return ncclSuccess;
}

ncclResult_t Queue(ncclComm_t comm, const char* call) {
  Use(comm, call);
  return ncclSuccess;
}

size_t TypeBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

// A collective of one rank: its `count` elements of `send` land in `recv` (every collective of one rank is that).
// Without FAKE_NCCL_SHARED a larger communicator's collectives are only queued.
ncclResult_t Copy(const FakeComm& comm, const void* send, void* recv, size_t count, ncclDataType_t type) {
  if (comm.size == 1 && send != recv) std::memmove(recv, send, count * TypeBytes(type));
  return ncclSuccess;
}

[[noreturn]] void NotEmulated(const char* what) {
  std::fprintf(stderr, "fake NCCL: %s is not emulated across processes\n", what);
  std::abort();
}

// Element i of `out` = every rank's element i in `slot_offset` bytes into its slot, combined in rank order.
template <typename T>
void Combine(void* out, const FakeComm& comm, size_t slot_offset, size_t count, ncclRedOp_t op) {
  for (size_t i = 0; i < count; ++i) {
    T total;
    std::memcpy(&total, comm.Slot(0) + slot_offset + i * sizeof(T), sizeof(T));
    for (int r = 1; r < comm.size; ++r) {
      T value;
      std::memcpy(&value, comm.Slot(r) + slot_offset + i * sizeof(T), sizeof(T));
      switch (op) {
        case ncclSum:
        case ncclAvg:
          total = static_cast<T>(total + value);
          break;
        case ncclProd:
          total = static_cast<T>(total * value);
          break;
        case ncclMax:
          total = total < value ? value : total;
          break;
        case ncclMin:
          total = value < total ? value : total;
          break;
        default:
          NotEmulated("this reduction operation");
      }
    }
    if (op == ncclAvg) total = static_cast<T>(total / static_cast<T>(comm.size));
    std::memcpy(static_cast<unsigned char*>(out) + i * sizeof(T), &total, sizeof(T));
  }
}

// bf16 as NCCL reduces it: each rank's value combined in fp32 with the running result, rounded back to bf16 (to
// nearest even) after every step, in rank order (Combine<Bf16>).
struct Bf16 {
  uint16_t bits;
  Bf16() = default;
  explicit Bf16(float value) {
    uint32_t wide;
    std::memcpy(&wide, &value, sizeof(wide));
    if ((wide & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((wide >> 16) | 0x40);  // NaN stays NaN
      return;
    }
    wide += 0x7fffu + ((wide >> 16) & 1u);
    bits = static_cast<uint16_t>(wide >> 16);
  }
  explicit operator float() const {
    const uint32_t wide = uint32_t{bits} << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
  }
  friend Bf16 operator+(Bf16 a, Bf16 b) { return Bf16(static_cast<float>(a) + static_cast<float>(b)); }
  friend Bf16 operator*(Bf16 a, Bf16 b) { return Bf16(static_cast<float>(a) * static_cast<float>(b)); }
  friend Bf16 operator/(Bf16 a, Bf16 b) { return Bf16(static_cast<float>(a) / static_cast<float>(b)); }
  friend bool operator<(Bf16 a, Bf16 b) { return static_cast<float>(a) < static_cast<float>(b); }
};

void CombineAs(ncclDataType_t type, void* out, const FakeComm& comm, size_t slot_offset, size_t bytes, ncclRedOp_t op) {
  const size_t count = bytes / TypeBytes(type);
  switch (type) {
    case ncclInt8:
      return Combine<int8_t>(out, comm, slot_offset, count, op);
    case ncclUint8:
      return Combine<uint8_t>(out, comm, slot_offset, count, op);
    case ncclInt32:
      return Combine<int32_t>(out, comm, slot_offset, count, op);
    case ncclUint32:
      return Combine<uint32_t>(out, comm, slot_offset, count, op);
    case ncclInt64:
      return Combine<int64_t>(out, comm, slot_offset, count, op);
    case ncclUint64:
      return Combine<uint64_t>(out, comm, slot_offset, count, op);
    case ncclFloat32:
      return Combine<float>(out, comm, slot_offset, count, op);
    case ncclFloat64:
      return Combine<double>(out, comm, slot_offset, count, op);
    case ncclBfloat16:
      return Combine<Bf16>(out, comm, slot_offset, count, op);
    default:
      NotEmulated("a reduction of fp16");
  }
}

// Every rank's `bytes` of `mine` (none where null) go through the slots a piece at a time; once a piece is in every
// slot, `use(offset, bytes_in_piece)` runs on every rank, and the slots are free again when all have used it.
template <typename Use>
void Exchange(const FakeComm& comm, const char* call, const void* mine, size_t bytes, Use&& use) {
  for (size_t offset = 0; offset < bytes; offset += kSlotBytes) {
    const size_t piece = std::min(kSlotBytes, bytes - offset);
    if (mine != nullptr) std::memcpy(comm.Slot(comm.rank), static_cast<const unsigned char*>(mine) + offset, piece);
    comm.Barrier(call);
    use(offset, piece);
    comm.Barrier(call);
  }
}

// The rendezvous of a FAKE_NCCL_SHARED communicator: every rank maps the memory the unique id names, and once all
// have, rank 0 removes the name (the mappings stay).
void Attach(FakeComm& comm, const ncclUniqueId& id) {
  const std::string name = "/srunway-fake-nccl-" + std::string(id.internal, strnlen(id.internal, sizeof id.internal));
  comm.shared_bytes = kHeaderBytes + static_cast<size_t>(comm.size) * kSlotBytes;
  if (const char* timeout = std::getenv("FAKE_NCCL_TIMEOUT")) comm.timeout_s = std::atoi(timeout);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(comm.shared_bytes)) != 0) {
    std::fprintf(stderr, "fake NCCL: shared memory %s: %s\n", name.c_str(), std::strerror(errno));
    std::abort();
  }
  comm.shared = mmap(nullptr, comm.shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (comm.shared == MAP_FAILED) {
    std::fprintf(stderr, "fake NCCL: mapping %s: %s\n", name.c_str(), std::strerror(errno));
    std::abort();
  }
  comm.Barrier("ncclCommInitRankConfig");
  if (comm.rank == 0) shm_unlink(name.c_str());
}

}  // namespace

extern "C" {

// The CUDA driver.
CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult, const char** text) {
  *text = "fake CUDA error";
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  const char* devices = std::getenv("FAKE_CUDA_DEVICES");
  *count = devices != nullptr ? std::atoi(devices) : 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02x:00.0", 0x1b + device);
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int length, CUdevice) {
  std::strncpy(name, "Fake GPU", static_cast<size_t>(length));
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&g_context);
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult cuStreamCreate(CUstream* stream, unsigned) {
  *stream = reinterpret_cast<CUstream>(new int(0));
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream stream) {
  delete reinterpret_cast<int*>(stream);
  return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent* event, unsigned) {
  *event = reinterpret_cast<CUevent>(new int(0));
  ++g_events;
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult cuEventQuery(CUevent) { return EnvFlag("FAKE_GPU_OPS_FINISH") ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; }
CUresult cuEventDestroy(CUevent event) {
  delete reinterpret_cast<int*>(event);
  --g_events;
  return CUDA_SUCCESS;
}
// 256-byte aligned, as the real driver's, and exactly `bytes` long, so that under AddressSanitizer a kernel of the
// emulated GPU (tests/emulated_gpu) reading past a buffer is caught even inside the real driver's rounding.
CUresult cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  void* p = nullptr;
  if (bytes >= (size_t{1} << 40) || posix_memalign(&p, 256, bytes == 0 ? 1 : bytes) != 0) p = nullptr;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return *pointer != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFree(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr pointer, unsigned char value, size_t bytes) {
  std::memset(reinterpret_cast<void*>(pointer), value, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr to, const void* from, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(to), from, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* to, CUdeviceptr from, size_t bytes) {
  std::memcpy(to, reinterpret_cast<const void*>(from), bytes);
  return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int* version) {
  const char* forced = std::getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = forced != nullptr ? std::atoi(forced) : 13000;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute, CUdevice) {
  *value = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult cuMemGetInfo(size_t* free, size_t* total) {
  *free = size_t{1} << 30;
  *total = size_t{80} << 30;
  return CUDA_SUCCESS;
}
// Streams of the stand-in run everything at once, in the caller.
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned) { return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult cuMemsetD8Async(CUdeviceptr pointer, unsigned char value, size_t bytes, CUstream) {
  return cuMemsetD8(pointer, value, bytes);
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr to, const void* from, size_t bytes, CUstream) {
  return cuMemcpyHtoD(to, from, bytes);
}
CUresult cuMemcpyDtoHAsync(void* to, CUdeviceptr from, size_t bytes, CUstream) { return cuMemcpyDtoH(to, from, bytes); }
CUresult cuMemcpyDtoDAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream) {
  std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes);
  return CUDA_SUCCESS;
}
// The profiler's capture range, said on stdout where it falls among the program's own lines.
CUresult cuProfilerStart() {
  std::printf("fake CUDA profiler: start\n");
  std::fflush(stdout);
  return CUDA_SUCCESS;
}
CUresult cuProfilerStop() {
  std::printf("fake CUDA profiler: stop\n");
  std::fflush(stdout);
  return CUDA_SUCCESS;
}

// NCCL.
ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION(2, 28, 9);
  return ncclSuccess;
}
// Unique on this machine: FAKE_NCCL_SHARED names the ranks' shared memory after it.
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::atomic<int> made{0};
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "%d-%lld-%d", static_cast<int>(getpid()),
                static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()), ++made);
  return ncclSuccess;
}
// With FAKE_NCCL_INIT_NEVER_FINISHES=1 the init stays in progress, as real NCCL's does while a rank is missing.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int size, ncclUniqueId id, int rank, ncclConfig_t*) {
  *comm = Make(rank, size);
  if (size > 1 && EnvFlag("FAKE_NCCL_SHARED")) Attach(*reinterpret_cast<FakeComm*>(*comm), id);
  if (!EnvFlag("FAKE_NCCL_INIT_NEVER_FINISHES")) return ncclSuccess;
  reinterpret_cast<FakeComm*>(*comm)->pending = true;
  return ncclInProgress;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int, ncclComm_t* split, ncclConfig_t*) {
  if (Use(comm, "ncclCommSplit")->shared != nullptr) NotEmulated("ncclCommSplit");
  *split = color == NCCL_SPLIT_NOCOLOR ? nullptr : Make(0, 1);
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  *state = Use(comm, "ncclCommGetAsyncError")->pending ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return Queue(comm, "ncclCommFinalize"); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return Free(comm, "ncclCommDestroy"); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return Free(comm, "ncclCommAbort"); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = Use(comm, "ncclCommUserRank")->rank;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* size) {
  *size = Use(comm, "ncclCommCount")->size;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
const char* ncclGetLastError(ncclComm_t) { return ""; }
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t) {
  const FakeComm& fake = *Use(comm, "ncclAllReduce");
  if (fake.shared == nullptr) return Copy(fake, send, recv, count, type);
  Exchange(fake, "ncclAllReduce", send, count * TypeBytes(type), [&](size_t offset, size_t piece) {
    CombineAs(type, static_cast<unsigned char*>(recv) + offset, fake, 0, piece, op);
  });
  return ncclSuccess;
}
// Rank r receives block r (`count` elements) of the reduced `count * size` elements.
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t) {
  const FakeComm& fake = *Use(comm, "ncclReduceScatter");
  if (fake.shared == nullptr) return Copy(fake, send, recv, count, type);
  const size_t block = count * TypeBytes(type), first = static_cast<size_t>(fake.rank) * block;
  Exchange(fake, "ncclReduceScatter", send, block * static_cast<size_t>(fake.size), [&](size_t offset, size_t piece) {
    const size_t from = std::max(offset, first), to = std::min(offset + piece, first + block);
    if (from < to) {
      CombineAs(type, static_cast<unsigned char*>(recv) + (from - first), fake, from - offset, to - from, op);
    }
  });
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  const FakeComm& fake = *Use(comm, "ncclAllGather");
  if (fake.shared == nullptr) return Copy(fake, send, recv, count, type);
  const size_t block = count * TypeBytes(type);
  Exchange(fake, "ncclAllGather", send, block, [&](size_t offset, size_t piece) {
    for (int r = 0; r < fake.size; ++r) {
      std::memcpy(static_cast<unsigned char*>(recv) + static_cast<size_t>(r) * block + offset, fake.Slot(r), piece);
    }
  });
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t) {
  const FakeComm& fake = *Use(comm, "ncclBroadcast");
  if (fake.shared == nullptr) return Copy(fake, send, recv, count, type);
  Exchange(fake, "ncclBroadcast", fake.rank == root ? send : nullptr, count * TypeBytes(type),
           [&](size_t offset, size_t piece) {
             std::memcpy(static_cast<unsigned char*>(recv) + offset, fake.Slot(root), piece);
           });
  return ncclSuccess;
}
ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t) {
  const FakeComm& fake = *Use(comm, "ncclReduce");
  if (fake.shared == nullptr) return Copy(fake, send, recv, count, type);
  Exchange(fake, "ncclReduce", send, count * TypeBytes(type), [&](size_t offset, size_t piece) {
    if (fake.rank == root) CombineAs(type, static_cast<unsigned char*>(recv) + offset, fake, 0, piece, op);
  });
  return ncclSuccess;
}
ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t) {
  if (Use(comm, "ncclSend")->shared != nullptr) NotEmulated("ncclSend");
  return ncclSuccess;
}
ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t) {
  if (Use(comm, "ncclRecv")->shared != nullptr) NotEmulated("ncclRecv");
  return ncclSuccess;
}
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

// For the tests: how many events are alive (every request must release its own).
int FakeGpuLiveEvents() { return g_events.load(); }

}  // extern "C"
