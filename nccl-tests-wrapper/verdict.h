// The verdict on a run: the bus bandwidth at the largest size against a threshold, results correct, run complete.
#pragma once

#include <optional>
#include <string>

#include "nccl-tests-wrapper/collectives.h"
#include "nccl-tests-wrapper/results.h"

namespace srunway::nccltests {

// A published figure for a machine, collective and node count, and where it comes from.
struct PublishedFigure {
  std::string profile;  // "a3mega", "ib-400g-h100", "h100-single-node"
  Collective collective;
  int min_nodes, max_nodes;
  double busbw_gbps;
  std::string source;
};
const std::vector<PublishedFigure>& PublishedFigures();

// The default pass mark: 90% of the published figure for this profile, collective and node count, if any.
inline constexpr double kDefaultPassFraction = 0.9;
std::optional<PublishedFigure> FindFigure(const std::string& profile, Collective collective, int nodes);

enum class Outcome { kPass = 0, kFail = 1, kCouldNotRun = 2 };  // also the exit codes of run-nccl-tests

struct Verdict {
  Outcome outcome = Outcome::kCouldNotRun;
  std::string reason;                     // one line
  int64_t largest_size_bytes = 0;
  std::optional<double> busbw_largest_gbps;  // out-of-place busbw at the largest size
  double mean_busbw_gbps = 0;             // nccl-tests' "Avg bus bandwidth" (every row, both halves)
  std::optional<double> threshold_gbps;
  double wrong = 0;
  bool checked = false;                   // some #wrong was a count; all "N/A" means nccl-tests ran with -c 0
};

// threshold: nullopt checks correctness and completeness only.
Verdict Judge(const Run& run, std::optional<double> threshold_gbps);

common::Json ToJson(const Verdict& verdict);

}  // namespace srunway::nccltests
