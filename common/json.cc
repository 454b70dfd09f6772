// JSON helpers over nlohmann-json: parsing with file:line:column errors, typed field access, atomic writes.
#include "common/json.h"

#include <algorithm>

#include "common/fs.h"

namespace srunway::common {

namespace {

template <typename J>
StatusOr<J> Parse(std::string_view text, std::string_view source) {
  try {
    return J::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& error) {
    // error.byte is 1-based and may point one past the end of the text.
    size_t offset = std::min(error.byte > 0 ? error.byte - 1 : 0, text.size());
    std::string_view before = text.substr(0, offset);
    size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
    size_t line_start = before.rfind('\n');
    size_t column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    std::string message = error.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 2: "; keep what follows.
    if (size_t colon = message.find(": "); colon != std::string::npos) message = message.substr(colon + 2);
    return InvalidArgument("{}:{}:{}: {}", source, line, column, message);
  } catch (const nlohmann::json::exception& error) {
    return InvalidArgument("{}: {}", source, error.what());
  }
}

}  // namespace

StatusOr<Json> ParseJson(std::string_view text, std::string_view source) { return Parse<Json>(text, source); }

StatusOr<SortedJson> ParseSortedJson(std::string_view text, std::string_view source) {
  return Parse<SortedJson>(text, source);
}

StatusOr<Json> ReadJsonFile(const std::filesystem::path& path) {
  SRUNWAY_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseJson(text, path.string());
}

Status WriteJsonFile(const std::filesystem::path& path, const Json& value, int indent) {
  std::string text;
  try {
    text = value.dump(indent);
  } catch (const nlohmann::json::exception& error) {  // invalid UTF-8 in a string
    return InvalidArgument("{}: cannot serialise: {}", path.string(), error.what());
  }
  text += '\n';
  return WriteFileAtomic(path, text);
}

}  // namespace srunway::common
