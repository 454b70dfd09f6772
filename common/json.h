// JSON helpers over nlohmann-json: parsing with file:line:column errors, typed field access, atomic writes.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace srunway::common {

// Insertion-ordered, so what we write reads in the order we wrote it.
using Json = nlohmann::ordered_json;

// Keys sorted (std::map) instead of in the order written: for reading large objects. Json finds a key by a linear
// search, so parsing an object of n keys took n^2 / 2 string comparisons: Llama 3's tokenizer.json (128000 tokens)
// took 41 s to load, GPT-2's vocab.json (50257) 4 s.
using SortedJson = nlohmann::json;

// `source` names the text in errors: "metrics.jsonl:3:17: syntax error ...".
StatusOr<Json> ParseJson(std::string_view text, std::string_view source);
StatusOr<SortedJson> ParseSortedJson(std::string_view text, std::string_view source);
StatusOr<Json> ReadJsonFile(const std::filesystem::path& path);
// Written atomically (see WriteFileAtomic), ending in a newline.
Status WriteJsonFile(const std::filesystem::path& path, const Json& value, int indent = 2);

// `value` as the integer type T when it is an integer that T can hold: nlohmann's own get<int>() converts a
// float (1e30) or a too-large integer with a plain cast, which is undefined behaviour or a silent wrap. A float
// with no fraction (3.0) is taken. `what` names the value in the error.
template <std::integral T>
StatusOr<T> JsonInteger(const Json& value, std::string_view what) {
  constexpr auto kMin = std::numeric_limits<T>::min();
  constexpr auto kMax = std::numeric_limits<T>::max();
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v <= static_cast<uint64_t>(kMax)) return static_cast<T>(v);
  } else if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  } else if (value.is_number_float()) {
    // Both bounds as doubles: kMax + 1 is a power of two, exact; kMin is exact too.
    const double v = value.get<double>();
    if (std::isfinite(v) && v == std::trunc(v) && v >= static_cast<double>(kMin) &&
        v < 2.0 * static_cast<double>(kMax / 2 + 1)) {
      return static_cast<T>(v);
    }
  } else {
    return InvalidArgument("{} has the wrong type ({})", what, value.type_name());
  }
  return InvalidArgument("{}={} is not an integer in [{}, {}]", what, value.dump(), kMin, kMax);
}

// The field `key` of `object` as a T; errors name `where` and the key and say what type was found. Integers
// are range-checked as JsonInteger does.
template <typename T>
StatusOr<T> JsonField(const Json& object, std::string_view key, std::string_view where) {
  if (!object.is_object()) return InvalidArgument("{}: expected an object, got {}", where, object.type_name());
  auto it = object.find(key);
  if (it == object.end()) return NotFound("{}: missing key '{}'", where, key);
  if constexpr (std::integral<T> && !std::same_as<T, bool>) {
    auto value = JsonInteger<T>(*it, fmt::format("key '{}'", key));
    if (!value.ok()) return value.status().WithContext(where);
    return value;
  } else if constexpr (std::floating_point<T>) {
    // A double past float's range converted to float is undefined behaviour, not inf.
    if (!it->is_number()) return InvalidArgument("{}: key '{}' has the wrong type ({})", where, key, it->type_name());
    const double v = it->template get<double>();
    if (!std::isfinite(v) || v > std::numeric_limits<T>::max() || v < std::numeric_limits<T>::lowest()) {
      return InvalidArgument("{}: key '{}'={} is out of range", where, key, it->dump());
    }
    return static_cast<T>(v);
  } else {
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      return InvalidArgument("{}: key '{}' has the wrong type ({})", where, key, it->type_name());
    }
  }
}

// The field `key` of `object` as an integer type T, or `fallback` when there is no such key.
template <std::integral T>
StatusOr<T> JsonFieldOr(const Json& object, std::string_view key, T fallback, std::string_view where) {
  if (object.is_object() && !object.contains(key)) return fallback;
  return JsonField<T>(object, key, where);
}

}  // namespace srunway::common
