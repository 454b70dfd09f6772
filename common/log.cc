// Logging through fmt: levels from SRUNWAY_LOG, every line prefixed with program, host and rank when known.
#include "common/log.h"

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <typeinfo>

#include "common/env.h"
#include "common/parse.h"

namespace srunway::common {
namespace {

constexpr std::array<std::string_view, 5> kLevelNames = {"error", "warning", "info", "debug", "trace"};

struct LogState {
  std::recursive_mutex mutex;  // recursive: std::terminate's line may come from a throw inside LogLine
  std::string program = "srunway";
  std::string host;
  int rank = -1;
  LogSink sink;
  std::atomic<int> level{static_cast<int>(LogLevel::kInfo)};
};

std::string DetectHost() {
  if (auto node = GetEnv("SLURMD_NODENAME")) return *node;
  return HostName().value_or("unknown-host");
}

int DetectRank() {
  for (const char* name : {"SLURM_PROCID", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "RANK"}) {
    auto rank = GetEnvInt(name);
    if (rank.ok() && *rank >= 0) return static_cast<int>(*rank);
  }
  return -1;
}

// Reads the environment into `state`; returns a complaint about SRUNWAY_LOG to print once, if any.
std::string LoadFromEnvironment(LogState& state) {
  state.host = DetectHost();
  state.rank = DetectRank();
  auto text = GetEnv("SRUNWAY_LOG");
  if (!text || text->empty()) return {};
  auto level = ParseLogLevel(*text);
  if (!level.ok()) return fmt::format("{}; using info", level.status().message());
  state.level = static_cast<int>(*level);
  return {};
}

// A type's name as C++ writes it ("std::out_of_range", not "St12out_of_range").
std::string Demangled(const std::type_info& type) {
  int failed = -1;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &failed);
  std::string readable = failed == 0 ? name : type.name();
  std::free(name);
  return readable;
}

// One error line for std::terminate, then abort (a core where the site keeps them; SIGABRT for srun and the
// launcher to report). A second call (the line itself threw) aborts at once.
[[noreturn]] void LogTerminate() noexcept {
  static std::atomic<bool> entered{false};
  if (entered.exchange(true)) std::abort();
  try {
    std::string what = "std::terminate called with no exception in flight";
    if (const std::exception_ptr current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::exception& error) {
        what = fmt::format("uncaught {}: {}", Demangled(typeid(error)), error.what());
      } catch (...) {
        const std::type_info* type = abi::__cxa_current_exception_type();
        what = fmt::format("uncaught {} (not a std::exception)", type != nullptr ? Demangled(*type) : "exception");
      }
    }
    LogLine(LogLevel::kError, fmt::format("internal error: {}", what));
  } catch (...) {
    static constexpr std::string_view kLine = "srunway: internal error: std::terminate called\n";
    (void)!::write(STDERR_FILENO, kLine.data(), kLine.size());
  }
  std::abort();
}

LogState& State() {
  static LogState* state = [] {
    auto* fresh = new LogState();  // never destroyed: threads may log during static destruction
    std::string complaint = LoadFromEnvironment(*fresh);
    if (!complaint.empty()) fmt::print(stderr, "{}[{}] warning: {}\n", fresh->program, fresh->host, complaint);
    return fresh;
  }();
  return *state;
}

}  // namespace

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "warn") lower = "warning";
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (lower == kLevelNames[i]) return static_cast<LogLevel>(i);
  }
  return InvalidArgument("SRUNWAY_LOG='{}' is not one of error, warn, info, debug, trace", Printable(text));
}

std::string_view LogLevelName(LogLevel level) { return kLevelNames[static_cast<size_t>(level)]; }

void InitLogging(std::string_view program) {
  std::set_terminate(LogTerminate);
  LogState& state = State();
  std::string complaint;
  {
    std::lock_guard lock(state.mutex);
    state.program = program;
    complaint = LoadFromEnvironment(state);
  }
  if (!complaint.empty()) LogWarn("{}", complaint);
}

void SetLogLevel(LogLevel level) { State().level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(State().level.load()); }

void SetLogRank(int rank) {
  LogState& state = State();
  std::lock_guard lock(state.mutex);
  state.rank = rank;
}

void SetLogHost(std::string_view host) {
  LogState& state = State();
  std::lock_guard lock(state.mutex);
  state.host = host;
}

void SetLogSink(LogSink sink) {
  LogState& state = State();
  std::lock_guard lock(state.mutex);
  state.sink = std::move(sink);
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= State().level.load(std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view message) {
  LogState& state = State();
  std::lock_guard lock(state.mutex);
  std::string line = state.rank >= 0
                         ? fmt::format("{}[{} rank {}] {}: {}", state.program, state.host, state.rank,
                                       LogLevelName(level), message)
                         : fmt::format("{}[{}] {}: {}", state.program, state.host, LogLevelName(level), message);
  if (state.sink) {
    state.sink(level, line);
    return;
  }
  line += '\n';
  // One write per line, so lines of concurrent threads and ranks do not interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

namespace {

std::atomic<int> stdout_error{0};  // the first errno a write to stdout met
std::atomic<int> stdout_lost_code{0};

constexpr int kUnknownError = -1;  // a write that failed where errno was not kept (printf, std::cout)

void NoteStdoutError(int error) {
  int none = 0;
  stdout_error.compare_exchange_strong(none, error == 0 ? kUnknownError : error);
}

void CheckStdoutAtExit() {
  if (stdout_lost_code.load() == 0) return;
  const Status flushed = FlushStdout();
  if (flushed.ok()) return;
  LogError("{}; the output is incomplete", flushed.message());
  std::_Exit(stdout_lost_code.load());
}

}  // namespace

void PrintText(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) NoteStdoutError(errno);
}

Status FlushStdout() {
  if (std::fflush(stdout) != 0) NoteStdoutError(errno);
  if (std::ferror(stdout)) NoteStdoutError(kUnknownError);
  const int error = stdout_error.load();
  if (error == kUnknownError) return DataLoss("cannot write to stdout: a write failed");
  return error == 0 ? Status::Ok() : ErrnoStatus(error, "cannot write to stdout");
}

void ExitIfStdoutLost(int code) {
  static const bool registered = std::atexit(CheckStdoutAtExit) == 0;
  (void)registered;
  stdout_lost_code.store(code);
}

}  // namespace srunway::common
