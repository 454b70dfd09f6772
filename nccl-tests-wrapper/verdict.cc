// Published figures and the verdict.
#include "nccl-tests-wrapper/verdict.h"

#include <fmt/format.h>

namespace srunway::nccltests {

const std::vector<PublishedFigure>& PublishedFigures() {
  static const std::string kA3Mega = "A3 Mega: 8 x H100 80GB per node, NVSwitch, 8 NICs with GPUDirect-TCPXO";
  static const std::string kIb = "8 x H100 SXM per node, NVSwitch, 8 x 400 Gb/s InfiniBand";
  static const std::string kH100 = "one node of 8 x H100 80GB HBM3 SXM over NVLink/NVSwitch";
  static const std::vector<PublishedFigure> kFigures = {
      {"a3mega", Collective::kAllGather, 2, 1 << 20, 188.0, kA3Mega,
       "the figure Google Cloud gives for A3 Mega with GPUDirect-TCPXO (all_gather_perf over 2 or more nodes: "
       "about 185-190 GB/s bus bandwidth per GPU at 8 GB), as quoted in srunway's design brief",
       "h100-single-node"},
      {"a3mega", Collective::kAllReduce, 2, 1 << 20, 338.0, kA3Mega,
       "a published A3 Mega all_reduce_perf log, 2 nodes x 8 H100, 8 GB: 338.8 GB/s "
       "(tests/fixtures/nccl-tests/a3mega-all-reduce-2node.log)",
       "h100-single-node"},
      {"ib-400g-h100", Collective::kAllReduce, 2, 2, 469.0, kIb,
       "published 2-node all_reduce_perf figures for 8 x H100 with 8 x 400 Gb/s InfiniBand per node (about "
       "469 GB/s), as quoted in srunway's issue tracker",
       "h100-single-node"},
      {"h100-single-node", Collective::kAllReduce, 1, 1, 460.0, kH100,
       "a published single-node all_reduce_perf log, 8 x H100 80GB HBM3 over NVLink/NVSwitch, 4 GB: 473.6 GB/s "
       "(476.5 in place), which an NVIDIA nccl-tests maintainer called the expected range for H100 "
       "(github.com/NVIDIA/nccl-tests/issues/290; tests/fixtures/nccl-tests/h100-all-reduce-1node-g8.log)",
       ""},
  };
  return kFigures;
}

std::optional<PublishedFigure> FindFigure(const std::string& reference, Collective collective, int nodes) {
  for (const PublishedFigure& figure : PublishedFigures()) {
    if (figure.reference == reference && figure.collective == collective && nodes >= figure.min_nodes &&
        nodes <= figure.max_nodes) {
      return figure;
    }
  }
  return std::nullopt;
}

std::optional<PublishedFigure> FindAloneFigure(const std::string& reference, Collective collective) {
  if (auto own = FindFigure(reference, collective, 1)) return own;
  for (const PublishedFigure& figure : PublishedFigures()) {
    if (figure.reference == reference && !figure.alone.empty()) return FindFigure(figure.alone, collective, 1);
  }
  return std::nullopt;
}

bool IsReference(const std::string& name) {
  for (const PublishedFigure& figure : PublishedFigures()) {
    if (figure.reference == name) return true;
  }
  return false;
}

Verdict Judge(const Run& run, std::optional<double> threshold_gbps) {
  Verdict v;
  v.threshold_gbps = threshold_gbps;
  v.mean_busbw_gbps = run.avg_busbw_gbps.value_or(run.MeanBusbw());
  // A row whose numbers cannot be what nccl-tests printed (a root past int, a size past int64): the log was
  // damaged or is not nccl-tests', and the rows around it cannot be trusted either.
  if (!run.malformed.empty()) {
    v.reason = fmt::format("malformed output ({} row{}): {}", run.malformed.size(),
                           run.malformed.size() == 1 ? "" : "s", run.malformed.front());
    return v;
  }
  if (run.rows.empty()) {
    v.reason = run.errors.empty() ? "no result rows: the run ended before measuring anything"
                                  : fmt::format("the run failed: {}", run.errors.front());
    return v;
  }
  const Row* largest = &run.rows.front();
  for (const Row& row : run.rows) {
    if (row.size_bytes >= largest->size_bytes) largest = &row;
    for (const Half* half : {&row.out_of_place, &row.in_place}) {
      v.wrong += half->wrong.value_or(0);
      v.checked = v.checked || half->wrong.has_value();
    }
  }
  v.largest_size_bytes = largest->size_bytes;
  v.busbw_largest_gbps = largest->out_of_place.busbw_gbps;
  // A finished run with wrong values fails on them: nccl-tests' own "Test failure" lines after the footer are its
  // reaction to them, not a run that could not happen.
  const bool wrong_results = v.wrong > 0 || run.out_of_bounds_failed;
  if (!run.errors.empty() && !(run.complete && wrong_results)) {
    v.reason = fmt::format("the run failed: {}", run.errors.front());
    return v;
  }
  if (!run.complete) {
    v.reason = fmt::format("truncated: the output stops after {} rows (largest size {}), before the footer",
                           run.rows.size(), FormatSize(largest->size_bytes));
    return v;
  }
  v.outcome = Outcome::kFail;
  if (v.wrong > 0) {
    v.reason = fmt::format("{:g} wrong values", v.wrong);
    return v;
  }
  if (run.out_of_bounds_failed) {
    v.reason = fmt::format("{} out-of-bounds values", run.out_of_bounds.value_or(0));
    return v;
  }
  if (run.avg_ok && !*run.avg_ok) {
    v.reason = fmt::format("nccl-tests reported its average bus bandwidth {:.2f} GB/s below NCCL_TESTS_MIN_BW",
                           v.mean_busbw_gbps);
    return v;
  }
  if (threshold_gbps && (!v.busbw_largest_gbps || *v.busbw_largest_gbps < *threshold_gbps)) {
    v.reason = fmt::format("bus bandwidth {:.2f} GB/s at {} is below the threshold {:.2f} GB/s",
                           v.busbw_largest_gbps.value_or(0), FormatSize(largest->size_bytes), *threshold_gbps);
    return v;
  }
  v.outcome = Outcome::kPass;
  const std::string unchecked = "results not checked (#wrong N/A: -c 0)";
  v.reason = threshold_gbps ? fmt::format("bus bandwidth {:.2f} GB/s at {} meets the threshold {:.2f} GB/s{}",
                                          *v.busbw_largest_gbps, FormatSize(largest->size_bytes), *threshold_gbps,
                                          v.checked ? "" : "; " + unchecked)
                            : fmt::format("complete{}; bus bandwidth {:.2f} GB/s at {} (no threshold)",
                                          v.checked ? " and correct" : ", " + unchecked,
                                          v.busbw_largest_gbps.value_or(0), FormatSize(largest->size_bytes));
  return v;
}

common::Json ToJson(const Verdict& v) {
  static constexpr const char* kNames[] = {"pass", "fail", "could-not-run"};
  common::Json json = {{"verdict", kNames[static_cast<int>(v.outcome)]}, {"reason", v.reason},
                       {"largest_size", v.largest_size_bytes}, {"mean_busbw_gbps", v.mean_busbw_gbps},
                       {"wrong", v.wrong}, {"results_checked", v.checked}};
  json["busbw_at_largest_gbps"] = v.busbw_largest_gbps ? common::Json(*v.busbw_largest_gbps) : common::Json(nullptr);
  json["threshold_gbps"] = v.threshold_gbps ? common::Json(*v.threshold_gbps) : common::Json(nullptr);
  return json;
}

}  // namespace srunway::nccltests
