// Status and StatusOr<T>: how every srunway library reports failure across its boundary, without exceptions.
#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace srunway::common {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

Status ErrnoStatus(int error_number, std::string_view what) {
  StatusCode code = StatusCode::kInternal;
  switch (error_number) {
    case ENOENT: case ENOTDIR: code = StatusCode::kNotFound; break;
    case EACCES: case EPERM: case EROFS: code = StatusCode::kPermissionDenied; break;
    case ENOSPC: case EDQUOT: case ENOMEM: case EMFILE: case ENFILE: code = StatusCode::kResourceExhausted; break;
    case ETIMEDOUT: code = StatusCode::kDeadlineExceeded; break;
    case ECONNREFUSED: case ECONNRESET: case EHOSTUNREACH: case ENETUNREACH: case EPIPE:
      code = StatusCode::kUnavailable; break;
    case EIO: code = StatusCode::kDataLoss; break;
    case EINVAL: case ENAMETOOLONG: code = StatusCode::kInvalidArgument; break;
    case EEXIST: case EBUSY: case EISDIR: code = StatusCode::kFailedPrecondition; break;
    case EINTR: case ECANCELED: code = StatusCode::kAborted; break;
    default: break;
  }
  return Status(code, fmt::format("{}: {}", what, std::strerror(error_number)));
}

}  // namespace srunway::common
