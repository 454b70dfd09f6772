// --log-progress's progress.txt: its lines as Megatron writes them, and where the jobs of a number of ranks began
// as Megatron's get_start_time_from_progress_log reads them back.
#include "trainer/train/progress_log.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>

#include "common/fs.h"
#include "tests/unit/temp_dir.h"

namespace srunway::trainer {
namespace {

std::time_t Local(int year, int month, int day, int hour, int minute, int second) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

std::string Saved(const char* time, int ranks, int64_t iteration, double flops) {
  return fmt::format("{}\tJob ID: 7\t# GPUs: {}\t{}\n", time, ranks,
                     SavedCheckpointEvent(iteration, 1.5, 1.25, flops, 2.5e9));
}

TEST(ProgressLog, LinesAsMegatronWritesThem) {
  EXPECT_EQ(ProgressLine(Local(2026, 12, 4, 1, 19, 45), "1234", 8, "Starting job"),
            "2026-12-04 01:19:45\tJob ID: 1234\t# GPUs: 8\tStarting job\n");
  EXPECT_EQ(ProgressLine(Local(2026, 1, 2, 3, 4, 5), "", 1, "Starting job"),
            "2026-01-02 03:04:05\tJob ID: \t# GPUs: 1\tStarting job\n");
  EXPECT_EQ(SavedCheckpointEvent(200, 171.349, 168.04, 1.2345e18, 4.1e8),
            "Saved checkpoint\tIteration: 200\tJob throughput: 171.3 TFLOP/s/GPU\tCumulative throughput: 168.0 "
            "TFLOP/s/GPU\tFloating-point operations: 1.23e+18\tTokens (in billions): 0.41");
}

// Two jobs of 8 ranks after one of 4: the 8 ranks' jobs began at the first of them, with the operations of the
// checkpoint the 4 ranks saved last; a job of 4 ranks since restarts the 4 ranks' count there.
TEST(ProgressLog, FindsTheStartOfTheJobsWithAsManyRanks) {
  const std::string text = "2026-12-01 10:00:00\tJob ID: 1\t# GPUs: 4\tStarting job\n" +
                           Saved("2026-12-01 11:00:00", 4, 100, 1e18) + Saved("2026-12-01 12:00:00", 4, 200, 2e18) +
                           "2026-12-02 09:00:00\tJob ID: 2\t# GPUs: 8\tStarting job\n" +
                           Saved("2026-12-02 10:00:00", 8, 300, 4e18) +
                           "2026-12-03 09:00:00\tJob ID: 3\t# GPUs: 8\tStarting job\n" +
                           Saved("2026-12-03 10:00:00", 8, 400, 6e18);
  auto eight = FindProgressStart(text, 8);
  ASSERT_TRUE(eight.ok()) << eight.status().message();
  ASSERT_TRUE(eight->has_value());
  EXPECT_EQ((*eight)->time, Local(2026, 12, 2, 9, 0, 0));
  EXPECT_EQ((*eight)->flops, 2e18);
  // The 4 ranks' jobs were broken off by the 8 ranks' lines: none since.
  auto four = FindProgressStart(text, 4);
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_FALSE(four->has_value());
  auto again = FindProgressStart(text + "2026-12-04 09:00:00\tJob ID: 4\t# GPUs: 4\tStarting job\n", 4);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->time, Local(2026, 12, 4, 9, 0, 0));
  EXPECT_EQ((*again)->flops, 6e18);
  // Blank lines (an editor's last newline) are no lines.
  auto blank = FindProgressStart("\n2026-12-01 10:00:00\tJob ID: \t# GPUs: 2\tStarting job\n\n", 2);
  ASSERT_TRUE(blank.ok() && blank->has_value());
  EXPECT_EQ((*blank)->flops, 0);
  auto empty = FindProgressStart("", 2);
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
}

TEST(ProgressLog, ALineThatIsNotOneIsNamed) {
  const std::string start = "2026-12-01 10:00:00\tJob ID: 1\t# GPUs: 2\tStarting job\n";
  for (const auto& [text, says] : std::initializer_list<std::pair<std::string, std::string>>{
           {start + "hello\n", "line 2: fewer than 4 tab-separated fields"},
           {start + "2026-12-01\tJob ID: 1\tGPUs: 2\tStarting job\n", "line 2: its third field is not `# GPUs: N`"},
           {start + "2026-12-01\tJob ID: 1\t# GPUs: two\tStarting job\n", "line 2: # GPUs"},
           {start + "2026-12-01\tJob ID: 1\t# GPUs: 2\tSaved checkpoint\tIteration: 3\n",
            "line 2: a saved checkpoint without `Floating-point operations: N`"},
           {"yesterday\tJob ID: 1\t# GPUs: 2\tStarting job\n", "line 1: its time is not YYYY-MM-DD HH:MM:SS"},
       }) {
    auto found = FindProgressStart(text, 2);
    ASSERT_FALSE(found.ok()) << text;
    EXPECT_EQ(found.status().code(), common::StatusCode::kDataLoss);
    EXPECT_NE(found.status().message().find(says), std::string::npos) << found.status().message();
  }
}

TEST(ProgressLog, AppendsWholeLines) {
  testing::TempDir dir("progress-log");
  const std::filesystem::path path = dir.path() / "progress.txt";
  ASSERT_TRUE(AppendProgress(path, "one\n").ok());
  ASSERT_TRUE(AppendProgress(path, "two\n").ok());
  auto text = common::ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "one\ntwo\n");
  const common::Status missing = AppendProgress(dir.path() / "gone" / "progress.txt", "three\n");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("gone/progress.txt"), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace srunway::trainer
