// The nccl-tests output parser. It takes logs as admins have them: lines tagged by `srun -l` ("0: ") or by
// mpirun's --tag-output ("[1,0]<stdout>:"), with or without the leading '#', NCCL/MPI messages in between,
// device lines of both formats ([0x1b] before nccl-tests 2.14, [0000:1b:00] after), tables with or without the
// root column (older releases), #wrong as N/A or in %g form, the "error" column of releases before #wrong, and
// runs cut short.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/parse.h"
#include "nccl-tests-wrapper/results.h"

namespace srunway::nccltests {
namespace {

std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) tokens.push_back(line.substr(start, i - start));
  }
  return tokens;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A number as nccl-tests prints it ("12.5", "2.68435e+08", "-1"); nullopt for "N/A"; false when neither.
bool ParseCell(std::string_view text, std::optional<double>& out) {
  if (text == "N/A") {
    out.reset();
    return true;
  }
  std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0') return false;
  out = value;
  return true;
}

// Removes "0: " (srun -l) and "[1,0]<stdout>:" (mpirun --tag-output) from the front, as often as they occur.
std::string_view StripTags(std::string_view line) {
  while (true) {
    size_t i = 0;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i < line.size() && line[i] == '[') {
      const size_t close = line.find("]<", i);
      const size_t colon = close == std::string_view::npos ? close : line.find(">:", close);
      if (colon != std::string_view::npos && colon < i + 40) {
        line.remove_prefix(colon + 2);
        continue;
      }
    }
    size_t j = i;
    while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i && j + 1 < line.size() && line[j] == ':' && line[j + 1] == ' ') {
      line.remove_prefix(j + 2);
      continue;
    }
    return line;
  }
}

// A number cell that nccl-tests prints as a count or a measurement: N/A, or a finite value in [0, 2^63) (a
// #wrong count that large is still a count; anything past it, negative, inf or nan is no measurement).
bool ParseMeasure(std::string_view text, std::optional<double>& out) {
  if (!ParseCell(text, out)) return false;
  return !out || (std::isfinite(*out) && *out >= 0 && *out < 9.2e18);
}

enum class RowShape { kNotARow, kRow, kMalformed };

// A result row. A line with a row's shape whose numbers are out of range (a root past int, a size past int64) is
// malformed: `why` says which cell, and the caller reports it instead of taking or skipping it silently.
RowShape ParseRow(const std::vector<std::string_view>& t, Row& row, std::string& why) {
  // size count type redop [root] time algbw busbw wrong time algbw busbw wrong
  if ((t.size() != 13 && t.size() != 12) || !AllDigits(t[0]) || !AllDigits(t[1])) return RowShape::kNotARow;
  if (std::isdigit(static_cast<unsigned char>(t[2][0])) || std::isdigit(static_cast<unsigned char>(t[3][0]))) {
    return RowShape::kNotARow;
  }
  auto malformed = [&](const common::Status& status) {
    why = status.message();
    return RowShape::kMalformed;
  };
  auto size = common::ParseInt(t[0], "size", 0, INT64_MAX);
  if (!size.ok()) return malformed(size.status());
  auto count = common::ParseInt(t[1], "count", 0, INT64_MAX);
  if (!count.ok()) return malformed(count.status());
  row.size_bytes = *size;
  row.count = *count;
  row.type = t[2];
  row.redop = t[3];
  size_t i = 4;
  if (t.size() == 13) {
    // nccl-tests prints -1 where a collective has no root.
    if (!AllDigits(t[4].starts_with('-') ? t[4].substr(1) : t[4])) return RowShape::kNotARow;
    auto root = common::ParseInt(t[4], "root", -1, INT32_MAX);
    if (!root.ok()) return malformed(root.status());
    row.root = static_cast<int>(*root);
    i = 5;
  }
  static constexpr std::string_view kCells[] = {"time", "algbw", "busbw", "#wrong"};
  for (Half* half : {&row.out_of_place, &row.in_place}) {
    std::optional<double>* cells[] = {&half->time_us, &half->algbw_gbps, &half->busbw_gbps, &half->wrong};
    for (size_t c = 0; c < 4; ++c, ++i) {
      if (!ParseCell(t[i], *cells[c])) return RowShape::kNotARow;
      if (!ParseMeasure(t[i], *cells[c])) {
        why = fmt::format("{}={} is not a finite value in [0, 2^63)", kCells[c], t[i]);
        return RowShape::kMalformed;
      }
    }
  }
  return RowShape::kRow;
}

