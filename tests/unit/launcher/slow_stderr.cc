// Preloaded into a process (LD_PRELOAD) to make its writes to stderr slow: each fwrite to stderr waits
// SLOW_STDERR_MS milliseconds before it writes. fmt::print reaches stderr through fwrite, so this opens the window in
// which another thread of srunway-launch may end the process while its one error line is still being written.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

extern "C" size_t fwrite(const void* data, size_t size, size_t count, FILE* stream) {
  using Fwrite = size_t (*)(const void*, size_t, size_t, FILE*);
  static const auto real = reinterpret_cast<Fwrite>(::dlsym(RTLD_NEXT, "fwrite"));
  if (stream == stderr) {
    if (const char* ms = std::getenv("SLOW_STDERR_MS")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
    }
  }
  return real(data, size, count, stream);
}
