// The nccl-tests parser on a real log and on the variants admins have; the collectives table; verdicts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "common/fs.h"
#include "nccl-tests-wrapper/collectives.h"
#include "nccl-tests-wrapper/results.h"
#include "nccl-tests-wrapper/verdict.h"

namespace srunway::nccltests {
namespace {

// gtest has a Test::Run of its own.
using RunResult = ::srunway::nccltests::Run;

std::string Fixture(const std::string& name) {
  const char* dir = std::getenv("SRUNWAY_NCCL_FIXTURES");
  auto text = common::ReadFile(std::string(dir ? dir : "tests/fixtures/nccl-tests") + "/" + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

// Applies `edit` to every line.
template <typename Edit>
std::string EachLine(const std::string& text, Edit edit) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += edit(line) + "\n";
  return out;
}

RunResult ParseOne(const std::string& text) {
  std::vector<RunResult> runs = ParseLog(text);
  EXPECT_EQ(runs.size(), 1u);
  return runs.empty() ? RunResult() : runs[0];
}

void ExpectA3MegaRun(const RunResult& run) {
  ASSERT_EQ(run.rows.size(), 31u);
  EXPECT_EQ(run.devices.size(), 16u);
  EXPECT_EQ(run.devices[8].host, "ztan-mig-gq73");
  EXPECT_EQ(run.devices[8].bus_id, "0000:04:00");
  EXPECT_EQ(run.devices[15].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(run.config.at("maxBytes"), "8589934592");
  EXPECT_EQ(run.config.at("step:"), "2(factor)");
  const Row& first = run.rows.front();
  EXPECT_EQ(first.size_bytes, 8);
  EXPECT_EQ(first.count, 2);
  EXPECT_EQ(first.type, "float");
  EXPECT_EQ(first.redop, "sum");
  EXPECT_EQ(first.root, -1);
  EXPECT_DOUBLE_EQ(*first.out_of_place.time_us, 135.8);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.size_bytes, 8589934592);
  EXPECT_DOUBLE_EQ(*last.out_of_place.time_us, 47535);
  EXPECT_DOUBLE_EQ(*last.out_of_place.busbw_gbps, 338.82);
  EXPECT_DOUBLE_EQ(*last.in_place.busbw_gbps, 337.35);
  EXPECT_DOUBLE_EQ(*last.in_place.wrong, 0);
  EXPECT_EQ(run.out_of_bounds, 0);
  EXPECT_FALSE(run.out_of_bounds_failed);
  EXPECT_DOUBLE_EQ(*run.avg_busbw_gbps, 70.742);
  EXPECT_FALSE(run.avg_ok.has_value());
  EXPECT_TRUE(run.complete);
  EXPECT_TRUE(run.errors.empty());
}

TEST(ParserTest, RealA3MegaLogExactly) {
  const RunResult run = ParseOne(Fixture("a3mega-all-reduce-2node.log"));
  ExpectA3MegaRun(run);
  // nccl-tests' average is the mean of every busbw of both halves (here from the 2-decimal printed values).
  EXPECT_NEAR(run.MeanBusbw(), 70.742, 0.01);
}

// A real mpirun --tag-output log of an older nccl-tests (NCCL 2.8.3, p4d with EFA): [0x10] device ids, no Group
// and no root column, NCCL INFO lines between the header and the rows, and an "error" column of magnitudes
// (5e-07), which must not count as wrong elements.
TEST(ParserTest, RealOlderMpirunTaggedLog) {
  const RunResult run = ParseOne(Fixture("p4d-efa-all-reduce-2node-mpirun-excerpt.log"));
  ASSERT_EQ(run.devices.size(), 16u);
  EXPECT_EQ(run.devices[9].host, "nccl-tests-efa-worker-1");
  EXPECT_EQ(run.devices[9].bus_id, "0x10");
  EXPECT_EQ(run.devices[9].name, "A100-SXM4-40GB");
  ASSERT_EQ(run.rows.size(), 28u);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.size_bytes, 1073741824);
  EXPECT_EQ(last.root, -1);
  EXPECT_DOUBLE_EQ(*last.out_of_place.busbw_gbps, 32.71);
  EXPECT_DOUBLE_EQ(*last.in_place.time_us, 61303);
  EXPECT_FALSE(last.out_of_place.wrong.has_value());
  EXPECT_EQ(run.out_of_bounds, 0);
  EXPECT_DOUBLE_EQ(*run.avg_busbw_gbps, 7.80081);
  EXPECT_TRUE(run.complete);
  EXPECT_TRUE(run.errors.empty());
  const Verdict v = Judge(run, std::nullopt);
  EXPECT_EQ(v.outcome, Outcome::kPass) << v.reason;
  EXPECT_EQ(Judge(run, 40.0).outcome, Outcome::kFail);
}

// A real srun -l log (" 0: " on every line, a bare " 0:" at the end) of a 2-node H100 run over 400G InfiniBand
// with checking off: every #wrong is N/A, so the verdict says the results were not checked.
TEST(ParserTest, RealSrunLabelledLogWithChecksOff) {
  const RunResult run = ParseOne(Fixture("h100-ib-all-reduce-2node-srun-l.log"));
  ASSERT_EQ(run.devices.size(), 16u);
  EXPECT_EQ(run.devices[8].host, "node007");
  EXPECT_EQ(run.devices[8].pid, 541703);
  EXPECT_EQ(run.devices[15].bus_id, "0xc1");
  EXPECT_EQ(run.config.at("validation:"), "0");
  EXPECT_EQ(run.config.at("iters:"), "200");
  ASSERT_EQ(run.rows.size(), 11u);
  EXPECT_EQ(run.rows.front().size_bytes, 8388608);
  EXPECT_DOUBLE_EQ(*run.rows.front().in_place.busbw_gbps, 87.38);
  const Row& last = run.rows.back();
  EXPECT_EQ(last.size_bytes, 8589934592);
  EXPECT_DOUBLE_EQ(*last.out_of_place.time_us, 103530);
  EXPECT_DOUBLE_EQ(*last.out_of_place.busbw_gbps, 155.57);
  EXPECT_DOUBLE_EQ(*last.in_place.busbw_gbps, 155.56);
  for (const Row& row : run.rows) EXPECT_FALSE(row.out_of_place.wrong || row.in_place.wrong);
  EXPECT_DOUBLE_EQ(*run.avg_busbw_gbps, 142.735);
  EXPECT_NEAR(run.MeanBusbw(), 142.735, 0.01);
  EXPECT_TRUE(run.complete);
  EXPECT_TRUE(run.errors.empty());
  const Verdict v = Judge(run, 150.0);
  EXPECT_EQ(v.outcome, Outcome::kPass) << v.reason;
  EXPECT_FALSE(v.checked);
  EXPECT_NE(v.reason.find("results not checked"), std::string::npos) << v.reason;
  EXPECT_EQ(Judge(run, 469.0).outcome, Outcome::kFail);
}

// A real single-node run, one process driving 8 GPUs (-g 8): 8 device lines of one pid; 473.6 GB/s at 4 GB is
// the source of the h100-single-node figure.
TEST(ParserTest, RealSingleNodeEightGpuLog) {
  const RunResult run = ParseOne(Fixture("h100-all-reduce-1node-g8.log"));
  ASSERT_EQ(run.devices.size(), 8u);
  for (const Device& d : run.devices) EXPECT_EQ(d.pid, 295203);
  EXPECT_EQ(run.config.at("nGpus"), "8");
  ASSERT_EQ(run.rows.size(), 6u);
  EXPECT_EQ(run.rows.back().size_bytes, 4294967296);
  EXPECT_DOUBLE_EQ(*run.rows.back().out_of_place.busbw_gbps, 473.60);
  EXPECT_DOUBLE_EQ(*run.rows.back().in_place.busbw_gbps, 476.53);
  EXPECT_DOUBLE_EQ(*run.rows.back().in_place.wrong, 0);
  EXPECT_DOUBLE_EQ(*run.avg_busbw_gbps, 439.369);
  auto figure = FindFigure("h100-single-node", Collective::kAllReduce, 1);
  ASSERT_TRUE(figure.has_value());
  const Verdict v = Judge(run, figure->busbw_gbps * 0.9);
  EXPECT_EQ(v.outcome, Outcome::kPass) << v.reason;
  EXPECT_TRUE(v.checked);
}

// Two real failures of nccl-tests 2.17.8 on GH200 nodes under srun: a run with wrong values at one size
// ("Out of bounds values : 4 FAILED", then nccl-tests' own "Test failure" lines after the footer), which fails on
// its values; and a run whose ranks hit a CUDA error right after the device lines, which could not run.
TEST(ParserTest, RealFailedRuns) {
  const RunResult wrong = ParseOne(Fixture("gh200-all-reduce-2node-wrong-values.log"));
  EXPECT_EQ(wrong.version, "2.17.8");
  EXPECT_EQ(wrong.collective, "all_reduce");
  ASSERT_EQ(wrong.rows.size(), 25u);
  const Row& bad_row = wrong.rows[17];
  EXPECT_EQ(bad_row.size_bytes, 1048576);
  EXPECT_DOUBLE_EQ(*bad_row.out_of_place.wrong, 96);
  EXPECT_DOUBLE_EQ(*bad_row.in_place.wrong, 32);
  EXPECT_DOUBLE_EQ(*wrong.rows.back().out_of_place.time_us, 5869.38);
  EXPECT_DOUBLE_EQ(*wrong.rows.back().in_place.busbw_gbps, 22.80);
  EXPECT_EQ(wrong.out_of_bounds, 4);
  EXPECT_TRUE(wrong.out_of_bounds_failed);
  EXPECT_DOUBLE_EQ(*wrong.avg_busbw_gbps, 4.79995);
  EXPECT_TRUE(wrong.complete);
  EXPECT_EQ(wrong.errors.size(), 2u);  // the two "Test failure common.cu:1189" lines
  Verdict v = Judge(wrong, std::nullopt);
  EXPECT_EQ(v.outcome, Outcome::kFail) << v.reason;
  EXPECT_EQ(v.reason, "128 wrong values");
  EXPECT_DOUBLE_EQ(*v.busbw_largest_gbps, 22.87);

  const RunResult busy = ParseOne(Fixture("gh200-all-reduce-2node-cuda-busy.log"));
  EXPECT_EQ(busy.devices.size(), 8u);
  EXPECT_EQ(busy.devices[4].bus_id, "0009:01:00");
  EXPECT_TRUE(busy.rows.empty());
  EXPECT_FALSE(busy.complete);
  v = Judge(busy, std::nullopt);
  EXPECT_EQ(v.outcome, Outcome::kCouldNotRun);
  EXPECT_EQ(v.reason, "the run failed: gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are "
                      "busy or unavailable'");
}

TEST(ParserTest, TaggedStrippedAndInterleavedVariants) {
  const std::string log = Fixture("a3mega-all-reduce-2node.log");
  // srun -l task labels, mpirun --tag-output, '#' stripped, CRLF line ends.
  ExpectA3MegaRun(ParseOne(EachLine(log, [](const std::string& l) { return " 0: " + l; })));
  ExpectA3MegaRun(ParseOne(EachLine(log, [](const std::string& l) { return "[1,0]<stdout>:" + l; })));
  ExpectA3MegaRun(ParseOne(EachLine(log, [](const std::string& l) { return l[0] == '#' ? l.substr(1) : l; })));
  ExpectA3MegaRun(ParseOne(EachLine(log, [](const std::string& l) { return l + "\r"; })));
  // NCCL and MPI messages between the rows.
  int n = 0;
  ExpectA3MegaRun(ParseOne(EachLine(log, [&n](const std::string& l) {
    return (++n % 5 == 0 ? "ztan-mig-235z:6899:7010 [0] NCCL INFO Channel 00/16 : 0 1 2 3\n"
                           "[ztan-mig-gq73:06733] mca_base_component_repository_open: unable to open mca_op_avx\n"
                         : std::string()) + l;
  })));
}

TEST(ParserTest, OlderFormatWithoutRootColumnAndShortDeviceIds) {
  // Releases before the root column: 12 columns, "error" as %g, device ids as [0x04], no Group.
  const std::string log = EachLine(Fixture("a3mega-all-reduce-2node.log"), [](std::string l) {
    if (auto at = l.find(" Group  0"); at != std::string::npos) l.erase(at, 9);
    if (auto at = l.find("[0000:"); at != std::string::npos) l.replace(at, 12, "[0x" + l.substr(at + 6, 2) + "]");
    if (auto at = l.find("     -1 "); at != std::string::npos && l[0] != '#') l.erase(at, 7);
    return l;
  });
  const RunResult run = ParseOne(log);
  ASSERT_EQ(run.rows.size(), 31u);
  EXPECT_EQ(run.devices[0].bus_id, "0x04");
  EXPECT_DOUBLE_EQ(*run.rows.back().out_of_place.busbw_gbps, 338.82);
}

TEST(ParserTest, WrongValuesOutOfBoundsAndMinBandwidth) {
  std::string log = Fixture("a3mega-all-reduce-2node.log");
  const std::string last = "180.71  338.82      0";
  log.replace(log.find(last), last.size(), "180.71  338.82  2.68435e+08");
  RunResult run = ParseOne(log);
  EXPECT_DOUBLE_EQ(*run.rows.back().out_of_place.wrong, 2.68435e+08);
  Verdict v = Judge(run, 300.0);
  EXPECT_EQ(v.outcome, Outcome::kFail);
  EXPECT_NE(v.reason.find("wrong values"), std::string::npos);

  run = ParseOne(EachLine(Fixture("a3mega-all-reduce-2node.log"), [](std::string l) {
    if (l.starts_with("# Out of bounds")) return std::string("# Out of bounds values : 3 FAILED");
    if (l.starts_with("# Avg bus")) return std::string("# Avg bus bandwidth    : 70.742 FAILED");
    if (l.size() > 100 && l[0] != '#') {
      // checking off: #wrong as N/A
      l.replace(l.size() - 6, 6, "   N/A");
    }
    return l;
  }));
  EXPECT_EQ(run.out_of_bounds, 3);
  EXPECT_TRUE(run.out_of_bounds_failed);
  EXPECT_EQ(run.avg_ok, false);
  EXPECT_FALSE(run.rows[3].in_place.wrong.has_value());
  EXPECT_EQ(Judge(run, std::nullopt).outcome, Outcome::kFail);
}

TEST(ParserTest, TruncatedAndFailedRunsCouldNotRun) {
  const std::string log = Fixture("a3mega-all-reduce-2node.log");
  const std::string cut = log.substr(0, log.find("  1073741824"));
  RunResult run = ParseOne(cut);
  EXPECT_FALSE(run.complete);
  EXPECT_EQ(run.rows.size(), 27u);
  Verdict v = Judge(run, 300.0);
  EXPECT_EQ(v.outcome, Outcome::kCouldNotRun);
  EXPECT_NE(v.reason.find("truncated"), std::string::npos) << v.reason;

  run = ParseOne(cut + "ztan-mig-gq73: Test NCCL failure common.cu:1005 'unhandled system error'\n"
                       "--------------------------------------------------------------------------\n"
                       "MPI_ABORT was invoked on rank 9 in communicator MPI_COMM_WORLD\n");
  ASSERT_EQ(run.errors.size(), 2u);
  v = Judge(run, 300.0);
  EXPECT_EQ(v.outcome, Outcome::kCouldNotRun);
  EXPECT_NE(v.reason.find("NCCL failure"), std::string::npos) << v.reason;
  EXPECT_TRUE(ParseLog("just some text\nwith nothing of nccl-tests\n").empty());
}

// Numbers no nccl-tests run can print (the fuzzer's root of 2147483648 was cast to int: undefined behaviour) make
// the row malformed: reported with its line, never taken, and the run cannot be judged.
TEST(ParserTest, OutOfRangeNumbersMakeTheRowMalformed) {
  const std::string log = Fixture("a3mega-all-reduce-2node.log");
  const std::string row = "     8388608       2097152     float     sum      -1";
  ASSERT_NE(log.find(row), std::string::npos);
  for (const auto& [bad, cell] : std::vector<std::pair<std::string, std::string>>{
           {"     8388608       2097152     float     sum      2147483648", "root=2147483648"},
           {"     8388608       2097152     float     sum     -2", "root=-2"},
           {"99999999999999999999       2097152     float     sum      -1", "size=99999999999999999999"},
           {"     8388608  99999999999999999999     float     sum      -1", "count=99999999999999999999"}}) {
    std::string edited = log;
    edited.replace(edited.find(row), row.size(), bad);
    RunResult run = ParseOne(edited);
    EXPECT_EQ(run.rows.size(), 30u) << bad;
    ASSERT_EQ(run.malformed.size(), 1u) << bad;
    EXPECT_NE(run.malformed[0].find(cell), std::string::npos) << run.malformed[0];
    EXPECT_TRUE(run.malformed[0].starts_with("line ")) << run.malformed[0];
    Verdict v = Judge(run, 300.0);
    EXPECT_EQ(v.outcome, Outcome::kCouldNotRun);
    EXPECT_NE(v.reason.find("malformed output (1 row): line "), std::string::npos) << v.reason;
  }
  // A #wrong or busbw cell that is no count or measurement: inf, nan, negative, past 2^63.
  const std::string last = "180.71  338.82      0";
  for (const std::string cell : {"inf", "nan", "-3", "1e300"}) {
    std::string edited = log;
    edited.replace(edited.find(last), last.size(), "180.71  338.82  " + cell);
    RunResult run = ParseOne(edited);
    ASSERT_EQ(run.malformed.size(), 1u) << cell;
    EXPECT_NE(run.malformed[0].find("#wrong=" + cell), std::string::npos) << run.malformed[0];
  }
  // The footer's out-of-bounds count and the device lines get the same checks.
  RunResult run = ParseOne(EachLine(log, [](std::string l) {
    return l.starts_with("# Out of bounds") ? std::string("# Out of bounds values : 99999999999999999999 OK") : l;
  }));
  ASSERT_EQ(run.malformed.size(), 1u);
  EXPECT_NE(run.malformed[0].find("out of bounds values=99999999999999999999"), std::string::npos);
  run = ParseOne(EachLine(log, [](std::string l) {
    const size_t at = l.find("Rank  8 Group  0 Pid");
    return at == std::string::npos ? l : l.replace(at, 7, "Rank 4294967296");
  }));
  EXPECT_EQ(run.devices.size(), 15u);
}

// The same in nccl-tests' JSON: nlohmann's own get<int>() casts a float or a too-large number unchecked.
TEST(ParserTest, OutOfRangeJsonNumbersAreErrors) {
  const common::Json good = common::ParseJson(Fixture("a3mega-all-reduce-2node.nccl-tests-layout.json"), "f").value();
  auto expect_error = [&](const std::function<void(common::Json&)>& edit, const std::string& words) {
    common::Json json = good;
    edit(json);
    auto runs = ParseAny(json.dump(), "nccl-tests.json");
    ASSERT_FALSE(runs.ok()) << words;
    EXPECT_NE(runs.status().message().find(words), std::string::npos) << runs.status().ToString();
  };
  expect_error([](common::Json& j) { j["results"][0]["size"] = 1e30; }, "key 'size'=1e+30 is not an integer");
  expect_error([](common::Json& j) { j["results"][0]["count"] = -5; }, "cannot be negative");
  expect_error([](common::Json& j) { j["results"][0]["root"] = "2147483648"; }, "root=2147483648 is out of range");
  expect_error([](common::Json& j) { j["config"]["devices"][0]["rank"] = 4294967296; }, "key 'rank'=4294967296");
  expect_error([](common::Json& j) { j["config"]["devices"][0]["device"] = 0.5; }, "key 'device'=0.5");
  expect_error([](common::Json& j) { j["out_of_bounds"]["count"] = 1e19; }, "out_of_bounds count=1e+19");
  // A type or reduction that the text form cannot hold as one column (the fuzzer's "flo\t" printed back as "flo").
  expect_error([](common::Json& j) { j["results"][0]["type"] = "flo\t"; },
               "nccl-tests.json: a result: size 8: type 'flo\\t' is not one word");
  expect_error([](common::Json& j) { j["results"][0]["redop"] = "s um"; }, "redop 's um' is not one word");
  // Integral floats are integers.
  common::Json json = good;
  json["results"][0]["size"] = 8.0;
  ASSERT_TRUE(ParseAny(json.dump(), "nccl-tests.json").ok());
}

TEST(ParserTest, SeveralRunsInOneLog) {
  const std::string log = Fixture("a3mega-all-reduce-2node.log");
  std::vector<RunResult> runs = ParseLog("# Collective test starting: all_reduce_perf\n" + log +
                                   "# Collective test concluded: all_reduce_perf\n" + log);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].collective, "all_reduce");
  EXPECT_EQ(runs[1].rows.size(), 31u);
}

