// Environment helpers: typed reads with errors that name the variable, and checks for values we export.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::common {

std::optional<std::string> GetEnv(std::string_view name);
std::string GetEnvOr(std::string_view name, std::string_view fallback);

// This machine's name as the kernel has it (gethostname); nullopt where it cannot be read.
std::optional<std::string> HostName();

// NotFound when unset; InvalidArgument naming the variable when malformed.
StatusOr<int64_t> GetEnvInt(std::string_view name, int64_t min = INT64_MIN, int64_t max = INT64_MAX);
StatusOr<bool> GetEnvBool(std::string_view name);

// A variable we put into someone's environment must have a shell-safe name and a value without NUL or newline.
Status ValidateEnvAssignment(std::string_view name, std::string_view value);

}  // namespace srunway::common
