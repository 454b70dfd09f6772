// nccl-tests results: the structure of one run, its text form (what nccl-tests prints and collbench writes),
// its JSON form, and a parser that reads the text as admins have it (see parser.cc for the variations).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace srunway::nccltests {

struct Half {
  std::optional<double> time_us, algbw_gbps, busbw_gbps;
  std::optional<double> wrong;  // nullopt: "N/A" (checking off); nccl-tests prints large counts in %g form
};

struct Row {
  int64_t size_bytes = 0;
  int64_t count = 0;
  std::string type, redop;
  int root = -1;
  Half out_of_place, in_place;
};

struct Device {
  int rank = 0;
  int group = 0;
  int64_t pid = 0;
  std::string host;
  int device = 0;
  std::string bus_id;  // "0x1b" (nccl-tests before 2.14) or "0000:1b:00"
  std::string name;
};

struct Run {
  std::string collective;  // "all_reduce"; empty when the log does not say
  std::string version;     // "2.13.9" when a "# nccl-tests version" line is there
  // What carried the collectives: "nccl", or a host-memory communicator ("mpi", "self") from collbench's
  // "# Communicator:" line; nccl-tests' own binaries always use NCCL. Empty when the log does not say.
  std::string comm;
  std::string nccl_version;  // "2.27.3", from collbench's line or nccl-tests' "nccl-library=22703"
  std::map<std::string, std::string> config;  // the "nThread 1 nGpus 1 minBytes ..." line as key -> value
  std::vector<Device> devices;
  std::vector<Row> rows;
  std::optional<int64_t> out_of_bounds;
  bool out_of_bounds_failed = false;
  std::optional<double> avg_busbw_gbps;
  std::optional<bool> avg_ok;  // "OK"/"FAILED" after the average when NCCL_TESTS_MIN_BW was set
  std::vector<std::string> errors;  // failure lines: NCCL/CUDA failures, aborts, srun errors
  std::vector<std::string> malformed;  // "line 12: root=2147483648 is out of range [...]": rows not taken
  bool complete = false;            // the footer was seen

  // The mean busbw over every row of both halves, as nccl-tests computes its "Avg bus bandwidth".
  double MeanBusbw() const;
};

// "2.27.3" for NCCL's version code 22703 (2.9 and later: major*10000 + minor*100 + patch; older: *1000 + *100).
std::string NcclVersionName(int code);

// The text nccl-tests prints, in three parts so a benchmark can print rows as it measures them.
std::string FormatHeader(const Run& run);
std::string FormatRow(const Row& row);
std::string FormatFooter(const Run& run);

common::Json ToJson(const Run& run);
common::StatusOr<Run> RunFromJson(const common::Json& json, std::string_view where);

// Every run in a log (a log may hold several tests one after another). Empty when the text holds no
// nccl-tests output at all; a run cut short has complete == false.
std::vector<Run> ParseLog(std::string_view text);
// A log that is JSON (collbench's -J, nccl-tests' JSON output) or text.
common::StatusOr<std::vector<Run>> ParseAny(std::string_view text, std::string_view where);

}  // namespace srunway::nccltests
