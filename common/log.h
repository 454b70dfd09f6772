// Logging through fmt: levels from SRUNWAY_LOG, every line prefixed with program, host and rank when known.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace srunway::common {

enum class LogLevel { kError = 0, kWarn, kInfo, kDebug, kTrace };

// Accepts error|warn|warning|info|debug|trace, case-insensitively.
StatusOr<LogLevel> ParseLogLevel(std::string_view text);
std::string_view LogLevelName(LogLevel level);

// Receives each finished line (prefix included, no newline). The default writes to stderr.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Names the program in every line; also re-reads SRUNWAY_LOG, the host and the rank from the environment
// (SLURMD_NODENAME or the hostname; SLURM_PROCID, PMIX_RANK, OMPI_COMM_WORLD_RANK or RANK). For programs' mains
// (the SPANK plugin logs through Slurm): it also makes std::terminate, an exception that nothing caught, one error
// line like every other, "internal error: uncaught std::out_of_range: ...", with the rank and host that srun's
// merged output needs, before it aborts as before (libstdc++'s two lines named neither).
void InitLogging(std::string_view program);
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// The launcher sets the rank once it knows it; -1 means unknown.
void SetLogRank(int rank);
void SetLogHost(std::string_view host);
// Replaces the sink; an empty function restores stderr.
void SetLogSink(LogSink sink);

bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (LogEnabled(level)) LogLine(level, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void LogError(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kError, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogWarn(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kWarn, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogInfo(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kInfo, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogDebug(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kDebug, format, std::forward<Args>(args)...);
}
template <typename... Args>
void LogTrace(fmt::format_string<Args...> format, Args&&... args) {
  Log(LogLevel::kTrace, format, std::forward<Args>(args)...);
}

// A program's output on stdout (reports, tables, JSON). fmt::print throws when a write fails, so a program whose
// output outgrew stdio's buffer on a full disk aborted (SIGABRT, exit 134), and one whose output was still in the
// buffer at exit lost it without a word and exited 0. Print never throws; FlushStdout says whether everything
// printed so far (through Print, printf or std::cout) arrived; ExitIfStdoutLost(code), called once from main,
// checks that at exit and, if not, prints one error line (`cannot write to stdout: No space left on device`) and
// ends the program with `code` instead (0: no longer, for a program that handles a lost stdout itself from then on).
void PrintText(std::string_view text);
template <typename... Args>
void Print(fmt::format_string<Args...> format, Args&&... args) {
  PrintText(fmt::format(format, std::forward<Args>(args)...));
}
Status FlushStdout();
void ExitIfStdoutLost(int code);

}  // namespace srunway::common
