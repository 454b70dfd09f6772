// Whole-file reads and atomic writes: a reader sees the old file or the new one, never half of either.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::common {

StatusOr<std::string> ReadFile(const std::filesystem::path& path);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR; `what` names the target in the error.
Status WriteAll(int fd, std::string_view bytes, std::string_view what);

// Writes to a temporary name in the same directory, fsyncs, renames over `path` and fsyncs the directory.
// On any failure (a full disk included) the temporary is removed and `path` is untouched.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view contents);

}  // namespace srunway::common
