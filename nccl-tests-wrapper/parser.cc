// The nccl-tests output parser. It takes logs as admins have them: lines tagged by `srun -l` ("0: ") or by
// mpirun's --tag-output ("[1,0]<stdout>:"), with or without the leading '#', NCCL/MPI messages in between,
// device lines of both formats ([0x1b] before nccl-tests 2.14, [0000:1b:00] after), tables with or without the
// root column (older releases), #wrong as N/A or in %g form, the "error" column of releases before #wrong, and
// runs cut short.
#include <algorithm>
#include <cctype>
#include <cstdlib>

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

bool ParseRow(const std::vector<std::string_view>& t, Row& row) {
  // size count type redop [root] time algbw busbw wrong time algbw busbw wrong
  if ((t.size() != 13 && t.size() != 12) || !AllDigits(t[0]) || !AllDigits(t[1])) return false;
  if (std::isdigit(static_cast<unsigned char>(t[2][0])) || std::isdigit(static_cast<unsigned char>(t[3][0]))) return false;
  size_t i = 4;
  if (t.size() == 13) {
    std::optional<double> root;
    if (!ParseCell(t[4], root) || !root) return false;
    row.root = static_cast<int>(*root);
    i = 5;
  }
  row.size_bytes = std::strtoll(std::string(t[0]).c_str(), nullptr, 10);
  row.count = std::strtoll(std::string(t[1]).c_str(), nullptr, 10);
  row.type = t[2];
  row.redop = t[3];
  for (Half* half : {&row.out_of_place, &row.in_place}) {
    if (!ParseCell(t[i], half->time_us) || !ParseCell(t[i + 1], half->algbw_gbps) ||
        !ParseCell(t[i + 2], half->busbw_gbps) || !ParseCell(t[i + 3], half->wrong)) {
      return false;
    }
    i += 4;
  }
  return true;
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
    if (i >= t.size() || !AllDigits(t[i])) return false;
    out = static_cast<std::remove_reference_t<decltype(out)>>(std::strtoll(std::string(t[i++]).c_str(), nullptr, 10));
    return true;
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
  std::string pending_collective, pending_version;
  // Releases before #wrong (2.x, e.g. with NCCL 2.8) print the largest error of each row in an "error" column:
  // a magnitude (5e-07), not a count; their correctness is the "Out of bounds values" footer.
  bool error_column = false;
  size_t pos = 0;
  while (pos <= text.size()) {
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
      pending_collective.clear();
      pending_version.clear();
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
      if (!v.empty() && AllDigits(v[0])) current.out_of_bounds = std::strtoll(std::string(v[0]).c_str(), nullptr, 10);
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
    if (ParseRow(t, row)) {
      if (!started) begin_run();
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