void ParseConfig(std::string_view line, Run& run) {
  std::string key;
  for (std::string_view token : Tokens(line)) {
    const bool value = std::isdigit(static_cast<unsigned char>(token[0])) || token[0] == '-';
    if (value && !key.empty()) {
      run.config[key] = std::string(token);
      key.clear();
    } else if (!value) {
      key += key.empty() ? std::string(token) : " " + std::string(token);
    }
  }
}

bool ParseDevice(const std::vector<std::string_view>& t, Device& d) {
  // Rank R [Group G] Pid P on HOST device D [BUS] NAME...
  size_t i = 0;
  auto expect = [&](std::string_view word) { return i < t.size() && t[i++] == word; };
  auto number = [&](auto& out) {
    using Field = std::remove_reference_t<decltype(out)>;
    if (i >= t.size()) return false;
    auto value = common::ParseInt(t[i++], "device field", 0, std::numeric_limits<Field>::max());
    if (value.ok()) out = static_cast<Field>(*value);
    return value.ok();
  };
  if (!expect("Rank") || !number(d.rank)) return false;
  if (i < t.size() && t[i] == "Group") {
    ++i;
    if (!number(d.group)) return false;
  }
  if (!expect("Pid") || !number(d.pid) || !expect("on") || i >= t.size()) return false;
  d.host = t[i++];
  if (!expect("device") || !number(d.device) || i >= t.size()) return false;
  std::string_view bus = t[i++];
  if (bus.size() < 2 || bus.front() != '[' || bus.back() != ']') return false;
  d.bus_id = bus.substr(1, bus.size() - 2);
  for (; i < t.size(); ++i) d.name += (d.name.empty() ? "" : " ") + std::string(t[i]);
  return true;
}

