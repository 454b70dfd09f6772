// Whole-file reads and atomic writes: a reader sees the old file or the new one, never half of either.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace srunway::common {

// Owns a file descriptor (-1: none): closed on every path out of its scope.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { Close(); }
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

StatusOr<std::string> ReadFile(const std::filesystem::path& path);

// Opens a regular file to read or map; anything else is refused, naming what it is (`data/web.bin is a FIFO,
// not a file`). A FIFO is opened without waiting for a writer: waiting blocked in open(), where SIGTERM could
// not end it.
StatusOr<Fd> OpenRegularFile(const std::filesystem::path& path);

// open(2) for writing (`flags` beside O_WRONLY: O_CREAT, O_APPEND, ...) that does not wait: a FIFO that no one
// reads is refused (`m.jsonl is a FIFO that no one reads: start its reader first`) where open() blocked until a
// reader came, and SIGTERM could not end it. The descriptor blocks as usual once open.
StatusOr<Fd> OpenToWrite(const std::filesystem::path& path, int flags, mode_t mode = 0644);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR; `what` names the target in the error.
Status WriteAll(int fd, std::string_view bytes, std::string_view what);

// WriteAll of one record to a file opened with O_APPEND that holds whole records only: when the write fails (a full
// disk), a regular file is cut back to its size before it, so that no first part of a record stays for the next
// write (a resumed run's) to follow.
Status AppendWhole(int fd, std::string_view record, std::string_view what);

// A file written under a temporary name in the target's directory and renamed over it by Commit (after fsync,
// then the directory's fsync), for outputs too large to build in memory (checkpoints, datasets). Destroyed
// without Commit, or after any failed call (a full disk included), it removes the temporary: the target is
// either the old file or the complete new one. A symbolic link to a file stays, and the file it names is replaced.
// What a rename cannot replace without destroying it (a device, a pipe: `--export /dev/stdout`, a FIFO) is
// written in place, and Commit closes it.
class AtomicFile {
 public:
  static StatusOr<AtomicFile> Create(const std::filesystem::path& path);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();

  Status Write(std::string_view bytes);
  // Flushes the temporary to disk (where a full disk or an I/O error shows) without renaming it; Commit does this
  // too when not done.
  Status Sync();
  Status Commit();
  const std::filesystem::path& path() const { return path_; }
  bool in_place() const { return in_place_; }

 private:
  AtomicFile(std::filesystem::path path, std::string tmp, int fd, bool in_place)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd), in_place_(in_place) {}
  // Closes and removes the temporary, if any; Fail does so and returns `status`.
  void Discard();
  Status Fail(Status status);

  std::filesystem::path path_;
  std::string tmp_;
  int fd_ = -1;
  bool in_place_ = false;  // written in place (a device or a pipe)
  bool synced_ = false;  // written out and closed, not yet committed
};

// `contents` written under the temporary name of a new AtomicFile for `path`, for its Commit or CommitTogether.
StatusOr<AtomicFile> StageFile(const std::filesystem::path& path, std::string_view contents);

// Files that belong together (a dataset's .bin, .idx and tokenizer): all synced first, then renamed in order; when
// one fails, the new ones already renamed are removed, so that no mix of new and old files is left to be read as
// one set. The temporaries of those not committed go with `files`.
Status CommitTogether(std::vector<AtomicFile>& files);

// Creates `dir` (and its parents) where missing and checks that it can be written: at a program's start, so that an
// output directory given by `flag` that cannot work ends it before any work rather than when the work is done
// ("--save /data/ckpt: cannot create the directory: Permission denied"; "...: cannot write in the directory: ...").
Status PrepareWritableDir(const std::filesystem::path& dir, std::string_view flag);

// Whether a file can be written at `path` later (WriteFileAtomic, AtomicFile): not a directory, and its directory
// exists and is writable. For outputs written at the end of a long run, checked at its start; `flag` names the
// option in the error ("--export out/model.safetensors: cannot write in out: No such file or directory").
Status CheckWritableFile(const std::filesystem::path& path, std::string_view flag);

// Writes to a temporary name in the same directory, fsyncs, renames over `path` and fsyncs the directory.
// On any failure (a full disk included) the temporary is removed and `path` is untouched.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view contents);

// Creates `dir` (and its parents) and writes each name -> contents into it, committed together (CommitTogether):
// a failure, a full disk included, leaves none of them new beside the old (a new slurm.conf with an old gres.conf).
Status WriteFilesAtomic(const std::filesystem::path& dir, const std::map<std::string, std::string>& files);

}  // namespace srunway::common
