// JSON helpers over nlohmann-json: parsing with file:line:column errors, typed field access, atomic writes.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::common {

// Insertion-ordered, so what we write reads in the order we wrote it.
using Json = nlohmann::ordered_json;

// `source` names the text in errors: "metrics.jsonl:3:17: syntax error ...".
StatusOr<Json> ParseJson(std::string_view text, std::string_view source);
StatusOr<Json> ReadJsonFile(const std::filesystem::path& path);
// Written atomically (see WriteFileAtomic), ending in a newline.
Status WriteJsonFile(const std::filesystem::path& path, const Json& value, int indent = 2);

// The field `key` of `object` as a T; errors name `where` and the key and say what type was found.
template <typename T>
StatusOr<T> JsonField(const Json& object, std::string_view key, std::string_view where) {
  if (!object.is_object()) return InvalidArgument("{}: expected an object, got {}", where, object.type_name());
  auto it = object.find(key);
  if (it == object.end()) return NotFound("{}: missing key '{}'", where, key);
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    return InvalidArgument("{}: key '{}' has the wrong type ({})", where, key, it->type_name());
  }
}

}  // namespace srunway::common
