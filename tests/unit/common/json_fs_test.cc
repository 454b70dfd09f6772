// Tests for JSON parsing errors with positions, typed fields, and atomic file writes.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/fs.h"
#include "common/json.h"
#include "common/log.h"

namespace srunway::common {
namespace {

namespace fs = std::filesystem;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "srunway-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(ParseJson, ErrorsSayFileLineAndColumn) {
  auto value = ParseJson("{\n  \"a\": 1,\n  \"b\": ]\n}", "config.json");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(value.status().message().starts_with("config.json:3:8: ")) << value.status().message();

  auto truncated = ParseJson("{\"a\": [1, 2", "x.json");
  ASSERT_FALSE(truncated.ok());
  EXPECT_TRUE(truncated.status().message().starts_with("x.json:1:")) << truncated.status().message();
  EXPECT_FALSE(ParseJson("", "empty.json").ok());
}

TEST(ParseJson, KeepsKeyOrder) {
  auto value = ParseJson(R"({"z": 1, "a": 2})", "s");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->dump(), R"({"z":1,"a":2})");
}

// For large objects (a tokenizer's vocabulary): keys sorted, a duplicate's last value kept as ParseJson keeps it,
// errors placed the same way.
TEST(ParseSortedJson, SortsKeysAndPlacesErrors) {
  auto value = ParseSortedJson(R"({"z": 1, "a": 2, "z": 3})", "s");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->dump(), R"({"a":2,"z":3})");
  EXPECT_EQ(ParseJson(R"({"z": 1, "a": 2, "z": 3})", "s")->dump(), R"({"z":3,"a":2})");
  auto bad = ParseSortedJson("{\n  \"a\": 1,\n  \"b\": ]\n}", "tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().message().starts_with("tokenizer.json:3:8: ")) << bad.status().message();
}

TEST(JsonField, TypedAccessNamesTheKey) {
  Json object = {{"step", 10}, {"loss", 2.5}, {"name", "gpt"}};
  EXPECT_EQ(*JsonField<int>(object, "step", "metrics"), 10);
  EXPECT_DOUBLE_EQ(*JsonField<double>(object, "loss", "metrics"), 2.5);
  auto missing = JsonField<int>(object, "lr", "metrics");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "metrics: missing key 'lr'");
  auto wrong = JsonField<int>(object, "name", "metrics");
  EXPECT_EQ(wrong.status().message(), "metrics: key 'name' has the wrong type (string)");
  EXPECT_FALSE(JsonField<int>(Json::array(), "x", "list").ok());
}

// nlohmann's own get<int>() casts a float or a too-large number unchecked (undefined behaviour for 1e30): every
// integer read through JsonField or JsonInteger is range-checked, and floats must fit the float type asked for.
TEST(JsonField, NumbersOutOfRangeAreErrors) {
  Json object = {{"big", 1e30}, {"half", 2.5}, {"whole", 3.0}, {"wide", 4294967296}, {"negative", -1},
                 {"huge", 1e300}, {"max", 18446744073709551615u}};
  EXPECT_EQ(JsonField<int>(object, "big", "m").status().message(),
            "m: key 'big'=1e+30 is not an integer in [-2147483648, 2147483647]");
  EXPECT_FALSE(JsonField<int64_t>(object, "half", "m").ok());
  EXPECT_EQ(*JsonField<int>(object, "whole", "m"), 3);
  EXPECT_FALSE(JsonField<int>(object, "wide", "m").ok());
  EXPECT_EQ(*JsonField<int64_t>(object, "wide", "m"), 4294967296);
  EXPECT_FALSE(JsonField<uint64_t>(object, "negative", "m").ok());
  EXPECT_FALSE(JsonField<uint16_t>(object, "wide", "m").ok());
  EXPECT_EQ(*JsonField<uint64_t>(object, "max", "m"), 18446744073709551615u);
  EXPECT_FALSE(JsonField<int64_t>(object, "max", "m").ok());
  EXPECT_FALSE(JsonField<int64_t>(Json{{"x", 9.3e18}}, "x", "m").ok());  // past INT64_MAX, though a whole number
  EXPECT_EQ(JsonField<float>(object, "huge", "m").status().message(), "m: key 'huge'=1e+300 is out of range");
  EXPECT_DOUBLE_EQ(*JsonField<double>(object, "huge", "m"), 1e300);
  EXPECT_EQ(*JsonFieldOr<int>(object, "absent", 7, "m"), 7);
  EXPECT_FALSE(JsonFieldOr<int>(object, "big", 7, "m").ok());
}

