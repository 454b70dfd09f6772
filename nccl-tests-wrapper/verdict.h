// The verdict on a run: the bus bandwidth at the largest size against a threshold, results correct, run complete.
#pragma once

#include <optional>
#include <string>

#include "nccl-tests-wrapper/collectives.h"
#include "nccl-tests-wrapper/results.h"

namespace srunway::nccltests {

// A published figure for a machine, collective and node count, and where it comes from. Every figure is for
// GPUs on NCCL: a run on a host-memory communicator is never judged by one.
struct PublishedFigure {
  std::string reference;  // the name --reference takes: "a3mega", "ib-400g-h100", "h100-single-node"
  Collective collective;
  int min_nodes, max_nodes;
  double busbw_gbps;
  std::string machine;  // what it applies to: "A3 Mega: 8 x H100 per node, 8 NICs, GPUDirect-TCPXO"
  std::string source;
  std::string alone;    // the reference one node of this machine is judged by when re-tested alone
};
const std::vector<PublishedFigure>& PublishedFigures();

// The default pass mark: 90% of the published figure for this reference, collective and node count, if any.
inline constexpr double kDefaultPassFraction = 0.9;
std::optional<PublishedFigure> FindFigure(const std::string& reference, Collective collective, int nodes);
// The figure for one node of the reference's machine alone: its own single-node figure, else its `alone`
// reference's (A3 Mega's eight H100 share one NVSwitch, as every 8 x H100 SXM node's do).
std::optional<PublishedFigure> FindAloneFigure(const std::string& reference, Collective collective);
bool IsReference(const std::string& name);

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
