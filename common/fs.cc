// Whole-file reads and atomic writes: a reader sees the old file or the new one, never half of either.
#include "common/fs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/parse.h"
#include "common/process_mark.h"

namespace srunway::common {

Status WriteAll(int fd, std::string_view bytes, std::string_view what) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, fmt::format("write {}", what));
    written += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AppendWhole(int fd, std::string_view record, std::string_view what) {
  struct stat before {};
  if (::fstat(fd, &before) != 0) return ErrnoStatus(errno, fmt::format("stat {}", what));
  Status status = WriteAll(fd, record, what);
  if (!status.ok() && S_ISREG(before.st_mode)) (void)::ftruncate(fd, before.st_size);
  return status;
}

namespace {

// Clears O_NONBLOCK, which an open that must not wait for a FIFO's other end set.
Status SetBlocking(const Fd& fd, const std::filesystem::path& path) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "fcntl " + path.string());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  // Opened without waiting for a FIFO's writer: open() blocked until one came, and SIGTERM could not end it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat " + path.string());
  // A FIFO's first read does not wait either: end of file at once means no writer (a pipe with a writer, such as
  // bash's <(...), has data or would block); after it, reads wait for the writer as usual.
  bool first_of_fifo = S_ISFIFO(st.st_mode);
  if (!first_of_fifo) SRUNWAY_RETURN_IF_ERROR(SetBlocking(fd, path));
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (first_of_fifo) {
      if (n == 0) return FailedPrecondition("{} is a FIFO that no one writes: start its writer first", path.string());
      if (n < 0 && errno != EAGAIN) return ErrnoStatus(errno, "read " + path.string());
      first_of_fifo = false;
      SRUNWAY_RETURN_IF_ERROR(SetBlocking(fd, path));
      if (n < 0) continue;
    }
    if (n < 0) return ErrnoStatus(errno, "read " + path.string());
    if (n == 0) return contents;
    contents.append(buffer, static_cast<size_t>(n));
  }
}

StatusOr<Fd> OpenRegularFile(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "open " + path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "stat " + path.string());
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a device";
    return FailedPrecondition("{} is {}, not a file", path.string(), kind);
  }
  SRUNWAY_RETURN_IF_ERROR(SetBlocking(fd, path));
  return fd;
}

StatusOr<Fd> OpenToWrite(const std::filesystem::path& path, int flags, mode_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | flags, mode));
  if (fd.get() < 0 && errno == ENXIO) {
    return FailedPrecondition("{} is a FIFO that no one reads: start its reader first", path.string());
  }
  if (fd.get() < 0) return ErrnoStatus(errno, "open " + path.string());
  SRUNWAY_RETURN_IF_ERROR(SetBlocking(fd, path));
  return fd;
}

namespace {

// The file that a rename over `path` replaces: for a link to a file, the file it names (so the link stays).
std::filesystem::path Replaced(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  std::filesystem::path target = std::filesystem::canonical(path, ec);
  return ec ? path : target;
}

// What writers of the same target left in `dir`, named `stem` + their mark: removed when the writer was on this host
// and in this PID namespace and its process no longer exists (a process that exists, a live writer or a new process
// that took a dead one's number, keeps its temporary). Another host's or namespace's cannot be judged from here (the
// process number says nothing) and stays, but one untouched for kStaleTemporary gets a warning naming it, as large
// as what was written and hidden by its leading dot.
void SweepTemporaries(const std::filesystem::path& dir, const std::string& stem, const ProcessMark& me,
                      const std::filesystem::path& target) {
  constexpr int64_t kStaleTemporary = 3600;  // seconds
  std::vector<std::pair<std::filesystem::path, ProcessMark>> dead;
  struct Stale {
    std::filesystem::path path;
    ProcessMark writer;
    struct stat st;
  };
  std::vector<Stale> stale;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(stem)) continue;
    const std::optional<ProcessMark> writer = MarkFromName(std::string_view(name).substr(stem.size()));
    if (!writer) continue;
    if (writer->host == me.host && writer->pid_ns == me.pid_ns) {
      if (ProcessGone(*writer)) dead.emplace_back(it->path(), *writer);
      continue;
    }
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0 && std::time(nullptr) - st.st_mtime >= kStaleTemporary) {
      stale.push_back({it->path(), *writer, st});
    }
  }
  for (const auto& [path, writer] : dead) {
    const uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (::unlink(path.c_str()) != 0) continue;
    LogInfo("removed {} ({}): left by process {} on this host, which died while writing {}", path.string(),
            ec ? "size unknown" : ByteSize(bytes), writer.pid, target.string());
  }
  for (const auto& [path, writer, st] : stale) {
    LogWarn("{} ({}) was left by process {} on {}{} and untouched for {:.1f} h: if no process there still writes {}, "
            "its writer died and it can be removed", path.string(), ByteSize(static_cast<uintmax_t>(st.st_size)),
            writer.pid, writer.host, writer.host == me.host ? " (another PID namespace)" : "",
            static_cast<double>(std::time(nullptr) - st.st_mtime) / 3600.0, target.string());
  }
}

}  // namespace

