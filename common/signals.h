// Signals as programs meet them: a signal's name for messages, and a stop flag for long work that must clean up
// (cancel its jobs, remove its temporaries) before it ends.
#pragma once

#include <csignal>
#include <string>

namespace srunway::common {

// "SIGTERM"; "signal 42" for a number without a name.
std::string SignalName(int signal);

// Installs a handler for SIGINT, SIGTERM and SIGHUP that records the signal's number in the returned flag instead
// of ending the process; the work polls the flag, stops, cleans up and exits 128 + it.
const volatile std::sig_atomic_t* StopOnSignals();

}  // namespace srunway::common
