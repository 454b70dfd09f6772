// Megatron's --log-progress: progress.txt in the --save directory, one tab-separated line per event, written by
// rank 0 as Megatron writes them: "Starting job" when a job starts, and after each checkpoint "Saved checkpoint"
// with the job's throughput, the cumulative throughput of the jobs before it with as many ranks (a run requeued
// many times reads as one), the floating-point operations done and the tokens trained.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::trainer {

// "2026-12-04 01:19:45\tJob ID: 1234\t# GPUs: 8\tStarting job\n": the local time, the Slurm job id (empty outside
// Slurm), the ranks and the event.
std::string ProgressLine(std::time_t now, std::string_view job_id, int ranks, std::string_view event);

// "Saved checkpoint\tIteration: 200\tJob throughput: 171.3 TFLOP/s/GPU\tCumulative throughput: 168.0 TFLOP/s/GPU\t
// Floating-point operations: 1.23e+18\tTokens (in billions): 0.41"
std::string SavedCheckpointEvent(int64_t iteration, double job_tflops, double cumulative_tflops, double flops,
                                 double tokens);

// Where the jobs with `ranks` ranks began, as Megatron reads progress.txt: the first "Starting job" since the last
// line written by another number of ranks, and the floating-point operations of the last "Saved checkpoint"
// before it (of any number of ranks).
struct ProgressStart {
  std::time_t time = 0;
  double flops = 0;
};
// nullopt: no such job in `text`. A line that is not a progress line: DataLoss naming its number and why.
common::StatusOr<std::optional<ProgressStart>> FindProgressStart(std::string_view text, int ranks);

// Appends `line` to `path` whole, creating it: a failure (a full disk) leaves none of it there.
common::Status AppendProgress(const std::filesystem::path& path, std::string_view line);

}  // namespace srunway::trainer
