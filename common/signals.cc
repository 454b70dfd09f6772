// See signals.h.
#include "common/signals.h"

#include <fmt/format.h>
#include <signal.h>

#include <cstring>

namespace srunway::common {
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
}  // namespace

std::string SignalName(int signal) {
  const char* name = ::sigabbrev_np(signal);
  return name != nullptr ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

const volatile std::sig_atomic_t* StopOnSignals() {
  struct sigaction stop {};
  stop.sa_handler = [](int signal) { g_stop_signal = signal; };
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &stop, nullptr);
  return &g_stop_signal;
}

}  // namespace srunway::common
