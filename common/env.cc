// Environment helpers: typed reads with errors that name the variable, and checks for values we export.
#include "common/env.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>

#include "common/parse.h"

namespace srunway::common {

std::optional<std::string> GetEnv(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string GetEnvOr(std::string_view name, std::string_view fallback) {
  return GetEnv(name).value_or(std::string(fallback));
}

std::optional<std::string> HostName() {
  std::array<char, 256> name{};  // one byte more than a name may have: always terminated
  if (::gethostname(name.data(), name.size() - 1) != 0) return std::nullopt;
  return std::string(name.data());
}

StatusOr<int64_t> GetEnvInt(std::string_view name, int64_t min, int64_t max) {
  auto text = GetEnv(name);
  if (!text) return NotFound("environment variable {} is not set", name);
  return ParseInt(*text, name, min, max);
}

StatusOr<bool> GetEnvBool(std::string_view name) {
  auto text = GetEnv(name);
  if (!text) return NotFound("environment variable {} is not set", name);
  return ParseBool(*text, name);
}

Status ValidateEnvAssignment(std::string_view name, std::string_view value) {
  bool name_ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name.front()));
  for (char c : name) name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!name_ok) return InvalidArgument("'{}' is not a valid environment variable name", name);
  for (char c : value) {
    if (c == '\0' || c == '\n' || c == '\r') {
      return InvalidArgument("value of {} contains a NUL or newline character", name);
    }
  }
  return Status::Ok();
}

}  // namespace srunway::common
