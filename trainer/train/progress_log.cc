#include "trainer/train/progress_log.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <vector>

#include "common/fs.h"
#include "common/parse.h"

namespace srunway::trainer {
namespace {

constexpr char kTimeFormat[] = "%Y-%m-%d %H:%M:%S";

// The value after `label` ("# GPUs: 8" with label "# GPUs: " gives "8"), or nullopt when the field is another.
std::optional<std::string_view> Labelled(std::string_view field, std::string_view label) {
  if (!field.starts_with(label)) return std::nullopt;
  return field.substr(label.size());
}

}  // namespace

std::string ProgressLine(std::time_t now, std::string_view job_id, int ranks, std::string_view event) {
  std::tm local{};
  localtime_r(&now, &local);
  char time[32];
  std::strftime(time, sizeof time, kTimeFormat, &local);
  return fmt::format("{}\tJob ID: {}\t# GPUs: {}\t{}\n", time, job_id, ranks, event);
}

std::string SavedCheckpointEvent(int64_t iteration, double job_tflops, double cumulative_tflops, double flops,
                                 double tokens) {
  return fmt::format("Saved checkpoint\tIteration: {}\tJob throughput: {:.1f} TFLOP/s/GPU\tCumulative throughput: "
                     "{:.1f} TFLOP/s/GPU\tFloating-point operations: {:.2e}\tTokens (in billions): {:.2f}",
                     iteration, job_tflops, cumulative_tflops, flops, tokens / 1e9);
}

common::StatusOr<std::optional<ProgressStart>> FindProgressStart(std::string_view text, int ranks) {
  std::optional<ProgressStart> start;
  double saved_flops = 0;  // the last checkpoint's so far
  int number = 0;
  for (std::string_view line : common::Split(text, '\n')) {
    ++number;
    line = common::Trim(line);
    if (line.empty()) continue;
    const std::vector<std::string_view> fields = common::Split(line, '\t');
    auto bad = [&](std::string_view why) {
      return common::DataLoss("line {}: {} (`{}`)", number, why, common::Printable(line));
    };
    if (fields.size() < 4) return bad("fewer than 4 tab-separated fields");
    const std::optional<std::string_view> gpus = Labelled(fields[2], "# GPUs: ");
    if (!gpus) return bad("its third field is not `# GPUs: N`");
    auto line_ranks = common::ParseInt(*gpus, "# GPUs", 1, INT32_MAX);
    if (!line_ranks.ok()) return bad(line_ranks.status().message());
    const std::string_view event = fields[3];
    if (event == "Saved checkpoint") {
      const std::optional<std::string_view> flops =
          fields.size() > 7 ? Labelled(fields[7], "Floating-point operations: ") : std::nullopt;
      if (!flops) return bad("a saved checkpoint without `Floating-point operations: N` as its eighth field");
      auto value = common::ParseDouble(*flops, "floating-point operations", 0);
      if (!value.ok()) return bad(value.status().message());
      saved_flops = *value;
    }
    if (*line_ranks != ranks) {  // another number of ranks: the jobs of `ranks` start again after it
      start.reset();
      continue;
    }
    if (event == "Starting job" && !start) {
      std::tm local{};
      const std::string time(fields[0]);
      const char* end = strptime(time.c_str(), kTimeFormat, &local);
      if (end == nullptr || *end != '\0') return bad(fmt::format("its time is not {}", "YYYY-MM-DD HH:MM:SS"));
      local.tm_isdst = -1;  // as the clock was then
      start = ProgressStart{std::mktime(&local), saved_flops};
    }
  }
  return start;
}

common::Status AppendProgress(const std::filesystem::path& path, std::string_view line) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Fd fd, common::OpenToWrite(path, O_CREAT | O_APPEND));
  return common::AppendWhole(fd.get(), line, path.string());
}

}  // namespace srunway::trainer