// nccl-tests' own -J layout (src/util.cu): devices inside config, root as "%6i" text, "true"/"false" strings,
// errors [""] when NCCL had none. The fixture holds the values of the A3 Mega log in that layout.
TEST(ParserTest, NcclTestsJsonLayout) {
  auto runs = ParseAny(Fixture("a3mega-all-reduce-2node.nccl-tests-layout.json"), "nccl-tests.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 1u);
  const RunResult& run = runs->front();
  ExpectA3MegaRun(run);
  EXPECT_TRUE(run.errors.empty());
  EXPECT_TRUE(run.complete);
  EXPECT_FALSE(run.avg_ok.has_value());  // "unchecked"
  EXPECT_EQ(Judge(run, 300.0).outcome, Outcome::kPass);

  // What our JSON writes is the same layout, and reads back to the same run.
  common::Json ours = ToJson(run);
  EXPECT_EQ(ours["config"]["devices"][8]["hostname"], "ztan-mig-gq73");
  EXPECT_EQ(ours["config"]["devices"][8]["device_hex"], "0000:04:00");
  EXPECT_EQ(ours["config"]["step_factor"], 2);
  EXPECT_EQ(ours["config"]["maximum_bytes"], 8589934592);
  EXPECT_EQ(ours["results"][0]["root"], "    -1");
  EXPECT_EQ(ours["results"][0]["actual_iterations"], 20);
  EXPECT_EQ(ours["out_of_bounds"]["okay"], "true");
  EXPECT_EQ(ours["average_bus_bandwidth"]["okay"], "unchecked");
  EXPECT_DOUBLE_EQ(ours["average_bus_bandwidth"]["bandwidth"].get<double>(), 70.742);

  // Checking off (nwrong null), a failed pass mark, wrong values and an NCCL error, as nccl-tests writes them.
  common::Json failed = common::ParseJson(Fixture("a3mega-all-reduce-2node.nccl-tests-layout.json"), "f").value();
  failed["results"][30]["in_place"]["nwrong"] = nullptr;
  failed["average_bus_bandwidth"]["okay"] = "false";
  failed["out_of_bounds"] = {{"count", 4}, {"okay", "false"}};
  auto bad = ParseAny(failed.dump(), "failed.json");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_FALSE(bad->front().rows[30].in_place.wrong.has_value());
  EXPECT_EQ(bad->front().avg_ok, std::optional<bool>(false));
  EXPECT_TRUE(bad->front().out_of_bounds_failed);
  EXPECT_EQ(Judge(bad->front(), 300.0).outcome, Outcome::kFail);
  // An error with wrong values still fails on the values; an error alone means the run could not happen.
  failed["errors"] = {"NCCL WARN Net : Connection closed by remote peer"};
  bad = ParseAny(failed.dump(), "failed.json");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(bad->front().errors.size(), 1u);
  EXPECT_EQ(Judge(bad->front(), 300.0).outcome, Outcome::kFail);
  failed["out_of_bounds"] = {{"count", 0}, {"okay", "true"}};
  bad = ParseAny(failed.dump(), "failed.json");
  ASSERT_TRUE(bad.ok()) << bad.status().ToString();
  EXPECT_EQ(Judge(bad->front(), 300.0).outcome, Outcome::kCouldNotRun);
  failed["results"][0]["root"] = "root";
  EXPECT_FALSE(ParseAny(failed.dump(), "failed.json").ok());
}

TEST(ParserTest, TextAndJsonRoundTrip) {
  const RunResult run = ParseOne(Fixture("a3mega-all-reduce-2node.log"));
  std::string text = FormatHeader(run);
  for (const Row& row : run.rows) text += FormatRow(row);
  text += FormatFooter(run);
  ExpectA3MegaRun(ParseOne(text));
  auto from_json = ParseAny(ToJson(run).dump(2), "results.json");
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  ExpectA3MegaRun(from_json->front());
  EXPECT_FALSE(ParseAny("{\"config\": {}}", "bad.json").ok());
  EXPECT_FALSE(ParseAny("no table here", "empty.log").ok());
}

// Which communicator carried the run: collbench's "# Communicator:" line (written by FormatHeader, through text
// and JSON), and NVIDIA's binaries' nccl-library= code, which always means NCCL.
TEST(ParserTest, TheCommunicatorAndNcclVersionOfARun) {
  RunResult run = ParseOne(Fixture("a3mega-all-reduce-2node.log"));
  EXPECT_EQ(run.comm, "");
  run.comm = "mpi";
  std::string text = FormatHeader(run);
  EXPECT_NE(text.find("# Communicator: mpi (host memory)\n"), std::string::npos) << text;
  for (const Row& row : run.rows) text += FormatRow(row);
  text += FormatFooter(run);
  EXPECT_EQ(ParseOne(text).comm, "mpi");
  EXPECT_EQ(ParseOne(text).nccl_version, "");
  run.comm = "nccl";
  run.nccl_version = NcclVersionName(22703);
  EXPECT_EQ(run.nccl_version, "2.27.3");
  EXPECT_EQ(NcclVersionName(2708), "2.7.8");
  text = FormatHeader(run) + FormatFooter(run);
  EXPECT_NE(text.find("# Communicator: nccl, NCCL 2.27.3\n"), std::string::npos) << text;
  EXPECT_EQ(ParseOne(text).nccl_version, "2.27.3");
  auto from_json = ParseAny(ToJson(run).dump(), "results.json");
  ASSERT_TRUE(from_json.ok());
  EXPECT_EQ(from_json->front().comm, "nccl");
  EXPECT_EQ(from_json->front().nccl_version, "2.27.3");
  const RunResult nvidia = ParseOne(Fixture("gh200-all-reduce-2node-wrong-values.log"));
  EXPECT_EQ(nvidia.comm, "nccl");
  EXPECT_EQ(nvidia.nccl_version, "2.29.2");
}

TEST(VerdictTest, LargestSizeAgainstThresholdAndPublishedFigures) {
  const RunResult run = ParseOne(Fixture("a3mega-all-reduce-2node.log"));
  Verdict pass = Judge(run, 300.0);
  EXPECT_EQ(pass.outcome, Outcome::kPass);
  EXPECT_EQ(pass.largest_size_bytes, 8589934592);
  EXPECT_DOUBLE_EQ(*pass.busbw_largest_gbps, 338.82);
  EXPECT_DOUBLE_EQ(pass.mean_busbw_gbps, 70.742);
  Verdict fail = Judge(run, 350.0);
  EXPECT_EQ(fail.outcome, Outcome::kFail);
  EXPECT_NE(fail.reason.find("338.82 GB/s at 8G is below the threshold 350.00"), std::string::npos) << fail.reason;
  auto figure = FindFigure("a3mega", Collective::kAllReduce, 2);
  ASSERT_TRUE(figure.has_value());
  EXPECT_DOUBLE_EQ(figure->busbw_gbps, 338.0);
  EXPECT_DOUBLE_EQ(FindFigure("a3mega", Collective::kAllGather, 4)->busbw_gbps, 188.0);
  EXPECT_FALSE(FindFigure("a3mega", Collective::kAllGather, 1).has_value());
  for (const PublishedFigure& f : PublishedFigures()) EXPECT_FALSE(f.source.empty() || f.machine.empty());
  // One node of an A3 Mega alone runs over NVSwitch: judged by the single-node H100 figure, not the network's.
  EXPECT_DOUBLE_EQ(FindAloneFigure("a3mega", Collective::kAllReduce)->busbw_gbps, 460.0);
  EXPECT_FALSE(FindAloneFigure("a3mega", Collective::kAllGather).has_value());
  EXPECT_TRUE(IsReference("ib-400g-h100"));
  EXPECT_FALSE(IsReference("a3"));
}

TEST(CollectivesTest, SizesNamesAndBusFactors) {
  EXPECT_EQ(*ParseSize("8M", "-b"), 8 << 20);
  EXPECT_EQ(*ParseSize("8g", "-e"), int64_t{8} << 30);
  EXPECT_EQ(*ParseSize("4096", "-b"), 4096);
  EXPECT_NE(ParseSize("8Q", "-b").status().message().find("unknown size suffix 'Q'"), std::string::npos);
  // Not a number before the letter: no unit is to blame ("abc" was "unknown size suffix 'c'").
  EXPECT_EQ(ParseSize("abc", "--max-bytes").status().message(),
            "--max-bytes 'abc': not a size (a number with K, M, G or T)");
  EXPECT_EQ(ParseSize("x", "-b").status().message(), "-b 'x': not a size (a number with K, M, G or T)");
  EXPECT_FALSE(ParseSize("", "-b").ok());
  EXPECT_FALSE(ParseSize("-8M", "-b").ok());
  // A sweep's next size: times -f, or plus -i; none past INT64_MAX (the multiplication overflowed: undefined) or
  // where it would not grow.
  EXPECT_EQ(NextSize(8, 2, 0), 16);
  EXPECT_EQ(NextSize(8, 1, 4), 12);
  EXPECT_EQ(NextSize(int64_t{1} << 62, 1024, 0), std::nullopt);
  EXPECT_EQ(NextSize(INT64_MAX - 1, 1, 5), std::nullopt);
  EXPECT_EQ(NextSize(8, 1, 0), std::nullopt);
  EXPECT_EQ(FormatSize(int64_t{8} << 30), "8G");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ((*FindCollective("all_gather_perf"))->id, Collective::kAllGather);
  EXPECT_EQ((*FindCollective("allreduce"))->id, Collective::kAllReduce);
  EXPECT_NE(FindCollective("all_scatter").status().message().find("known: all_reduce"), std::string::npos);
  // 16 ranks: all_reduce 2*15/16, all_gather 15/16, broadcast 1; algbw = size / time (GB/s = 1e9 B/s).
  const Bandwidth ar = ComputeBandwidth(Info(Collective::kAllReduce), 8589934592, 47535, 16);
  EXPECT_NEAR(ar.algbw_gbps, 180.71, 0.005);
  EXPECT_NEAR(ar.busbw_gbps, 338.82, 0.01);
  EXPECT_NEAR(ComputeBandwidth(Info(Collective::kAllGather), 1000000, 1, 16).busbw_gbps, 937.5, 1e-9);
  EXPECT_NEAR(ComputeBandwidth(Info(Collective::kBroadcast), 1000000, 1, 16).busbw_gbps, 1000.0, 1e-9);
}

}  // namespace
}  // namespace srunway::nccltests