TEST_F(TempDir, WriteAtomicReplacesAndLeavesNoTemporaries) {
  fs::path path = dir_ / "report.json";
  ASSERT_TRUE(WriteJsonFile(path, Json{{"busbw_gbps", 188.5}}).ok());
  ASSERT_TRUE(WriteJsonFile(path, Json{{"busbw_gbps", 190.0}}).ok());
  auto back = ReadJsonFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_DOUBLE_EQ((*back)["busbw_gbps"].get<double>(), 190.0);
  EXPECT_EQ(*ReadFile(path), "{\n  \"busbw_gbps\": 190.0\n}\n");
  int files = 0;
  for ([[maybe_unused]] auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::owner_read, fs::perms::owner_read);
}

// A writer killed midway (SIGKILL: no handler runs) left its temporary for good, as large as its file (a dataset's
// .bin): the next writer of the file on the same host removes it once its process is gone, and leaves those of live
// writers, of other hosts and PID namespaces (where the process number says nothing), of other files and unmarked ones.
TEST_F(TempDir, TemporariesOfDeadWritersOnThisHostAreRemoved) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  struct stat ns {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  const pid_t ended = fork();  // a process that has ended: a child, reaped
  if (ended == 0) _exit(0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  const std::string here = fmt::format("{}.{}.", host, ns.st_ino);
  const std::string dead = fmt::format(".web.bin.tmp.{}{}.Ab12Cd", here, ended);
  std::set<std::string> kept = {
      fmt::format(".web.bin.tmp.{}1.Ab12Cd", here),  // init: alive
      fmt::format(".web.bin.tmp.other-host.{}.{}.Ab12Cd", ns.st_ino, ended),
      fmt::format(".web.bin.tmp.{}.{}.{}.Ab12Cd", host, ns.st_ino + 1, ended),
      fmt::format(".web.idx.tmp.{}{}.Ab12Cd", here, ended),
      ".web.bin.tmp.Ab12Cd",
  };
  for (const std::string& name : kept) ASSERT_TRUE(WriteFileAtomic(dir_ / name, "partial").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ / dead, "partial").ok());
  auto file = AtomicFile::Create(dir_ / "web.bin");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename().string());
  EXPECT_FALSE(names.contains(dead));
  // Its own temporary carries this process's mark.
  const std::string mine = fmt::format(".web.bin.tmp.{}{}.", here, getpid());
  EXPECT_EQ(std::count_if(names.begin(), names.end(), [&](const std::string& n) { return n.starts_with(mine); }), 1);
  ASSERT_TRUE(file->Write("whole").ok());
  ASSERT_TRUE(file->Commit().ok());
  names.clear();
  for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename().string());
  kept.insert("web.bin");
  EXPECT_EQ(names, kept);
}

