// The emulated GPU's scheduler: a block's CUDA threads as fibers, started with makecontext and switched with
// __builtin_setjmp/__builtin_longjmp, annotated for AddressSanitizer where it is on, and for ThreadSanitizer in
// the tsan build (SRUNWAY_EMULATED_TSAN: this file uninstrumented, the kernels checked).
#include "tests/emulated_gpu/emulator.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/sanitizers.h"

#ifdef SRUNWAY_ASAN
#include <sanitizer/common_interface_defs.h>
#define SRUNWAY_EMULATED_ASAN 1
#endif
#ifdef SRUNWAY_EMULATED_TSAN
#include <sanitizer/tsan_interface.h>
#endif

// The kernels' static __shared__ variables (cuda_runtime.h puts them in this section; the linker defines its
// bounds where any kernel has one).
extern "C" [[gnu::weak]] unsigned char __start_srunway_emulated_shared[];
extern "C" [[gnu::weak]] unsigned char __stop_srunway_emulated_shared[];

#ifdef SRUNWAY_EMULATED_TSAN
// A race fails the test at once, with the exit code ThreadSanitizer gives at the end otherwise.
extern "C" const char* __tsan_default_options() { return "halt_on_error=1:exitcode=66"; }
#endif

namespace srunway::emulated_gpu {

const ThreadPlace* g_thread = nullptr;
const BlockPlace* g_block = nullptr;

void OutsideKernel() {
  std::fprintf(stderr, "emulated GPU: a device function was called outside a kernel\n");
  std::abort();
}

namespace {

#if defined(SRUNWAY_EMULATED_ASAN) || defined(SRUNWAY_EMULATED_TSAN)
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif
constexpr size_t kGuardBytes = 4096;
constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 1024;
constexpr int kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxDynamicShared = 227 * 1024;  // an H100's opt-in limit per block

enum class State { kReady, kAtWarp, kAtBlock, kDone };

// Where a fiber (or the scheduler) left off: the compiler's own setjmp buffer, which holds the frame and stack
// pointers and the resume address (a function that calls __builtin_setjmp saves every callee-saved register in
// its frame itself). Its switches make no system call and reach no sanitizer interceptor or unwinding: glibc's
// _longjmp walked the thread's cancellation handlers on every switch, a fifth of an emulated training run, and
// under AddressSanitizer its interceptor cleared the shadow of the stack it left (the emulated simple attention
// took 3 minutes, mostly there). The fiber annotations already tell the sanitizers which stack is current, and
// no frame is ever abandoned (a fiber parks between kernels instead of ending).
using SwitchPoint = void*[5];

// What the scheduler reads at every switch comes first, in the fiber's first cache line; makecontext's context,
// read once, last.
struct Fiber {
  SwitchPoint context;
  State state = State::kReady;
  Collective waiting_for = Collective::kShuffle;
  ThreadPlace place;  // its coordinates and lane
  int warp = 0;
  unsigned generation = 0;  // warp-wide operations passed: which of the two post buffers is this lane's
  bool started = false;
  unsigned char* stack = nullptr;  // kGuardBytes of PROT_NONE, then kStackBytes
  void* fake_stack = nullptr;
  void* race_fiber = nullptr;  // ThreadSanitizer's context for this thread
  std::vector<AsyncCopy> open_copies;                   // cp.async copies not yet committed
  std::deque<std::vector<AsyncCopy>> committed_copies;  // committed groups not yet waited for, oldest first
  ucontext_t start;
};

struct Warp {
  uint32_t posts[2][kWarpSize][kPostWords];
};

const char* CollectiveName(Collective what) {
  switch (what) {
    case Collective::kShuffle: return "a shuffle";
    case Collective::kSyncWarp: return "__syncwarp";
    case Collective::kMma: return "mma.sync";
    case Collective::kLdmatrix: return "ldmatrix";
    case Collective::kWmma: return "a WMMA operation";
  }
  return "?";
}

// One launch at a time runs (kernels are launched from one host thread, but the trainer's tests may not be).
std::mutex g_launch_mutex;
int g_last_error = 0;
std::map<const void*, int> g_dynamic_shared_limit;

// What the running launch's fibers share; set only while a launch holds g_launch_mutex.
struct Running {
  const std::function<void()>* body = nullptr;
  const char* signature = "";
  BlockPlace place;
  std::deque<Fiber> storage;   // every fiber made so far (parked fibers keep their address)
  std::vector<Fiber*> fibers;  // the block's threads, x fastest: what the scheduler's loops index, for one load
                               // where the deque's index took a division and two (a tenth of an emulated run)
  std::vector<Warp> warps;
  std::vector<unsigned char> shared;
  size_t shared_bytes = 0;
  Fiber* current = nullptr;
  bool copies_land_at_issue = false;  // cp.async's landing in this block
  SwitchPoint scheduler;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  void* scheduler_race_fiber = nullptr;
  // What ThreadSanitizer's orderings synchronise on (only their addresses matter).
  char block_start = 0, block_end = 0, barrier = 0;
};
Running* g_running = nullptr;
thread_local bool g_in_launch = false;  // this host thread is running a kernel

Running& Run() {
  if (g_running == nullptr || g_running->current == nullptr) OutsideKernel();
  return *g_running;
}

void StartSwitch(void** fake_stack, const void* bottom, size_t size) {
#ifdef SRUNWAY_EMULATED_ASAN
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

void FinishSwitch(void* fake_stack, const void** bottom, size_t* size) {
#ifdef SRUNWAY_EMULATED_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

// ThreadSanitizer's view of the emulated GPU: every CUDA thread is a fiber of its own, a switch orders nothing,
// and the orderings are the GPU's: __syncthreads orders the block's threads, __syncwarp its warp's lanes (shuffles,
// mma.sync, ldmatrix and WMMA move registers and order no memory), a block's start orders it after what the host
// wrote before the launch, and the host's next step after the block. An access by one thread to what another
// thread of the block writes with no barrier between is then a data race that ThreadSanitizer reports, in
// whichever order the emulator ran the two (compute-sanitizer's racecheck, for shared and global memory). Blocks
// are ordered one after another: a block that depends on another block's output shows as a wrong answer in one
// of the two block orders instead. Without SRUNWAY_EMULATED_TSAN these do nothing.
#ifdef SRUNWAY_EMULATED_TSAN
void* NewRaceFiber() { return __tsan_create_fiber(0); }
void* CurrentRaceFiber() { return __tsan_get_current_fiber(); }
void SwitchRaceFiber(void* to) { __tsan_switch_to_fiber(to, __tsan_switch_to_fiber_no_sync); }
void Release(void* sync) { __tsan_release(sync); }
void Acquire(void* sync) { __tsan_acquire(sync); }
#else
void* NewRaceFiber() { return nullptr; }
void* CurrentRaceFiber() { return nullptr; }
void SwitchRaceFiber(void*) {}
void Release(void*) {}
void Acquire(void*) {}
#endif

// A switch to another fiber (or back to the scheduler). Not inlined: __builtin_longjmp may not sit in a function
// that calls __builtin_setjmp, as Resume and Wait do. Not [[noreturn]], and the functions that switch are not
// instrumented: AddressSanitizer would clear the stack's shadow before every call to it.
[[gnu::noinline, gnu::no_sanitize_address]] void Jump(SwitchPoint& to) { __builtin_longjmp(to, 1); }

// Scheduler side: runs fiber f until it waits or ends. Not inlined, so that no caller's variable lives in the
// frame that the switch point keeps (the registers it restores are those of the call, which the fiber cannot
// change).
[[gnu::noinline, gnu::no_sanitize_address]] void Resume(Running& run, Fiber& f) {
  run.current = &f;
  g_thread = &f.place;
  run.scheduler_race_fiber = CurrentRaceFiber();
  if (__builtin_setjmp(run.scheduler) == 0) {
    StartSwitch(&run.scheduler_fake_stack, f.stack + kGuardBytes, kStackBytes);
    SwitchRaceFiber(f.race_fiber);
    if (!f.started) {
      f.started = true;
      setcontext(&f.start);
    }
    Jump(f.context);
  }
  FinishSwitch(run.scheduler_fake_stack, nullptr, nullptr);
  run.current = nullptr;
  g_thread = nullptr;
}

// Fiber side: waits in `state` until the scheduler lets it go on (not inlined, as Resume).
[[gnu::noinline, gnu::no_sanitize_address]] void Wait(State state) {
  Running& run = Run();
  Fiber& f = *run.current;
  f.state = state;
  if (__builtin_setjmp(f.context) == 0) {
    StartSwitch(&f.fake_stack, run.scheduler_bottom, run.scheduler_size);
    SwitchRaceFiber(run.scheduler_race_fiber);
    Jump(run.scheduler);
  }
  FinishSwitch(f.fake_stack, &run.scheduler_bottom, &run.scheduler_size);
}

// A fiber's life: run the kernel body for its thread of a block, then wait, parked, until the scheduler gives it
// the same thread of another block (or launch). Fibers are started once (setcontext, a system call) and reused.
[[gnu::no_sanitize_address]] void Entry() {
  FinishSwitch(nullptr, &g_running->scheduler_bottom, &g_running->scheduler_size);
  while (true) {
    Acquire(&g_running->block_start);
    (*g_running->body)();
    Release(&g_running->block_end);
    Wait(State::kDone);
  }
}

std::string Describe(const Running& run) {
  std::string out = std::string("emulated GPU: ") + run.signature;
  char where[160];
  std::snprintf(where, sizeof(where), ": block (%u, %u, %u) of (%u, %u, %u)", run.place.block_idx.x,
                run.place.block_idx.y, run.place.block_idx.z, run.place.grid.x, run.place.grid.y, run.place.grid.z);
  out += where;
  if (run.current != nullptr) {
    const dim3& t = run.current->place.thread_idx;
    std::snprintf(where, sizeof(where), ", thread (%u, %u, %u) (warp %d lane %d)", t.x, t.y, t.z, run.current->warp,
                  run.current->place.lane);
    out += where;
  }
  return out;
}

[[noreturn]] void FailIn(const Running& run, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", Describe(run).c_str(), what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Ends the program naming the lanes of a warp that did not all meet at one warp-wide operation: the lowest two
// waiting at different ones, else the lowest that is elsewhere (exited, or at __syncthreads).
[[noreturn]] void FailApart(const Running& run, Fiber* const* lanes, int count) {
  const Fiber* waiting = nullptr;
  for (int i = 0; i < count; ++i) {
    const Fiber& f = *lanes[i];
    if (f.state != State::kAtWarp) continue;
    if (waiting == nullptr) waiting = &f;
    if (f.waiting_for != waiting->waiting_for) {
      FailIn(run, "lanes " + std::to_string(waiting->place.lane) + " and " + std::to_string(f.place.lane) +
                      " of warp " + std::to_string(f.warp) + " wait at different warp-wide operations (" +
                      CollectiveName(waiting->waiting_for) + ", " + CollectiveName(f.waiting_for) + ")");
    }
  }
  for (int i = 0; i < count; ++i) {
    const Fiber& f = *lanes[i];
    if (f.state == State::kAtWarp) continue;
    FailIn(run, "lane " + std::to_string(f.place.lane) + " of warp " + std::to_string(f.warp) +
                    (f.state == State::kDone ? " has exited" : " waits at __syncthreads") + " while lane " +
                    std::to_string(waiting->place.lane) + " waits for it at " + CollectiveName(waiting->waiting_for));
  }
  FailIn(run, "the warp's lanes met after all");  // not reached: the caller saw them apart
}

// Runs the lanes of warp w until none can go on, releasing them each time they all meet at one collective.
void RunWarp(Running& run, int first, int count, bool reverse) {
  Fiber* const* lanes = run.fibers.data() + first;
  while (true) {
    // Each lane runs until it waits or ends; where it waits is then settled for this round.
    int at_warp = 0;
    const Fiber* waiting = nullptr;
    bool apart = false;  // lanes wait at different warp-wide operations
    for (int i = 0; i < count; ++i) {
      Fiber& f = *lanes[reverse ? count - 1 - i : i];
      if (f.state == State::kReady) Resume(run, f);
      if (f.state != State::kAtWarp) continue;
      ++at_warp;
      if (waiting == nullptr) waiting = &f;
      apart |= f.waiting_for != waiting->waiting_for;
    }
    if (at_warp == 0) return;
    if (apart || at_warp != count) FailApart(run, lanes, count);
    for (int i = 0; i < count; ++i) lanes[i]->state = State::kReady;
  }
}

void RunBlock(Running& run, bool reverse) {
  const dim3& block = run.place.block;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  for (int i = 0; i < threads; ++i) {
    Fiber& f = *run.fibers[i];
    f.state = State::kReady;
    f.generation = 0;
    f.open_copies.clear();  // a thread that ended without waiting: its copies never landed
    f.committed_copies.clear();
  }
  run.copies_land_at_issue = !reverse;
  // Shared memory starts as NaN (as fp32 and bf16) in every block: what a block reads before writing shows.
  if (run.shared_bytes > 0) std::memset(run.shared.data(), 0xff, run.shared_bytes);
  if (__start_srunway_emulated_shared != nullptr) {
    std::memset(__start_srunway_emulated_shared, 0xff,
                __stop_srunway_emulated_shared - __start_srunway_emulated_shared);
  }
  Release(&run.block_start);
  const int warps = (threads + kWarpSize - 1) / kWarpSize;
  while (true) {
    for (int i = 0; i < warps; ++i) {
      const int w = reverse ? warps - 1 - i : i;
      const int first = w * kWarpSize;
      RunWarp(run, first, std::min(kWarpSize, threads - first), reverse);
    }
    bool any_waiting = false;
    for (int i = 0; i < threads; ++i) {
      if (run.fibers[i]->state == State::kAtBlock) {
        run.fibers[i]->state = State::kReady;
        any_waiting = true;
      }
    }
    if (!any_waiting) break;  // every thread has exited
  }
  Acquire(&run.block_end);
}

// A fiber that will start at Entry on a stack of its own. Not inlined: getcontext, like setjmp, returns twice
// in principle (never here, since makecontext redirects the context).
[[gnu::noinline]] void NewFiber(Fiber& f) {
  void* p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "emulated GPU: cannot map a fiber stack\n");
    std::abort();
  }
  mprotect(p, kGuardBytes, PROT_NONE);  // an overflowing kernel faults instead of writing into its neighbour
  f.stack = static_cast<unsigned char*>(p);
  getcontext(&f.start);
  f.start.uc_stack.ss_sp = f.stack + kGuardBytes;
  f.start.uc_stack.ss_size = kStackBytes;
  f.start.uc_link = nullptr;
  makecontext(&f.start, Entry, 0);
  f.race_fiber = NewRaceFiber();
}

int CheckConfiguration(const void* kernel, dim3 grid, dim3 block, size_t shared_bytes) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    return kInvalidConfiguration;
  }
  auto it = g_dynamic_shared_limit.find(kernel);
  const size_t limit = it == g_dynamic_shared_limit.end() ? kDefaultDynamicShared : static_cast<size_t>(it->second);
  if (shared_bytes > limit) return kInvalidValue;
  return 0;
}

// The index of the linear-th thread (or block) of a shape, x fastest.
dim3 Unflatten(uint64_t linear, dim3 shape) {
  return dim3(static_cast<unsigned>(linear % shape.x), static_cast<unsigned>(linear / shape.x % shape.y),
              static_cast<unsigned>(linear / (uint64_t{shape.x} * shape.y)));
}

}  // namespace


