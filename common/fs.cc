// Whole-file reads and atomic writes: a reader sees the old file or the new one, never half of either.
#include "common/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace srunway::common {
namespace {

// Closes a file descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports the error; close can be the first to see a failed write on some file systems.
  int Close() {
    int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

}  // namespace

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

StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "open " + path.string());
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "read " + path.string());
    if (n == 0) return contents;
    contents.append(buffer, static_cast<size_t>(n));
  }
}

Status WriteFileAtomic(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  Fd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (fd.get() < 0) return ErrnoStatus(errno, "create temporary file in " + dir.string());

  auto fail = [&](std::string_view what) {
    Status status = ErrnoStatus(errno, fmt::format("{} {}", what, tmp));
    ::unlink(tmp.c_str());
    return status;
  };
  // mkostemp makes the file 0600; give it the usual mode of a new file.
  if (::fchmod(fd.get(), 0644) != 0) return fail("chmod");
  if (Status status = WriteAll(fd.get(), contents, tmp); !status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  if (::fsync(fd.get()) != 0) return fail("fsync");
  if (fd.Close() != 0) return fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename to " + path.string() + " from");

  // The rename is durable only once the directory is synced.
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return Status::Ok();
}

}  // namespace srunway::common
