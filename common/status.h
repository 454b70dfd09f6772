// Status and StatusOr<T>: how every srunway library reports failure across its boundary, without exceptions.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace srunway::common {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is malformed
  kNotFound,          // a file, library, key or device is missing
  kFailedPrecondition,
  kPermissionDenied,
  kDeadlineExceeded,  // a timeout expired
  kUnavailable,       // a peer or service did not answer
  kAborted,           // another rank or the user ended the operation
  kDataLoss,          // a file is truncated or corrupt
  kResourceExhausted, // disk full, out of memory, too many hosts
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: bad range `3-1' in `n[3-1]'"; "ok" for success.
  std::string ToString() const;

  // Prefixes the message with where it happened ("slurm.conf: ..."), keeping the code.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
  static_assert(!std::is_same_v<std::remove_cvref_t<T>, Status>, "StatusOr<Status> is meaningless");

 public:
  StatusOr(const Status& status) : value_(status) { assert(!status.ok()); }  // NOLINT(runtime/explicit)
  StatusOr(Status&& status) : value_(std::move(status)) { assert(!std::get<Status>(value_).ok()); }  // NOLINT
  template <typename U = T>
    requires std::is_constructible_v<T, U&&> && (!std::is_same_v<std::remove_cvref_t<U>, Status>) &&
             (!std::is_same_v<std::remove_cvref_t<U>, StatusOr<T>>)
  StatusOr(U&& value) : value_(std::in_place_type<T>, std::forward<U>(value)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }

  const T& value() const& { return std::get<T>(value_); }
  T& value() & { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }

  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> value_;
};

template <typename... Args>
Status MakeStatus(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kInvalidArgument, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kNotFound, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status FailedPrecondition(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kFailedPrecondition, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status DataLoss(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kDataLoss, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status DeadlineExceeded(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kDeadlineExceeded, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status Unavailable(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kUnavailable, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status Aborted(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kAborted, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status ResourceExhausted(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kResourceExhausted, format, std::forward<Args>(args)...);
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> format, Args&&... args) {
  return MakeStatus(StatusCode::kInternal, format, std::forward<Args>(args)...);
}

// A Status from errno after a failed system call: "open /x: No such file or directory".
Status ErrnoStatus(int error_number, std::string_view what);

}  // namespace srunway::common

template <>
struct fmt::formatter<srunway::common::Status> : fmt::formatter<std::string> {
  auto format(const srunway::common::Status& status, format_context& ctx) const {
    return fmt::formatter<std::string>::format(status.ToString(), ctx);
  }
};

#define SRUNWAY_CONCAT_INNER(a, b) a##b
#define SRUNWAY_CONCAT(a, b) SRUNWAY_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define SRUNWAY_RETURN_IF_ERROR(expr)                          \
  do {                                                         \
    ::srunway::common::Status srunway_status_ = (expr);        \
    if (!srunway_status_.ok()) return srunway_status_;         \
  } while (false)

// `SRUNWAY_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define SRUNWAY_ASSIGN_OR_RETURN(lhs, expr) \
  SRUNWAY_ASSIGN_OR_RETURN_IMPL(SRUNWAY_CONCAT(srunway_statusor_, __LINE__), lhs, expr)
#define SRUNWAY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