// Another host's or PID namespace's temporary cannot be judged from here (its process number says nothing) and
// stays; untouched for an hour it gets one warning naming it, its size, its writer and the file, as large as what
// was written and hidden by its leading dot. A fresh one (a writer busy elsewhere) gets none.
TEST_F(TempDir, StaleTemporariesOfOtherHostsAreNamedAndKept) {
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  struct stat ns {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  const std::string stale = ".web.bin.tmp.node7.cluster.local.4026531836.4242.Ab12Cd";
  const std::string fresh = ".web.bin.tmp.node8.4026531836.4343.Ef34Gh";
  const std::string other_ns = fmt::format(".web.bin.tmp.{}.{}.4444.Ij56Kl", host, ns.st_ino + 1);
  for (const std::string& name : {stale, fresh, other_ns}) {
    ASSERT_TRUE(WriteFileAtomic(dir_ / name, std::string(3 << 20, 'x')).ok());
  }
  for (const std::string& name : {stale, other_ns}) {
    const auto old = fs::file_time_type::clock::now() - std::chrono::minutes(90);
    fs::last_write_time(dir_ / name, old);
  }
  std::vector<std::string> lines;
  SetLogSink([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  auto file = AtomicFile::Create(dir_ / "web.bin");
  SetLogSink({});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  EXPECT_EQ(lines.size(), 2u) << all;
  EXPECT_NE(all.find(fmt::format("warning: {} (3.0 MiB) was left by process 4444 on {} (another PID namespace) and "
                                 "untouched for 1.5 h: if no process there still writes {}, its writer died and it can "
                                 "be removed\n", (dir_ / other_ns).string(), host, (dir_ / "web.bin").string())),
            std::string::npos) << all;
  EXPECT_NE(all.find(fmt::format("warning: {} (3.0 MiB) was left by process 4242 on node7.cluster.local and untouched "
                                 "for 1.5 h", (dir_ / stale).string())),
            std::string::npos) << all;
  for (const std::string& name : {stale, fresh, other_ns}) EXPECT_TRUE(fs::exists(dir_ / name)) << name;
}

// A set of files committed together: all or, when one cannot be renamed into place (a non-empty directory made in
// the way meanwhile; one there before is refused by Create), none of them new; what was there stays, and no
// temporaries are left.
TEST_F(TempDir, FilesCommittedTogetherAreAllNewOrNoneIs) {
  ASSERT_TRUE(WriteFileAtomic(dir_ / "set.bin", "old bin").ok());
  std::vector<AtomicFile> files;
  for (const char* name : {"set.bin", "set.idx", "set.vocab"}) {
    auto file = AtomicFile::Create(dir_ / name);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_TRUE(file->Write(std::string("new ") + name).ok());
    files.push_back(std::move(*file));
  }
  fs::create_directories(dir_ / "set.idx" / "in-the-way");
  const Status status = CommitTogether(files);
  EXPECT_NE(status.message().find("set.idx: Is a directory"), std::string::npos) << status.ToString();
  files.clear();
  EXPECT_FALSE(fs::exists(dir_ / "set.bin"));  // the new one is gone, and the old one it replaced with it
  EXPECT_FALSE(fs::exists(dir_ / "set.vocab"));
  std::vector<std::string> left;
  for (auto& entry : fs::directory_iterator(dir_)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"set.idx"});

  fs::remove_all(dir_ / "set.idx");
  for (const char* name : {"set.bin", "set.idx"}) {
    auto file = AtomicFile::Create(dir_ / name);
    ASSERT_TRUE(file.ok() && file->Write(name).ok());
    files.push_back(std::move(*file));
  }
  ASSERT_TRUE(CommitTogether(files).ok());
  EXPECT_EQ(*ReadFile(dir_ / "set.bin"), "set.bin");
  EXPECT_EQ(*ReadFile(dir_ / "set.idx"), "set.idx");
  EXPECT_EQ(files[0].Commit().code(), StatusCode::kFailedPrecondition);  // committed once only
}

// What cannot be replaced by a rename is written to: a device or a pipe (`--export /dev/stdout`, a FIFO) gets the
// bytes and stays what it is, and a full one (/dev/full) is an error; a link to a file keeps pointing at the new
// file. The temporary and the rename replaced them: run as root, `--export /dev/full` left /dev/full a regular file.
TEST_F(TempDir, DevicesPipesAndLinksAreWrittenThroughNotReplaced) {
  fs::create_symlink("/dev/null", dir_ / "null");
  ASSERT_TRUE(WriteFileAtomic(dir_ / "null", "discarded").ok());
  EXPECT_TRUE(fs::is_symlink(dir_ / "null"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  fs::create_symlink("/dev/full", dir_ / "full");
  auto full = AtomicFile::Create(dir_ / "full");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const Status written = full->Write(std::string(1 << 16, 'x'));
  EXPECT_NE(written.message().find("No space left on device"), std::string::npos) << written.ToString();
  EXPECT_TRUE(fs::is_symlink(dir_ / "full"));

  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  const Fd reader(::open((dir_ / "fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // so that a writer may open
  ASSERT_GE(reader.get(), 0);
  const Status piped = WriteFileAtomic(dir_ / "fifo", "through the pipe");
  EXPECT_TRUE(piped.ok()) << piped.ToString();
  char received[64] = {};
  EXPECT_EQ(::read(reader.get(), received, sizeof received), 16);
  EXPECT_STREQ(received, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));

  fs::create_directories(dir_ / "real");
  ASSERT_TRUE(WriteFileAtomic(dir_ / "real" / "report.json", "old").ok());
  fs::create_symlink(dir_ / "real" / "report.json", dir_ / "report.json");
  ASSERT_TRUE(WriteFileAtomic(dir_ / "report.json", "new").ok());
  EXPECT_TRUE(fs::is_symlink(dir_ / "report.json"));
  EXPECT_EQ(*ReadFile(dir_ / "real" / "report.json"), "new");
  std::vector<std::string> left;
  for (auto& entry : fs::directory_iterator(dir_ / "real")) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"report.json"});  // the temporary went beside the file, and is gone

  // Files committed together that fail take back the new files they renamed, never a device written to.
  std::vector<AtomicFile> files;
  for (const fs::path& path : {dir_ / "null", dir_ / "set.idx"}) {
    auto file = AtomicFile::Create(path);
    ASSERT_TRUE(file.ok() && file->Write("x").ok());
    files.push_back(std::move(*file));
  }
  ASSERT_TRUE(fs::create_directories(dir_ / "set.idx" / "in-the-way"));
  EXPECT_FALSE(CommitTogether(files).ok());
  EXPECT_TRUE(fs::is_symlink(dir_ / "null"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  const Status directory = WriteFileAtomic(dir_, "x");
  EXPECT_EQ(directory.message(), dir_.string() + ": Is a directory") << directory.ToString();
}

// A FIFO that no one reads: open() for writing waited for a reader, and SIGTERM could not end it
// (`srunway-train --metrics-file fifo`, `--export fifo`, `srunway-launch --log-dir` holding one).
TEST_F(TempDir, AFifoThatNoOneReadsIsRefusedNotWaitedOn) {
  const fs::path fifo = dir_ / "m.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opens the reading end after a second, so that an open that waits returns and this test fails, not hangs.
  std::atomic<bool> done = false;
  std::thread late_reader([&] {
    for (int i = 0; i < 20 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const Fd reader(done ? -1 : ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  const std::string want = fifo.string() + " is a FIFO that no one reads: start its reader first";
  auto appended = OpenToWrite(fifo, O_CREAT | O_APPEND);
  EXPECT_FALSE(appended.ok());
  EXPECT_EQ(appended.status().message(), want);
  auto replaced = AtomicFile::Create(fifo);
  EXPECT_FALSE(replaced.ok());
  EXPECT_EQ(replaced.status().message(), want);
  done = true;
  late_reader.join();
  // With a reader, the descriptor blocks as usual: a write waits for room rather than failing with EAGAIN.
  const Fd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  auto writer = OpenToWrite(fifo, O_APPEND);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_EQ(::fcntl(writer->get(), F_GETFL) & O_NONBLOCK, 0);
}

// A FIFO that no one writes: open() for reading waited for a writer, and SIGTERM could not end it
// (`--config fifo`, a blueprint, a tokenizer's file).
TEST_F(TempDir, AFifoThatNoOneWritesIsRefusedNotWaitedOn) {
  const fs::path fifo = dir_ / "config.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opens the writing end after a second, so that a read that waits returns and this test fails, not hangs.
  std::atomic<bool> done = false;
  std::thread late_writer([&] {
    for (int i = 0; i < 20 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!done) {
      const Fd writer(::open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
      EXPECT_TRUE(WriteAll(writer.get(), "late", "fifo").ok());
    }
  });
  auto read = ReadFile(fifo);
  done = true;
  late_writer.join();
  EXPECT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), fifo.string() + " is a FIFO that no one writes: start its writer first");

  // A pipe with a writer, as bash's <(...) gives: what it writes, whether there before the first read or after.
  for (const bool written_first : {true, false}) {
    int ends[2];
    ASSERT_EQ(::pipe(ends), 0);
    const Fd read_end(ends[0]);
    Fd write_end(ends[1]);
    if (written_first) {
      ASSERT_TRUE(WriteAll(write_end.get(), "early ", "pipe").ok());
    }
    std::thread writer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_TRUE(WriteAll(write_end.get(), "late", "pipe").ok());
      write_end = Fd(-1);
    });
    auto piped = ReadFile(fmt::format("/dev/fd/{}", read_end.get()));
    writer.join();
    ASSERT_TRUE(piped.ok()) << piped.status().ToString();
    EXPECT_EQ(*piped, written_first ? "early late" : "late");
  }
}

TEST_F(TempDir, WriteIntoMissingDirectoryFailsAndNamesIt) {
  Status status = WriteFileAtomic(dir_ / "missing" / "x", "data");
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find((dir_ / "missing").string()), std::string::npos) << status.message();
}

TEST_F(TempDir, PrepareWritableDirMakesTheParentsOrSaysWhyItCannot) {
  EXPECT_TRUE(PrepareWritableDir(dir_ / "a" / "b", "--save").ok());
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b"));
  ASSERT_TRUE(WriteFileAtomic(dir_ / "file", "x").ok());
  const Status blocked = PrepareWritableDir(dir_ / "file" / "ckpt", "--log-dir");
  EXPECT_EQ(blocked.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(blocked.message(), "--log-dir " + (dir_ / "file" / "ckpt").string() +
                                   ": cannot create the directory: Not a directory");
}

TEST_F(TempDir, CheckWritableFileSaysWhyAFileCouldNotBeWrittenThereLater) {
  EXPECT_TRUE(CheckWritableFile(dir_ / "out.json", "-J").ok());
  const Status missing = CheckWritableFile(dir_ / "missing" / "out.json", "-J");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "-J " + (dir_ / "missing" / "out.json").string() + ": cannot write in " +
                                   (dir_ / "missing").string() + ": No such file or directory");
  const Status directory = CheckWritableFile(dir_, "--export");
  EXPECT_EQ(directory.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(directory.message(), "--export " + dir_.string() + " is a directory: name the file to write");
  // A device or a pipe is written in place: a user who may write it needs not write in its directory (/dev).
  // Checked as another user than root, whom no permission stops.
  ASSERT_EQ(::mkfifo((dir_ / "open").c_str(), 0666), 0);
  ASSERT_EQ(::chmod((dir_ / "open").c_str(), 0666), 0);  // past the umask
  ASSERT_EQ(::mkfifo((dir_ / "closed").c_str(), 0600), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  // A link is kept and its file replaced: the file's directory must take the new one, not the link's.
  fs::create_directories(dir_ / "anyone");
  ASSERT_EQ(::chmod((dir_ / "anyone").c_str(), 0777), 0);
  ASSERT_TRUE(WriteFileAtomic(dir_ / "report.json", "{}").ok());
  fs::create_symlink(dir_ / "report.json", dir_ / "anyone" / "report.json");
  const pid_t child = ::fork();
  if (child == 0) {
    if (::getuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
    const Status closed = CheckWritableFile(dir_ / "closed", "-J");
    const Status linked = CheckWritableFile(dir_ / "anyone" / "report.json", "--report");
    ::_exit(CheckWritableFile(dir_ / "open", "--export").ok() &&
                    closed.message() == "-J " + (dir_ / "closed").string() + ": cannot write it: Permission denied" &&
                    linked.message() == "--report " + (dir_ / "anyone" / "report.json").string() +
                                            ": cannot write in " + dir_.string() + ": Permission denied"
                ? 0
                : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // A bare name is written in the working directory.
  EXPECT_TRUE(CheckWritableFile("srunway-check-writable.json", "--export").ok() || ::access(".", W_OK) != 0);
}

TEST_F(TempDir, ReadMissingFileNamesIt) {
  auto text = ReadFile(dir_ / "nope");
  EXPECT_EQ(text.status().code(), StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("nope: No such file"), std::string::npos);
  auto json = ReadJsonFile(dir_ / "nope.json");
  EXPECT_EQ(json.status().code(), StatusCode::kNotFound);
}

TEST_F(TempDir, ReadJsonFileReportsItsPath) {
  fs::path path = dir_ / "bad.json";
  ASSERT_TRUE(WriteFileAtomic(path, "[1,\n2,,]").ok());
  auto json = ReadJsonFile(path);
  ASSERT_FALSE(json.ok());
  EXPECT_TRUE(json.status().message().starts_with(path.string() + ":2:3: ")) << json.status().message();
}

}  // namespace
}  // namespace srunway::common
