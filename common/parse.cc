// Strict parsers for the numbers, booleans and lists that arrive as text in options, files and the environment.
#include "common/parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <iterator>

namespace srunway::common {

StatusOr<int64_t> ParseInt(std::string_view text, std::string_view what, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error == std::errc::invalid_argument || ptr != end) {
    return InvalidArgument("{}='{}' is not an integer", what, Printable(text));
  }
  if (error == std::errc::result_out_of_range || value < min || value > max) {
    return InvalidArgument("{}={} is out of range [{}, {}]", what, Printable(text), min, max);
  }
  return value;
}

std::chrono::milliseconds TimeoutMillis(double seconds) {
  constexpr double kMostMillis = 1e12;
  if (!(seconds > 0)) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(std::ceil(seconds * 1000), kMostMillis)));
}

StatusOr<double> ParseDouble(std::string_view text, std::string_view what, double min, double max) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || !std::isfinite(value)) {
    return InvalidArgument("{}='{}' is not a number", what, Printable(text));
  }
  if (value < min || value > max) {
    return InvalidArgument("{}={} is out of range [{}, {}]", what, Printable(text), min, max);
  }
  return value;
}

StatusOr<bool> ParseBool(std::string_view text, std::string_view what) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "yes" || lower == "true" || lower == "on" || lower == "1") return true;
  if (lower == "no" || lower == "false" || lower == "off" || lower == "0") return false;
  return InvalidArgument("{}='{}' is not yes or no", what, Printable(text));
}

std::string_view Trim(std::string_view text) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::string ByteSize(uintmax_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double size = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  for (; size >= 1024 && unit + 1 < std::size(kUnits); ++unit) size /= 1024;
  return fmt::format("{:.1f} {}", size, kUnits[unit]);
}

std::string Printable(std::string_view text, size_t most) {
  size_t shown = std::min(text.size(), most);
  // Back to the start of a UTF-8 character (continuation bytes are 10xxxxxx).
  while (shown < text.size() && shown > 0 && (static_cast<unsigned char>(text[shown]) & 0xc0) == 0x80) --shown;
  std::string out;
  for (const char c : text.substr(0, shown)) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  if (shown < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    fields.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

}  // namespace srunway::common
