// The lease on a --save directory: one run saves there at a time.
#include "trainer/ckpt/save_lease.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <random>

#include "common/fs.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/subprocess.h"

namespace srunway::trainer {
namespace {

std::string Contents(const SaveLeaseHolder& holder) {
  const common::Json json = {{"job", holder.job}, {"host", holder.process.host}, {"pid_ns", holder.process.pid_ns},
                             {"pid", holder.process.pid}, {"nonce", holder.nonce}, {"cluster", holder.cluster}};
  return json.dump() + "\n";
}

// The holder a lease names; none when it does not parse (a file cut short, edited by hand).
std::optional<SaveLeaseHolder> ParseHolder(std::string_view text) {
  auto json = common::ParseJson(text, "lease");
  if (!json.ok()) return std::nullopt;
  auto job = common::JsonField<std::string>(*json, "job", "lease");
  auto host = common::JsonField<std::string>(*json, "host", "lease");
  auto pid_ns = common::JsonField<uint64_t>(*json, "pid_ns", "lease");
  auto pid = common::JsonField<int64_t>(*json, "pid", "lease");
  auto nonce = common::JsonField<std::string>(*json, "nonce", "lease");
  auto cluster = json->contains("cluster") ? common::JsonField<std::string>(*json, "cluster", "lease")
                                            : common::StatusOr<std::string>(std::string());
  if (!job.ok() || !host.ok() || !pid_ns.ok() || !pid.ok() || !nonce.ok() || !cluster.ok()) return std::nullopt;
  return SaveLeaseHolder{*job, {*host, *pid_ns, *pid}, *nonce, *cluster};
}

// Whether Slurm says `holder`'s job has ended: "its job has ended: CANCELLED", "its job is no longer known to
// Slurm" (purged MinJobAge after it ended); none while it is pending, running, suspended or completing, or where
// scontrol cannot say (not installed, the controller unreachable), and for another cluster's job, whose number
// means nothing to this cluster's controller.
std::optional<std::string> SlurmSaysEnded(const SaveLeaseHolder& holder, const SaveLeaseHolder& me) {
  if (holder.cluster.empty() || holder.cluster != me.cluster || !common::ParseInt(holder.job, "job", 1).ok()) {
    return std::nullopt;
  }
  auto shown = common::RunCommand({"scontrol", "show", "job", "-o", holder.job}, true, std::chrono::seconds(10));
  if (!shown.ok()) return std::nullopt;
  if (shown->exit_code != 0) {
    if (shown->output.find("Invalid job id specified") != std::string::npos) {
      return std::string("its job is no longer known to Slurm");
    }
    return std::nullopt;
  }
  constexpr std::string_view kKey = " JobState=";
  const size_t at = shown->output.find(kKey);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + kKey.size();
  const std::string state = shown->output.substr(start, shown->output.find_first_of(" \n", start) - start);
  for (std::string_view ended : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                                 "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}) {
    if (state == ended) return fmt::format("its job has ended: {}", state);
  }
  return std::nullopt;
}

// "job 1234's process 4242 on node3", or "process 4242 on node3" outside Slurm.
std::string Describe(const SaveLeaseHolder& holder) {
  return fmt::format("{}process {} on {}", holder.job.empty() ? "" : fmt::format("job {}'s ", holder.job),
                     holder.process.pid, holder.process.host);
}

// Seconds since the file was last touched (its modification time).
common::StatusOr<double> SecondsSinceTouched(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return common::ErrnoStatus(errno, "stat " + path.string());
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
         1e-9 * static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec);
}

}  // namespace

SaveLeaseHolder ThisLeaseHolder() {
  SaveLeaseHolder holder;
  if (const char* job = std::getenv("SLURM_JOB_ID")) holder.job = job;
  if (const char* cluster = std::getenv("SLURM_CLUSTER_NAME")) holder.cluster = cluster;
  holder.process = common::ThisProcessMark().value_or(common::ProcessMark{});
  std::random_device random;
  holder.nonce = fmt::format("{:08x}{:08x}", random(), random());
  return holder;
}

