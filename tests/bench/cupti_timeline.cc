// Profiling helper for GPU nodes without Nsight Systems: a CUDA injection library (CUDA_INJECTION64_PATH) that
// records, through CUPTI's activity API, when every kernel, copy and memset of the program ran on the GPU, and at
// exit writes those inside the program's cuProfilerStart/cuProfilerStop range (srunway-train --profile-step) to the
// CSV file SRUNWAY_TIMELINE names: "kind,start_ns,end_ns,stream,name" rows after a "# range START STOP" line, for
// scripts/kernel_shares.py's timeline mode (each kernel's time as it ran, and the GPU's idle gaps between them,
// which Nsight Compute's one-kernel-at-a-time timings cannot show).
//   CUDA_INJECTION64_PATH=libsrunway-timeline.so SRUNWAY_TIMELINE=step.csv srunway-train ... --profile-step 4
// Without a cuProfilerStart the whole run is written. Failures are one line on stderr; the program runs on.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Activity {
  char kind;  // K kernel, C copy, S memset
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t stream;
  std::string name;
};

// CUPTI calls the buffer callbacks on its own thread and the profiler callbacks on the program's; one lock.
std::mutex mutex;
std::vector<Activity> activities;
uint64_t range_start_ns = 0;
uint64_t range_stop_ns = 0;
constexpr size_t kBufferBytes = size_t{8} << 20;

bool Ok(CUptiResult rc, const char* what) {
  if (rc == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  cuptiGetResultString(rc, &text);
  std::fprintf(stderr, "srunway-timeline: %s failed: %s\n", what, text != nullptr ? text : "unknown CUPTI error");
  return false;
}

std::string Demangled(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && plain != nullptr ? std::string(plain.get()) : std::string(name);
}

const char* CopyName(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[copy host to device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[copy device to host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[copy device to device]";
    default: return "[copy]";
  }
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI wants 8-byte aligned buffers; a failed allocation makes it drop records, which it counts.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::vector<Activity> batch;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        batch.push_back({'K', k->start, k->end, k->streamId, Demangled(k->name)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        batch.push_back({'C', c->start, c->end, c->streamId, CopyName(c->copyKind)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        batch.push_back({'S', s->start, s->end, s->streamId, "[memset]"});
        break;
      }
      default: break;
    }
  }
  std::free(buffer);
  std::lock_guard lock(mutex);
  for (Activity& a : batch) activities.push_back(std::move(a));
}

void CUPTIAPI OnDriverCall(void*, CUpti_CallbackDomain, CUpti_CallbackId id, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  // The range opens once cuProfilerStart has returned and closes as cuProfilerStop is entered (srunway-train
  // waits for the GPU before both); the first range only.
  uint64_t now = 0;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && info->callbackSite == CUPTI_API_EXIT) {
    cuptiGetTimestamp(&now);
    std::lock_guard lock(mutex);
    if (range_start_ns == 0) range_start_ns = now;
  } else if (id == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && info->callbackSite == CUPTI_API_ENTER) {
    cuptiGetTimestamp(&now);
    std::lock_guard lock(mutex);
    if (range_start_ns != 0 && range_stop_ns == 0) range_stop_ns = now;
  }
}

void Quoted(FILE* out, const std::string& text) {
  std::fputc('"', out);
  for (char c : text) {
    if (c == '"') std::fputc('"', out);
    std::fputc(c, out);
  }
  std::fputc('"', out);
}

void WriteTimeline() {
  Ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  const char* path = std::getenv("SRUNWAY_TIMELINE");
  FILE* out = std::fopen(path, "w");
  if (out == nullptr) {
    std::fprintf(stderr, "srunway-timeline: cannot write %s\n", path);
    return;
  }
  std::lock_guard lock(mutex);
  const bool ranged = range_start_ns != 0 && range_stop_ns > range_start_ns;
  uint64_t first = UINT64_MAX, last = 0;
  // CUPTI leaves a record's times 0 when it could not take them: those are not on the timeline.
  std::erase_if(activities, [](const Activity& a) { return a.start_ns == 0 || a.end_ns < a.start_ns; });
  for (const Activity& a : activities) {
    first = std::min(first, a.start_ns);
    last = std::max(last, a.end_ns);
  }
  const uint64_t from = ranged ? range_start_ns : first;
  const uint64_t to = ranged ? range_stop_ns : last;
  std::fprintf(out, "# range %llu %llu%s\nkind,start_ns,end_ns,stream,name\n", static_cast<unsigned long long>(from),
               static_cast<unsigned long long>(to), ranged ? "" : " (no cuProfilerStart: the whole run)");
  size_t written = 0;
  for (const Activity& a : activities) {
    if (a.end_ns <= from || a.start_ns >= to) continue;
    std::fprintf(out, "%c,%llu,%llu,%u,", a.kind, static_cast<unsigned long long>(a.start_ns),
                 static_cast<unsigned long long>(a.end_ns), a.stream);
    Quoted(out, a.name);
    std::fputc('\n', out);
    ++written;
  }
  if (std::fclose(out) != 0) std::fprintf(stderr, "srunway-timeline: writing %s failed\n", path);
  std::fprintf(stderr, "srunway-timeline: %zu of %zu GPU activities in %s\n", written, activities.size(), path);
}

}  // namespace

// The CUDA driver calls this when it loads the library named by CUDA_INJECTION64_PATH (at cuInit).
extern "C" int InitializeInjection() {
  if (std::getenv("SRUNWAY_TIMELINE") == nullptr) {
    std::fprintf(stderr, "srunway-timeline: SRUNWAY_TIMELINE (the CSV file to write) is not set; recording nothing\n");
    return 1;
  }
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!Ok(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), "cuptiActivityRegisterCallbacks") ||
      !Ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records") ||
      !Ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling copy records") ||
      !Ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset records") ||
      !Ok(cuptiSubscribe(&subscriber, OnDriverCall, nullptr), "cuptiSubscribe") ||
      !Ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart),
          "the cuProfilerStart callback") ||
      !Ok(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop),
          "the cuProfilerStop callback")) {
    return 1;
  }
  std::atexit(WriteTimeline);
  return 1;
}