StatusOr<AtomicFile> AtomicFile::Create(const std::filesystem::path& path) {
  std::filesystem::path target = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return ErrnoStatus(EISDIR, path.string());
    if (!S_ISREG(st.st_mode)) {
      // A device, a pipe or a socket: a rename would put a regular file in its place.
      SRUNWAY_ASSIGN_OR_RETURN(Fd fd, OpenToWrite(path, 0));
      return AtomicFile(path, "", fd.Release(), /*in_place=*/true);
    }
    target = Replaced(path);
  }
  std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  // The temporary's name says who writes it: this host, its PID namespace and the process
  // (".web.bin.tmp.node1.4026531836.4242.2klNwC"), so that a later writer of the same file on this host can tell one
  // whose process is gone (killed midway by SIGKILL, which no handler sees) from one still being written, on any
  // file system: a lock would not do, as Lustre's localflock keeps locks to one node. Without the mark (no namespace
  // to read, a name too long for it) a temporary is never taken for a dead one's.
  const std::string stem = "." + target.filename().string() + ".tmp.";
  const std::optional<ProcessMark> me = ThisProcessMark();
  std::string mark = me ? MarkInName(*me) : "";
  if (stem.size() + mark.size() + 6 > NAME_MAX) mark.clear();
  if (!mark.empty()) SweepTemporaries(dir, stem, *me, target);
  std::string tmp = (dir / (stem + mark + "XXXXXX")).string();
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "create temporary file in " + dir.string());
  AtomicFile file(target, std::move(tmp), fd, /*in_place=*/false);
  // mkostemp makes the file 0600; give it the usual mode of a new file.
  if (::fchmod(fd, 0644) != 0) return file.Fail(ErrnoStatus(errno, "chmod " + file.tmp_));
  return file;
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), fd_(std::exchange(other.fd_, -1)),
      in_place_(other.in_place_), synced_(std::exchange(other.synced_, false)) {
  other.tmp_.clear();
}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  synced_ = false;
}

Status AtomicFile::Fail(Status status) {
  Discard();
  return status;
}

Status AtomicFile::Write(std::string_view bytes) {
  if (fd_ < 0) return FailedPrecondition("write {}: the file was already committed or failed", path_.string());
  if (Status status = WriteAll(fd_, bytes, in_place_ ? path_.string() : tmp_); !status.ok()) return Fail(status);
  return Status::Ok();
}

Status AtomicFile::Sync() {
  if (fd_ < 0) {
    if (synced_) return Status::Ok();
    return FailedPrecondition("sync {}: the file was already committed or failed", path_.string());
  }
  const std::string& name = in_place_ ? path_.string() : tmp_;
  // A pipe or a terminal cannot be synced (EINVAL), and needs not be.
  if (::fsync(fd_) != 0 && !(in_place_ && errno == EINVAL)) return Fail(ErrnoStatus(errno, "fsync " + name));
  int result = ::close(fd_);
  fd_ = -1;
  // close can be the first to see a failed write on some file systems.
  if (result != 0) return Fail(ErrnoStatus(errno, "close " + name));
  synced_ = true;
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_ < 0 && !synced_) {
    return FailedPrecondition("commit {}: the file was already committed or failed", path_.string());
  }
  SRUNWAY_RETURN_IF_ERROR(Sync());
  synced_ = false;  // committed once only
  if (in_place_) return Status::Ok();
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return Fail(ErrnoStatus(errno, fmt::format("rename {} to {}", tmp_, path_.string())));
  }
  tmp_.clear();
  // The rename is durable only once the directory is synced.
  std::filesystem::path dir = path_.has_parent_path() ? path_.parent_path() : std::filesystem::path(".");
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return Status::Ok();
}

StatusOr<AtomicFile> StageFile(const std::filesystem::path& path, std::string_view contents) {
  SRUNWAY_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  SRUNWAY_RETURN_IF_ERROR(file.Write(contents));
  return file;
}

Status CommitTogether(std::vector<AtomicFile>& files) {
  for (AtomicFile& file : files) SRUNWAY_RETURN_IF_ERROR(file.Sync());
  for (size_t i = 0; i < files.size(); ++i) {
    if (Status committed = files[i].Commit(); !committed.ok()) {
      for (size_t j = 0; j < i; ++j) {
        if (!files[j].in_place()) ::unlink(files[j].path().c_str());
      }
      return committed;
    }
  }
  return Status::Ok();
}

Status PrepareWritableDir(const std::filesystem::path& dir, std::string_view flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return FailedPrecondition("{} {}: cannot create the directory: {}", flag, dir.string(), ec.message());
  if (::access(dir.c_str(), W_OK) != 0) {
    return ErrnoStatus(errno, fmt::format("{} {}: cannot write in the directory", flag, dir.string()));
  }
  return Status::Ok();
}

Status CheckWritableFile(const std::filesystem::path& path, std::string_view flag) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("{} {} is a directory: name the file to write", flag, path.string());
  }
  // A device or a pipe is written in place (AtomicFile): its directory (/dev) needs not be writable.
  if (struct stat st {}; ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (::access(path.c_str(), W_OK) != 0) {
      return ErrnoStatus(errno, fmt::format("{} {}: cannot write it", flag, path.string()));
    }
    return Status::Ok();
  }
  const std::filesystem::path file = Replaced(path);
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (::access(dir.c_str(), W_OK) != 0) {
    return ErrnoStatus(errno, fmt::format("{} {}: cannot write in {}", flag, path.string(), dir.string()));
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view contents) {
  SRUNWAY_ASSIGN_OR_RETURN(AtomicFile file, StageFile(path, contents));
  return file.Commit();
}

Status WriteFilesAtomic(const std::filesystem::path& dir, const std::map<std::string, std::string>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), "create " + dir.string());
  std::vector<AtomicFile> staged;
  for (const auto& [name, contents] : files) {
    const std::filesystem::path path = dir / name;  // a name may hold a subdirectory: "plugstack.conf.d/x.conf"
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return ErrnoStatus(ec.value(), "create " + path.parent_path().string());
    SRUNWAY_ASSIGN_OR_RETURN(AtomicFile file, StageFile(path, contents));
    staged.push_back(std::move(file));
  }
  return CommitTogether(staged);
}

}  // namespace srunway::common