common::StatusOr<std::unique_ptr<SaveLease>> SaveLease::Take(const std::filesystem::path& dir,
                                                            const SaveLeaseHolder& me, std::chrono::milliseconds beat) {
  const std::filesystem::path path = dir / kFileName;
  const std::string contents = Contents(me);
  for (int attempt = 0; attempt < 3; ++attempt) {
    // No lease there: this one, created whole or not at all by one run of any number trying at once.
    if (common::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)); fd.get() >= 0) {
      common::Status written = common::WriteAll(fd.get(), contents, path.string());
      if (written.ok() && ::fsync(fd.get()) != 0) written = common::ErrnoStatus(errno, "fsync " + path.string());
      if (!written.ok()) {
        ::unlink(path.c_str());
        return written;
      }
      return std::unique_ptr<SaveLease>(new SaveLease(path, contents, beat));
    }
    if (errno != EEXIST) {
      return common::ErrnoStatus(errno, fmt::format("--save {}: create {}", dir.string(), path.string()));
    }
    auto text = common::ReadFile(path);
    auto age = SecondsSinceTouched(path);
    if (!text.ok() || !age.ok()) {
      const common::Status& failed = text.ok() ? age.status() : text.status();
      if (failed.code() == common::StatusCode::kNotFound) continue;  // removed meanwhile (its run ended): again
      return failed.WithContext("--save " + dir.string());
    }
    const std::optional<SaveLeaseHolder> holder = ParseHolder(*text);
    std::optional<std::string> ended;
    if (!holder) {
      ended = "its lease does not parse";
    } else if (!me.job.empty() && holder->job == me.job) {
      ended = "this job, run again";
    } else if (common::ProcessGone(holder->process)) {
      ended = "that process is gone";
    } else if (*age >= static_cast<double>(kStale.count())) {
      ended = "its lease went stale";
    } else {
      ended = SlurmSaysEnded(*holder, me);
    }
    if (!ended) {
      return common::FailedPrecondition(
          "--save {} is in use by {} (its lease {} touched {:.0f} s ago): two runs saving in one directory mix their "
          "checkpoints; give this run its own --save, or end that one (a lease left by a run that was killed is "
          "taken over once Slurm says its job has ended, or {} s after its last touch)", dir.string(),
          Describe(*holder), path.string(), std::max(0.0, *age), kStale.count());
    }
    // Taken over by replacing it whole, then read back a moment later: of two runs taking over at once, the one
    // whose rename came last holds it, and the other judges that lease on its next try.
    SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(path, contents));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (auto back = common::ReadFile(path); back.ok() && *back == contents) {
      common::LogInfo("--save {}: took over the lease of {} ({})", dir.string(),
                      holder ? Describe(*holder) : std::string("a run"), *ended);
      return std::unique_ptr<SaveLease>(new SaveLease(path, contents, beat));
    }
  }
  return common::FailedPrecondition("--save {}: its lease {} kept changing hands: is another run starting there?",
                                    dir.string(), path.string());
}

SaveLease::SaveLease(std::filesystem::path path, std::string contents, std::chrono::milliseconds beat)
    : path_(std::move(path)), contents_(std::move(contents)) {
  beating_ = std::thread([this, beat] {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, beat, [this] { return stop_; })) Touch();
  });
}

SaveLease::~SaveLease() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  beating_.join();
  if (Check().ok()) ::unlink(path_.c_str());
}

void SaveLease::Touch() {
  // Only this run's own lease: one that another run took over is left to it.
  if (Check().ok()) ::utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);
}

common::Status SaveLease::Check() const {
  auto text = common::ReadFile(path_);
  if (text.ok() && *text == contents_) return common::Status::Ok();
  const std::string dir = path_.parent_path().string();
  if (!text.ok()) {
    return common::FailedPrecondition("--save {}: this run's lease is gone ({}): stopping rather than save beside "
                                      "another run", dir, text.status().message());
  }
  const std::optional<SaveLeaseHolder> holder = ParseHolder(*text);
  return common::FailedPrecondition("--save {}: {} took the directory over (this run's lease {} was replaced): "
                                    "stopping rather than save beside it", dir,
                                    holder ? Describe(*holder) : std::string("another run"), path_.string());
}

}  // namespace srunway::trainer
