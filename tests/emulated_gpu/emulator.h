// A CPU stand-in for an NVIDIA GPU, enough to run trainer/ops/cuda's kernels unchanged on machines without one
// (tests/emulated_gpu/include/ holds the CUDA headers that map onto it). Every CUDA thread of a block is a fiber
// on the calling thread; the warps of a block run one at a time between barriers (__syncthreads), forward in
// even blocks and backward in odd ones, and the lanes of a warp one at a time between warp-wide operations
// (shuffles, __syncwarp, mma.sync, ldmatrix, WMMA), so a missing barrier shows as a wrong result in one of the
// two orders; blocks run one after another, in order on even launches and in reverse on odd ones. Shared memory
// (static and dynamic) starts as NaN in every block. A warp-wide operation that not every lane of the warp
// reaches, a launch the hardware would refuse and an ldmatrix outside shared memory each end the program with one
// line naming the kernel, block and thread. Built with SRUNWAY_EMULATED_TSAN (and the kernels with
// -fsanitize=thread), every CUDA thread is a ThreadSanitizer fiber ordered only as the GPU orders threads
// (__syncthreads, __syncwarp, a block's start and end), so an access racing with another thread's is reported,
// in whichever order the two ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace srunway::emulated_gpu {

// The CUDA runtime's error codes that the emulator gives (their values are cuda_runtime's).
constexpr int kInvalidValue = 1;
constexpr int kInvalidConfiguration = 9;

// The multiprocessors the emulated device reports: an H100 SXM's.
constexpr int kMultiprocessors = 132;

// Where the running CUDA thread is: the scheduler points g_thread at the running thread's place and g_block at
// its block's (g_thread is null outside a kernel). Read inline, as kernels read threadIdx and blockIdx in their
// inner loops: a call each was a tenth of an emulated training run.
struct ThreadPlace {
  dim3 thread_idx;
  int lane = 0;
};
struct BlockPlace {
  dim3 block_idx, block, grid;
};
extern const ThreadPlace* g_thread;
extern const BlockPlace* g_block;
// Ends the program: a device function was called outside a kernel.
[[noreturn]] void OutsideKernel();

inline const ThreadPlace& Thread() {
  if (g_thread == nullptr) [[unlikely]] OutsideKernel();
  return *g_thread;
}
// The calling CUDA thread's coordinates, and its lane in its warp.
inline const dim3& ThreadIdx() { return Thread().thread_idx; }
// The block's and the launch's: g_block is set whenever g_thread is.
inline const BlockPlace& Block() {
  Thread();
  return *g_block;
}
inline const dim3& BlockIdx() { return Block().block_idx; }
inline const dim3& BlockDim() { return Block().block; }
inline const dim3& GridDim() { return Block().grid; }
inline int Lane() { return Thread().lane; }

// What a warp-wide operation is, so that lanes meeting at different ones are reported.
enum class Collective { kShuffle, kSyncWarp, kMma, kLdmatrix, kWmma };

// Returns once every lane of the calling warp has reached the same collective (mask must be the whole warp).
void WarpSync(Collective what, unsigned mask = 0xffffffffu);
// __syncthreads.
void BlockSync();

// The exchange of a warp-wide operation: each lane posts its words, calls WarpSync, and then reads any lane's
// until its next WarpSync. It stands for registers moving between lanes, not memory: the race check does not see
// it, and of the warp-wide operations only __syncwarp orders the lanes' memory accesses (as on the hardware).
constexpr int kPostWords = 16;
using Words = uint32_t[kPostWords];
void Post(const Words& words);
void ReadPosted(int lane, Words& words);

// cp.async: a copy of 4, 8 or 16 bytes into shared memory lands, on the hardware, at some time between its issue
// and the issuing thread's wait for its commit group. The emulator lands it at one end or the other: at the issue
// in blocks that run their warps forward, at the wait in those that run them backward (and then as that thread's
// write, which the race check sees), so that a read before the wait and a copy into a tile another warp still
// reads each give a wrong result in one of the two.
struct AsyncCopy {
  unsigned char* dst;
  unsigned char bytes[16];
  int size;
};
bool CopiesLandAtIssue();
// Adds a copy to the calling thread's open group (only where CopiesLandAtIssue() is false).
void QueueCopy(const AsyncCopy& copy);
// Closes the calling thread's open group (cp.async.commit_group).
void CommitCopies();
// Removes and returns the calling thread's copies of every committed group but the newest `pending`, oldest first
// (cp.async.wait_group pending): the caller lands them.
std::vector<AsyncCopy> TakeLandedCopies(int pending);

// The block's dynamic shared memory and its size.
unsigned char* DynamicShared();
size_t DynamicSharedBytes();

// Runs body on every thread of grid x block, one block after another, and returns 0, or the error the hardware
// would give for the configuration (nothing runs then). kernel names the kernel for cudaFuncSetAttribute's limit
// and what identifies it in failures.
int Launch(const void* kernel, const char* signature, dim3 grid, dim3 block, size_t shared_bytes,
           const std::function<void()>& body);

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
int AllowDynamicShared(const void* kernel, int bytes);

// The last launch error (cudaGetLastError reads and clears it).
int TakeLastError();
int PeekLastError();

// Ends the program with one line naming the kernel, block and thread, then what went wrong.
[[noreturn]] void Fail(const char* what);

}  // namespace srunway::emulated_gpu