void WarpSync(Collective what, unsigned mask) {
  Running& run = Run();
  if (mask != 0xffffffffu) FailIn(run, "the emulator takes only whole-warp masks (0xffffffff)");
  run.current->waiting_for = what;
  Warp& warp = run.warps[run.current->warp];
  if (what == Collective::kSyncWarp) Release(&warp);
  Wait(State::kAtWarp);
  if (what == Collective::kSyncWarp) Acquire(&warp);
  ++run.current->generation;
}

void BlockSync() {
  Running& run = Run();
  Release(&run.barrier);
  Wait(State::kAtBlock);
  Acquire(&run.barrier);
}

// Whole fixed-size copies, which the compiler inlines: a call to memcpy would be checked by ThreadSanitizer.
void Post(const Words& words) {
  Running& run = Run();
  const Fiber& f = *run.current;
  std::memcpy(run.warps[f.warp].posts[f.generation % 2][f.place.lane], words, sizeof(Words));
}

void ReadPosted(int lane, Words& words) {
  Running& run = Run();
  const Fiber& f = *run.current;
  std::memcpy(words, run.warps[f.warp].posts[(f.generation + 1) % 2][lane], sizeof(Words));
}

bool CopiesLandAtIssue() { return Run().copies_land_at_issue; }

void QueueCopy(const AsyncCopy& copy) { Run().current->open_copies.push_back(copy); }

