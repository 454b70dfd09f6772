// Strict parsers for the numbers, booleans and lists that arrive as text in options, files and the environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::common {

// The whole of `text` must be a base-10 integer in [min, max]; `what` names the value in the error.
StatusOr<int64_t> ParseInt(std::string_view text, std::string_view what, int64_t min = INT64_MIN,
                           int64_t max = INT64_MAX);

// The whole of `text` must be a finite decimal number (1.5, -2, 3e9) in [min, max].
StatusOr<double> ParseDouble(std::string_view text, std::string_view what, double min = -1e308, double max = 1e308);

// A number of seconds given by a user, as a timeout: whole milliseconds rounded up (a positive one is never 0),
// at most 1e12 ms (about 31 years), so that it converts, and adds to a clock, without overflowing (1e308 s was
// undefined behaviour); NaN and anything not positive give 0.
std::chrono::milliseconds TimeoutMillis(double seconds);

// yes/no, true/false, on/off, 1/0, case-insensitively.
StatusOr<bool> ParseBool(std::string_view text, std::string_view what);

std::string_view Trim(std::string_view text);

// `text` as an error line may quote it: control characters escaped (\n, \t, \x01), so that it stays one line,
// and cut after `most` bytes (at a character's start), saying how long it was. Text from files and the
// environment can hold a newline, or be a megabyte long.
std::string Printable(std::string_view text, size_t most = 64);

// A size for a log line: "512 B", "17.1 KiB", "1.7 MiB", "61.2 GiB", "3.0 TiB" (binary units).
std::string ByteSize(uintmax_t bytes);

// Splits on `separator`; keeps empty fields, so "a,,b" gives three.
std::vector<std::string_view> Split(std::string_view text, char separator);

}  // namespace srunway::common
