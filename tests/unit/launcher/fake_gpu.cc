// A stand-in for the CUDA driver and NCCL, built as libcuda.so.1 and libnccl.so.2 for the NCCL backend's tests on
// machines without a GPU. Functions carry the names cuda.h gives them (its macros map cuMemAlloc to cuMemAlloc_v2),
// which are the symbols the backend asks dlsym for. ncclCommAbort and ncclCommDestroy end a communicator, and any
// later call that names it aborts the process with a line saying so: the use-after-free real NCCL would make,
// caught with or without a sanitizer. Operations never finish (cuEventQuery answers "not ready"), the state of a
// rank waiting on a dead peer, unless FAKE_GPU_OPS_FINISH=1; a communicator's init never finishes with
// FAKE_NCCL_INIT_NEVER_FINISHES=1. "GPU memory" is host memory, and a one-rank
// communicator's collectives move their data as real NCCL's would (with one rank every collective is a copy), so
// the trainer's GPU path runs whole on top of the host's ops (tests/unit/trainer/train_device_test.cc).
#include <cuda.h>
#include <cudaProfiler.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace {

struct FakeComm {
  int rank = 0;
  int size = 1;
  bool pending = false;  // a non-blocking init that never finishes (FAKE_NCCL_INIT_NEVER_FINISHES=1)
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
ncclResult_t Copy(ncclComm_t comm, const char* call, const void* send, void* recv, size_t count, ncclDataType_t type) {
  const FakeComm* fake = Use(comm, call);
  if (fake->size == 1 && send != recv) std::memmove(recv, send, count * TypeBytes(type));
  return ncclSuccess;
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
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice) {
  std::strncpy(bus_id, "0000:1b:00.0", static_cast<size_t>(length));
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
CUresult cuEventQuery(CUevent) {
  const char* finish = std::getenv("FAKE_GPU_OPS_FINISH");
  return finish != nullptr && finish[0] == '1' ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
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
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 7, sizeof id->internal);
  return ncclSuccess;
}
// With FAKE_NCCL_INIT_NEVER_FINISHES=1 the init stays in progress, as real NCCL's does while a rank is missing.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int size, ncclUniqueId, int rank, ncclConfig_t*) {
  *comm = Make(rank, size);
  const char* never = std::getenv("FAKE_NCCL_INIT_NEVER_FINISHES");
  if (never == nullptr || never[0] != '1') return ncclSuccess;
  reinterpret_cast<FakeComm*>(*comm)->pending = true;
  return ncclInProgress;
}
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int, ncclComm_t* split, ncclConfig_t*) {
  Use(comm, "ncclCommSplit");
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
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                           ncclComm_t comm, cudaStream_t) {
  return Copy(comm, "ncclAllReduce", send, recv, count, type);
}
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t) {
  return Copy(comm, "ncclReduceScatter", send, recv, count, type);
}
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  return Copy(comm, "ncclAllGather", send, recv, count, type);
}
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int, ncclComm_t comm,
                           cudaStream_t) {
  return Copy(comm, "ncclBroadcast", send, recv, count, type);
}
ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t, int,
                        ncclComm_t comm, cudaStream_t) {
  return Copy(comm, "ncclReduce", send, recv, count, type);
}
ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t) { return Queue(comm, "ncclSend"); }
ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t) { return Queue(comm, "ncclRecv"); }
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

// For the tests: how many events are alive (every request must release its own).
int FakeGpuLiveEvents() { return g_events.load(); }

}  // extern "C"