bool IsFailure(std::string_view line) {
  static constexpr std::string_view kMarks[] = {
      "NCCL failure", "NCCL error", "CUDA failure", "Test failure", "MPI_ABORT", "Aborted",
      "Segmentation fault", "srun: error:", "unhandled system error", "internal error"};
  for (std::string_view mark : kMarks) {
    if (line.find(mark) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

std::vector<Run> ParseLog(std::string_view text) {
  std::vector<Run> runs;
  Run current;
  bool started = false;
  auto begin_run = [&] {
    if (started && (!current.rows.empty() || current.complete)) {
      runs.push_back(std::move(current));
      current = Run();
    }
    started = true;
  };
  std::string pending_collective, pending_version, pending_comm, pending_nccl;
  // Releases before #wrong (2.x, e.g. with NCCL 2.8) print the largest error of each row in an "error" column:
  // a magnitude (5e-07), not a count; their correctness is the "Out of bounds values" footer.
  bool error_column = false;
  size_t pos = 0, line_number = 0;
  while (pos <= text.size()) {
    ++line_number;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    std::string_view line = common::Trim(StripTags(raw));
    const bool commented = !line.empty() && line[0] == '#';
    if (commented) line = common::Trim(line.substr(1));
    if (line.empty()) continue;

    if (line.starts_with("nccl-tests version")) {
      auto t = Tokens(line);
      pending_version = t.size() > 2 ? std::string(t[2]) : "";
      // NVIDIA's binaries: "nccl-headers=22105 nccl-library=22105"; they always run on NCCL.
      pending_comm = "nccl";
      pending_nccl.clear();
      for (std::string_view token : t) {
        if (!token.starts_with("nccl-library=")) continue;
        auto code = common::ParseInt(token.substr(13), "nccl-library", 0, 1'000'000);
        if (code.ok()) pending_nccl = NcclVersionName(static_cast<int>(*code));
      }
      continue;
    }
    if (line.starts_with("Communicator:")) {  // collbench: "nccl, NCCL 2.27.3" or "mpi (host memory)"
      auto t = Tokens(line.substr(13));
      pending_comm = t.empty() ? "" : std::string(common::Trim(t[0]));
      if (pending_comm.ends_with(',')) pending_comm.pop_back();
      pending_nccl = t.size() > 2 && t[1] == "NCCL" ? std::string(t[2]) : "";
      continue;
    }
    if (line.starts_with("Collective test starting:")) {
      std::string name(common::Trim(line.substr(25)));
      if (name.ends_with("_perf")) name.resize(name.size() - 5);
      pending_collective = name;
      continue;
    }
    if (line.starts_with("Collective test concluded")) continue;
    if (line.starts_with("nThread ")) {
      begin_run();
      ParseConfig(line, current);
      if (!pending_collective.empty()) current.collective = std::move(pending_collective);
      if (!pending_version.empty()) current.version = std::move(pending_version);
      if (!pending_comm.empty()) current.comm = std::move(pending_comm);
      if (!pending_nccl.empty()) current.nccl_version = std::move(pending_nccl);
      pending_collective.clear();
      pending_version.clear();
      pending_comm.clear();
      pending_nccl.clear();
      continue;
    }
    const std::vector<std::string_view> t = Tokens(line);
    if (line.starts_with("size ") && line.find("busbw") != std::string_view::npos) {
      error_column = std::find(t.begin(), t.end(), "error") != t.end();
      continue;
    }
    if (line.starts_with("Rank ")) {
      Device device;
      if (ParseDevice(t, device)) {
        if (!started) begin_run();
        current.devices.push_back(device);
        continue;
      }
    }
    if (line.starts_with("Out of bounds values")) {
      const size_t colon = line.find(':');
      auto v = Tokens(line.substr(colon == std::string_view::npos ? line.size() : colon + 1));
      if (!v.empty() && AllDigits(v[0])) {
        auto count = common::ParseInt(v[0], "out of bounds values", 0, INT64_MAX);
        if (count.ok()) {
          current.out_of_bounds = *count;
        } else {
          current.malformed.push_back(fmt::format("line {}: {}", line_number, count.status().message()));
        }
      }
      current.out_of_bounds_failed = v.size() > 1 && v[1] == "FAILED";
      continue;
    }
    if (line.starts_with("Avg bus bandwidth")) {
      const size_t colon = line.find(':');
      auto v = Tokens(line.substr(colon == std::string_view::npos ? line.size() : colon + 1));
      std::optional<double> value;
      if (!v.empty() && ParseCell(v[0], value)) current.avg_busbw_gbps = value;
      if (v.size() > 1) current.avg_ok = v[1] == "OK";
      current.complete = true;
      continue;
    }
    Row row;
    std::string why;
    if (RowShape shape = ParseRow(t, row, why); shape != RowShape::kNotARow) {
      if (!started) begin_run();
      if (shape == RowShape::kMalformed) {
        current.malformed.push_back(fmt::format("line {}: {}", line_number, why));
        continue;
      }
      if (error_column) row.out_of_place.wrong = row.in_place.wrong = std::nullopt;
      current.rows.push_back(row);
      continue;
    }
    if (!commented && IsFailure(line)) {
      if (!started) begin_run();
      current.errors.emplace_back(line);
    }
  }
  if (started) runs.push_back(std::move(current));
  return runs;
}

common::StatusOr<std::vector<Run>> ParseAny(std::string_view text, std::string_view where) {
  std::string_view trimmed = common::Trim(text);
  if (!trimmed.empty() && trimmed[0] == '{') {
    SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ParseJson(trimmed, where));
    SRUNWAY_ASSIGN_OR_RETURN(Run run, RunFromJson(json, where));
    return std::vector<Run>{std::move(run)};
  }
  std::vector<Run> runs = ParseLog(text);
  if (runs.empty()) return common::InvalidArgument("{}: no nccl-tests output found", where);
  return runs;
}

}  // namespace srunway::nccltests