void CommitCopies() {
  Fiber& f = *Run().current;
  f.committed_copies.push_back(std::move(f.open_copies));
  f.open_copies.clear();
}

std::vector<AsyncCopy> TakeLandedCopies(int pending) {
  Fiber& f = *Run().current;
  std::vector<AsyncCopy> landed;
  while (f.committed_copies.size() > static_cast<size_t>(std::max(pending, 0))) {
    landed.insert(landed.end(), f.committed_copies.front().begin(), f.committed_copies.front().end());
    f.committed_copies.pop_front();
  }
  return landed;
}

unsigned char* DynamicShared() { return Run().shared.data(); }
size_t DynamicSharedBytes() { return Run().shared_bytes; }

int Launch(const void* kernel, const char* signature, dim3 grid, dim3 block, size_t shared_bytes,
           const std::function<void()>& body) {
  if (g_in_launch) {
    std::fprintf(stderr, "emulated GPU: %s launched from inside a kernel\n", signature);
    std::abort();
  }
  std::lock_guard lock(g_launch_mutex);
  if (int rc = CheckConfiguration(kernel, grid, block, shared_bytes); rc != 0) {
    g_last_error = rc;
    return rc;
  }
  static Running run;  // its fibers' stacks are kept from launch to launch
  const int threads = static_cast<int>(block.x * block.y * block.z);
  while (run.fibers.size() < static_cast<size_t>(threads)) {
    run.fibers.push_back(&run.storage.emplace_back());
    NewFiber(*run.fibers.back());
  }
  for (int i = 0; i < threads; ++i) {
    Fiber& f = *run.fibers[i];
    f.place.thread_idx = Unflatten(i, block);
    f.place.lane = i % kWarpSize;
    f.warp = i / kWarpSize;
  }
  run.warps.assign((threads + kWarpSize - 1) / kWarpSize, Warp{});
  run.body = &body;
  run.signature = signature;
  run.place.grid = grid;
  run.place.block = block;
  run.shared_bytes = shared_bytes;
  run.shared.assign(shared_bytes, 0);
  g_running = &run;
  g_block = &run.place;
  g_in_launch = true;
  // Blocks in order on even launches and in reverse on odd ones: a block that reads what another block of the
  // same launch writes (which the hardware never orders) gets a wrong answer on one of the two. The order also
  // decides how atomics from several blocks add up, so it depends on how many kernels ran before: a test that holds
  // a resumed run to the uninterrupted one bit for bit (which ran other kernels before the same step) sets
  // FAKE_GPU_BLOCKS_IN_ORDER to run every launch's blocks in order.
  static const bool alternate = std::getenv("FAKE_GPU_BLOCKS_IN_ORDER") == nullptr;
  static uint64_t launches = 0;
  const bool reverse_blocks = alternate && launches++ % 2 == 1;
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint64_t linear = reverse_blocks ? blocks - 1 - i : i;
    run.place.block_idx = Unflatten(linear, grid);
    RunBlock(run, linear % 2 == 1);
  }
  g_in_launch = false;
  g_running = nullptr;
  g_block = nullptr;
  return 0;
}

int AllowDynamicShared(const void* kernel, int bytes) {
  std::lock_guard lock(g_launch_mutex);
  if (bytes < 0 || bytes > kMaxDynamicShared) return kInvalidValue;
  g_dynamic_shared_limit[kernel] = bytes;
  return 0;
}

int TakeLastError() {
  std::lock_guard lock(g_launch_mutex);
  const int rc = g_last_error;
  g_last_error = 0;
  return rc;
}

int PeekLastError() {
  std::lock_guard lock(g_launch_mutex);
  return g_last_error;
}

void Fail(const char* what) { FailIn(Run(), what); }

}  // namespace srunway::emulated_gpu
