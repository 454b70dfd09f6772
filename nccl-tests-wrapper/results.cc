// Text and JSON forms of nccl-tests results.
#include "nccl-tests-wrapper/results.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/parse.h"

namespace srunway::nccltests {
namespace {

// nccl-tests' time column: %7.2f, or fewer decimals once the value is large.
std::string FormatTime(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string FormatHalf(const Half& half) {
  const std::string wrong = half.wrong ? fmt::format("{:g}", *half.wrong) : "N/A";
  if (!half.time_us) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", wrong);
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>6}", FormatTime(*half.time_us), half.algbw_gbps.value_or(0),
                     half.busbw_gbps.value_or(0), wrong);
}

common::Json HalfJson(const Half& half) {
  auto number = [](const std::optional<double>& v) { return v ? common::Json(*v) : common::Json(nullptr); };
  return {{"time", number(half.time_us)}, {"alg_bw", number(half.algbw_gbps)},
          {"bus_bw", number(half.busbw_gbps)}, {"nwrong", number(half.wrong)}};
}

std::optional<double> OptionalNumber(const common::Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Half HalfFromJson(const common::Json& json) {
  Half half;
  if (!json.is_object()) return half;
  half.time_us = OptionalNumber(json, json.contains("cpu_time") ? "cpu_time" : "time");
  half.algbw_gbps = OptionalNumber(json, "alg_bw");
  half.busbw_gbps = OptionalNumber(json, "bus_bw");
  half.wrong = OptionalNumber(json, "nwrong");
  return half;
}

// The header line's keys as the text prints them and as nccl-tests' JSON config names them. "step:" has no one
// name (nullptr): the JSON says step_factor or step_bytes by the "(factor)"/"(bytes)" suffix of its value. unalign
// is printed by newer nccl-tests but not in its JSON.
constexpr std::pair<const char*, const char*> kConfigKeys[] = {
    {"nThread", "nthreads"},       {"nGpus", "ngpus"},         {"minBytes", "minimum_bytes"},
    {"maxBytes", "maximum_bytes"}, {"step:", nullptr},         {"warmup iters:", "warmup_iters"},
    {"iters:", "iterations"},      {"agg iters:", "aggregated_iterations"},
    {"validation:", "validation"}, {"graph:", "graph"},        {"unalign:", "unalign"}};

// A header value as JSON: an integer where it is one, else the text.
common::Json ConfigNumber(const std::string& text) {
  auto number = common::ParseInt(text, "config", INT64_MIN, INT64_MAX);
  return number.ok() ? common::Json(*number) : common::Json(text);
}

std::string ConfigText(const common::Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// nccl-tests writes booleans as the strings "true"/"false" (and "unchecked"); JSON booleans are taken too.
std::optional<bool> Truth(const common::Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_boolean()) return it->get<bool>();
  if (*it == "true") return true;
  if (*it == "false") return false;
  return std::nullopt;
}

}  // namespace

double Run::MeanBusbw() const {
  double sum = 0;
  int n = 0;
  for (const Row& row : rows) {
    for (const Half* half : {&row.out_of_place, &row.in_place}) {
      if (half->busbw_gbps) {
        sum += *half->busbw_gbps;
        ++n;
      }
    }
  }
  return n == 0 ? 0.0 : sum / n;
}

std::string NcclVersionName(int code) {
  if (code <= 0) return "";
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

std::string FormatHeader(const Run& run) {
  std::string out;
  if (!run.version.empty()) out += fmt::format("# nccl-tests version {}\n", run.version);
  if (!run.collective.empty()) out += fmt::format("# Collective test starting: {}_perf\n", run.collective);
  if (!run.comm.empty()) {
    out += fmt::format("# Communicator: {}{}\n", run.comm,
                       run.nccl_version.empty() ? " (host memory)" : ", NCCL " + run.nccl_version);
  }
  std::string config;
  for (const auto& [key, json_key] : kConfigKeys) {
    auto it = run.config.find(key);
    if (it != run.config.end()) config += fmt::format("{}{} {}", config.empty() ? "" : " ", key, it->second);
  }
  out += fmt::format("# {}\n#\n# Using devices\n", config);
  for (const Device& d : run.devices) {
    out += fmt::format("#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {:2} [{}] {}\n", d.rank, d.group, d.pid,
                       d.host, d.device, d.bus_id, d.name);
  }
  out += "#\n";
  out += "#                                                              out-of-place                       in-place          \n";
  out += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  out += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
  return out;
}

std::string FormatRow(const Row& row) {
  return fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", row.size_bytes, row.count, row.type, row.redop, row.root) +
         FormatHalf(row.out_of_place) + FormatHalf(row.in_place) + "\n";
}

std::string FormatFooter(const Run& run) {
  std::string out = fmt::format("# Out of bounds values : {} {}\n", run.out_of_bounds.value_or(0),
                                run.out_of_bounds_failed ? "FAILED" : "OK");
  out += fmt::format("# Avg bus bandwidth    : {:g} {}\n", run.avg_busbw_gbps.value_or(run.MeanBusbw()),
                     run.avg_ok ? (*run.avg_ok ? "OK" : "FAILED") : "");
  out += "#\n";
  if (!run.collective.empty()) out += fmt::format("# Collective test concluded: {}_perf\n", run.collective);
  return out;
}

common::Json ToJson(const Run& run) {
  // nccl-tests' -J layout (src/util.cu): config holds the devices; root is the "%6i" text; booleans are the
  // strings "true"/"false"; average_bus_bandwidth.okay is "unchecked" without NCCL_TESTS_MIN_BW.
  common::Json config = common::Json::object();
  for (const auto& [text_key, json_key] : kConfigKeys) {
    auto it = run.config.find(text_key);
    if (it == run.config.end()) continue;
    if (json_key == nullptr) {
      const bool factor = it->second.ends_with("(factor)");
      config[factor ? "step_factor" : "step_bytes"] = ConfigNumber(it->second.substr(0, it->second.find('(')));
    } else {
      config[json_key] = ConfigNumber(it->second);
    }
  }
  config["devices"] = common::Json::array();
  for (const Device& d : run.devices) {
    config["devices"].push_back({{"rank", d.rank}, {"group", d.group}, {"pid", d.pid}, {"hostname", d.host},
                                 {"device", d.device}, {"device_hex", d.bus_id}, {"device_info", d.name}});
  }
  common::Json json = {{"version", 1}, {"config", config}, {"results", common::Json::array()}};
  auto iters = run.config.find("iters:");
  const common::Json actual_iterations = iters != run.config.end() ? ConfigNumber(iters->second) : common::Json();
  for (const Row& r : run.rows) {
    json["results"].push_back({{"size", r.size_bytes}, {"count", r.count}, {"type", r.type}, {"redop", r.redop},
                               {"root", fmt::format("{:6}", r.root)}, {"out_of_place", HalfJson(r.out_of_place)},
                               {"in_place", HalfJson(r.in_place)}, {"actual_iterations", actual_iterations},
                               {"experiment_name", ""}});
  }
  auto truth = [](bool value) { return value ? "true" : "false"; };
  json["out_of_bounds"] = {{"count", run.out_of_bounds.value_or(0)}, {"okay", truth(!run.out_of_bounds_failed)}};
  json["average_bus_bandwidth"] = {
      {"bandwidth", run.avg_busbw_gbps ? common::Json(*run.avg_busbw_gbps) : common::Json(nullptr)},
      {"okay", run.avg_ok ? truth(*run.avg_ok) : "unchecked"}};
  json["errors"] = run.errors;
  // Ours, beside nccl-tests' keys: which collective, the "# nccl-tests version" of a parsed log, and whether
  // the footer was there (a parsed log may be cut short; nccl-tests' own file is then not valid JSON at all).
  json["collective"] = run.collective;
  if (!run.version.empty()) json["nccl_tests_version"] = run.version;
  if (!run.comm.empty()) json["communicator"] = run.comm;
  if (!run.nccl_version.empty()) json["nccl_version_name"] = run.nccl_version;
  json["complete"] = run.complete;
  return json;
}

namespace {

common::StatusOr<Run> ReadRun(const common::Json& json, std::string_view where) {
  if (!json.is_object()) return common::InvalidArgument("{}: expected a JSON object", where);
  Run run;
  run.collective = json.value("collective", "");
  run.version = json.value("nccl_tests_version", "");
  run.comm = json.value("communicator", "");
  run.nccl_version = json.value("nccl_version_name", "");
  const common::Json no_config = common::Json::object();
  auto found = json.find("config");
  const common::Json& config = found != json.end() && found->is_object() ? *found : no_config;
  for (const auto& [text_key, json_key] : kConfigKeys) {
    if (json_key == nullptr) continue;
    if (auto it = config.find(json_key); it != config.end()) run.config[text_key] = ConfigText(*it);
  }
  if (auto it = config.find("step_factor"); it != config.end()) run.config["step:"] = ConfigText(*it) + "(factor)";
  if (auto it = config.find("step_bytes"); it != config.end()) run.config["step:"] = ConfigText(*it) + "(bytes)";
  if (auto devices = config.find("devices"); devices != config.end() && devices->is_array()) {
    for (const auto& d : *devices) {
      if (!d.is_object()) continue;
      Device device{0, 0, 0, d.value("hostname", ""), 0, d.value("device_hex", ""), d.value("device_info", "")};
      const std::string in = fmt::format("{}: a device", where);
      SRUNWAY_ASSIGN_OR_RETURN(device.rank, common::JsonFieldOr(d, "rank", 0, in));
      SRUNWAY_ASSIGN_OR_RETURN(device.group, common::JsonFieldOr(d, "group", 0, in));
      SRUNWAY_ASSIGN_OR_RETURN(device.pid, common::JsonFieldOr(d, "pid", int64_t{0}, in));
      SRUNWAY_ASSIGN_OR_RETURN(device.device, common::JsonFieldOr(d, "device", 0, in));
      run.devices.push_back(std::move(device));
    }
  }
  auto results = json.find("results");
  if (results == json.end() || !results->is_array()) return common::InvalidArgument("{}: no \"results\" array", where);
  for (const auto& r : *results) {
    if (!r.is_object() || !r.contains("size")) return common::InvalidArgument("{}: a result without \"size\"", where);
    Row row;
    const std::string in = fmt::format("{}: a result", where);
    SRUNWAY_ASSIGN_OR_RETURN(row.size_bytes, common::JsonFieldOr(r, "size", int64_t{0}, in));
    SRUNWAY_ASSIGN_OR_RETURN(row.count, common::JsonFieldOr(r, "count", int64_t{0}, in));
    if (row.size_bytes < 0 || row.count < 0) {
      return common::InvalidArgument("{}: size {} and count {} cannot be negative", in, row.size_bytes, row.count);
    }
    // One word each, as nccl-tests prints them: a "type" of "float\t" or "fl oat" cannot be a column of the text
    // form, which read it back as another type or as a row that is not one.
    for (const auto& [key, value] : {std::pair{"type", &row.type}, {"redop", &row.redop}}) {
      *value = r.value(key, "");
      if (std::any_of(value->begin(), value->end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; })) {
        return common::InvalidArgument("{}: size {}: {} '{}' is not one word", in, row.size_bytes, key,
                                       common::Printable(*value));
      }
    }
    if (auto root = r.find("root"); root != r.end()) {
      auto parsed = common::ParseInt(common::Trim(ConfigText(*root)), "root", INT32_MIN, INT32_MAX);
      if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}: size {}", where, row.size_bytes));
      row.root = static_cast<int>(*parsed);
    }
    row.out_of_place = HalfFromJson(r.value("out_of_place", common::Json::object()));
    row.in_place = HalfFromJson(r.value("in_place", common::Json::object()));
    run.rows.push_back(row);
  }
  if (auto oob = json.find("out_of_bounds"); oob != json.end() && oob->is_object()) {
    if (auto count = oob->find("count"); count != oob->end() && count->is_number()) {
      SRUNWAY_ASSIGN_OR_RETURN(run.out_of_bounds, common::JsonInteger<int64_t>(*count, "out_of_bounds count"));
    }
    run.out_of_bounds_failed = Truth(*oob, "okay") == false || run.out_of_bounds.value_or(0) > 0;
  }
  if (auto avg = json.find("average_bus_bandwidth"); avg != json.end() && avg->is_object()) {
    run.avg_busbw_gbps = OptionalNumber(*avg, "bandwidth");
    run.avg_ok = Truth(*avg, "okay");
  }
  if (auto errors = json.find("errors"); errors != json.end() && errors->is_array()) {
    // nccl-tests writes ncclGetLastError() there, "" when there was none.
    for (const auto& e : *errors) {
      std::string text = e.is_string() ? e.get<std::string>() : e.dump();
      if (!text.empty()) run.errors.push_back(std::move(text));
    }
  }
  run.complete = json.value("complete", run.avg_busbw_gbps.has_value());
  return run;
}

}  // namespace

common::StatusOr<Run> RunFromJson(const common::Json& json, std::string_view where) {
  try {
    return ReadRun(json, where);
  } catch (const nlohmann::json::exception& error) {  // a key of the wrong type, e.g. "rank": "0"
    return common::InvalidArgument("{}: {}", where, error.what());
  }
}

}  // namespace srunway::nccltests
