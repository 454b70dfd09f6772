// Text and JSON forms of nccl-tests results.
#include "nccl-tests-wrapper/results.h"

#include <fmt/format.h>

#include <cmath>

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
  half.time_us = OptionalNumber(json, "time");
  half.algbw_gbps = OptionalNumber(json, "alg_bw");
  half.busbw_gbps = OptionalNumber(json, "bus_bw");
  half.wrong = OptionalNumber(json, "nwrong");
  return half;
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

std::string FormatHeader(const Run& run) {
  std::string out;
  if (!run.version.empty()) out += fmt::format("# nccl-tests version {}\n", run.version);
  if (!run.collective.empty()) out += fmt::format("# Collective test starting: {}_perf\n", run.collective);
  std::string config;
  for (const char* key : {"nThread", "nGpus", "minBytes", "maxBytes", "step:", "warmup iters:", "iters:",
                          "agg iters:", "validation:", "graph:"}) {
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
  common::Json json;
  json["collective"] = run.collective;
  if (!run.version.empty()) json["version"] = run.version;
  json["config"] = run.config;
  json["devices"] = common::Json::array();
  for (const Device& d : run.devices) {
    json["devices"].push_back({{"rank", d.rank}, {"group", d.group}, {"pid", d.pid}, {"host", d.host},
                               {"device", d.device}, {"bus_id", d.bus_id}, {"name", d.name}});
  }
  json["results"] = common::Json::array();
  for (const Row& r : run.rows) {
    json["results"].push_back({{"size", r.size_bytes}, {"count", r.count}, {"type", r.type}, {"redop", r.redop},
                               {"root", r.root}, {"out_of_place", HalfJson(r.out_of_place)},
                               {"in_place", HalfJson(r.in_place)}});
  }
  json["out_of_bounds"] = {{"count", run.out_of_bounds ? common::Json(*run.out_of_bounds) : common::Json(nullptr)},
                           {"ok", !run.out_of_bounds_failed}};
  json["average_bus_bandwidth"] = {
      {"value", run.avg_busbw_gbps ? common::Json(*run.avg_busbw_gbps) : common::Json(nullptr)},
      {"ok", run.avg_ok ? common::Json(*run.avg_ok) : common::Json(nullptr)}};
  json["errors"] = run.errors;
  json["complete"] = run.complete;
  return json;
}

common::StatusOr<Run> RunFromJson(const common::Json& json, std::string_view where) {
  if (!json.is_object()) return common::InvalidArgument("{}: expected a JSON object", where);
  Run run;
  run.collective = json.value("collective", "");
  run.version = json.value("version", "");
  if (auto config = json.find("config"); config != json.end() && config->is_object()) {
    for (const auto& [key, value] : config->items()) run.config[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  if (auto devices = json.find("devices"); devices != json.end() && devices->is_array()) {
    for (const auto& d : *devices) {
      if (!d.is_object()) continue;
      run.devices.push_back({d.value("rank", 0), d.value("group", 0), d.value("pid", int64_t{0}), d.value("host", ""),
                             d.value("device", 0), d.value("bus_id", ""), d.value("name", "")});
    }
  }
  auto results = json.find("results");
  if (results == json.end() || !results->is_array()) return common::InvalidArgument("{}: no \"results\" array", where);
  for (const auto& r : *results) {
    if (!r.is_object() || !r.contains("size")) return common::InvalidArgument("{}: a result without \"size\"", where);
    Row row;
    row.size_bytes = r.value("size", int64_t{0});
    row.count = r.value("count", int64_t{0});
    row.type = r.value("type", "");
    row.redop = r.value("redop", "");
    row.root = r.value("root", -1);
    row.out_of_place = HalfFromJson(r.value("out_of_place", common::Json::object()));
    row.in_place = HalfFromJson(r.value("in_place", common::Json::object()));
    run.rows.push_back(row);
  }
  if (auto oob = json.find("out_of_bounds"); oob != json.end()) {
    if (oob->is_number_integer()) {
      run.out_of_bounds = oob->get<int64_t>();
    } else if (oob->is_object()) {
      if (auto count = oob->find("count"); count != oob->end() && count->is_number_integer()) run.out_of_bounds = count->get<int64_t>();
      run.out_of_bounds_failed = !oob->value("ok", true);
    }
  }
  if (auto avg = json.find("average_bus_bandwidth"); avg != json.end()) {
    if (avg->is_number()) {
      run.avg_busbw_gbps = avg->get<double>();
    } else if (avg->is_object()) {
      run.avg_busbw_gbps = OptionalNumber(*avg, "value");
      if (auto ok = avg->find("ok"); ok != avg->end() && ok->is_boolean()) run.avg_ok = ok->get<bool>();
    }
  }
  if (auto errors = json.find("errors"); errors != json.end() && errors->is_array()) {
    for (const auto& e : *errors) run.errors.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  }
  run.complete = json.value("complete", run.avg_busbw_gbps.has_value());
  return run;
}

}  // namespace srunway::nccltests
