// See host_memory.h.
#include "trainer/device/host_memory.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/fs.h"
#include "common/parse.h"
#include "trainer/device/device.h"

namespace srunway::trainer {
namespace {

// A file's one number; nullopt for a missing file, "max" or anything else.
std::optional<size_t> ReadBytes(const std::filesystem::path& path) {
  auto text = common::ReadFile(path);
  if (!text.ok()) return std::nullopt;
  auto value = common::ParseInt(common::Trim(*text), path.string(), 0);
  if (!value.ok()) return std::nullopt;
  return static_cast<size_t>(*value);
}

// "MemTotal:  24683440 kB" -> bytes; 0 when `key` is not there.
size_t MeminfoBytes(std::string_view meminfo, std::string_view key) {
  for (std::string_view line : common::Split(meminfo, '\n')) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::string_view value = common::Trim(line.substr(key.size() + 1));
    if (value.ends_with(" kB")) value.remove_suffix(3);
    auto kib = common::ParseInt(common::Trim(value), key, 0, INT64_MAX / 1024);
    if (kib.ok()) return static_cast<size_t>(*kib) * 1024;
  }
  return 0;
}

// The page cache a cgroup is charged for, which the kernel reclaims before it OOM-kills anyone: its file pages,
// active and inactive, from its memory.stat (`prefix` "total_" for v1's counts of the whole subtree, as its usage;
// v2's are of the subtree already). tmpfs and shared memory pages are on the anonymous lists and stay counted.
size_t ReclaimableCache(const std::filesystem::path& stat, std::string_view prefix) {
  auto text = common::ReadFile(stat);
  if (!text.ok()) return 0;
  size_t cache = 0;
  for (std::string_view line : common::Split(*text, '\n')) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, space);
    if (!key.starts_with(prefix)) continue;
    if (key.substr(prefix.size()) != "active_file" && key.substr(prefix.size()) != "inactive_file") continue;
    auto value = common::ParseInt(common::Trim(line.substr(space + 1)), key, 0);
    if (value.ok()) cache += static_cast<size_t>(*value);
  }
  return cache;
}

// The tightest cgroup above the rank: its path (as /proc/self/cgroup names it), limit and usage.
struct CgroupBound {
  std::string path;
  size_t limit = 0, used = 0;
  size_t room() const { return used < limit ? limit - used : 0; }
};

// Walks from `leaf` (a directory under `mount`) up to `mount`, keeping the cgroup with the least room left; what
// it uses is its usage less its page cache (a job's cgroup holds the pages of the files its earlier steps wrote or
// read: counted, a resumed run was refused the memory its checkpoint's cached pages would have given back).
// v1 reports "no limit" as a number near 2^63; anything from 2^62 on counts as none.
void TightestUnder(const std::filesystem::path& mount, const std::string& leaf, const char* limit_file,
                   const char* usage_file, std::string_view stat_prefix, std::optional<CgroupBound>& best) {
  std::filesystem::path relative = std::filesystem::path(leaf).relative_path();
  while (true) {
    const std::filesystem::path dir = mount / relative;
    const std::optional<size_t> limit = ReadBytes(dir / limit_file);
    if (limit.has_value() && *limit < (size_t{1} << 62)) {
      const size_t usage = ReadBytes(dir / usage_file).value_or(0);
      const size_t cache = ReclaimableCache(dir / "memory.stat", stat_prefix);
      CgroupBound here{"/" + relative.generic_string(), *limit, usage > cache ? usage - cache : 0};
      if (!best.has_value() || here.room() < best->room()) best = std::move(here);
    }
    if (relative.empty()) break;
    relative = relative.has_parent_path() ? relative.parent_path() : std::filesystem::path();
  }
}

}  // namespace

HostMemory HostMemoryBudget(const std::filesystem::path& root) {
  HostMemory memory;
  auto meminfo = common::ReadFile(root / "proc/meminfo");
  const size_t total = meminfo.ok() ? MeminfoBytes(*meminfo, "MemTotal") : 0;
  const size_t available = meminfo.ok() ? MeminfoBytes(*meminfo, "MemAvailable") : 0;
  if (total > 0) {
    memory = {total, "this machine's memory"};
    if (available > 0 && available < total) {
      memory = {available, fmt::format("what of this machine's {:.2f} GiB was free when it started", Gib(total))};
    }
  }
  std::optional<CgroupBound> cgroup;
  if (auto groups = common::ReadFile(root / "proc/self/cgroup"); groups.ok()) {
    // "0::/slurm/uid_0/job_7/step_0/user/task_0" (v2), or "4:memory:/slurm/uid_0/job_7/step_0" (v1).
    for (std::string_view line : common::Split(*groups, '\n')) {
      const std::vector<std::string_view> fields = common::Split(line, ':');
      if (fields.size() < 3) continue;
      const std::string path(line.substr(fields[0].size() + fields[1].size() + 2));
      if (fields[0] == "0" && fields[1].empty()) {
        TightestUnder(root / "sys/fs/cgroup", path, "memory.max", "memory.current", "", cgroup);
      } else {
        for (std::string_view controller : common::Split(fields[1], ',')) {
          if (controller != "memory") continue;
          TightestUnder(root / "sys/fs/cgroup/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                        "total_", cgroup);
        }
      }
    }
  }
  if (cgroup.has_value() && (memory.bytes == 0 || cgroup->room() < memory.bytes)) {
    memory = {cgroup->room(), fmt::format("what cgroup {} had left of its {:.2f} GiB limit when it started: Slurm's "
                                          "--mem sets it", cgroup->path, Gib(cgroup->limit))};
  }
  return memory;
}

HostMemory ShareOf(const HostMemory& whole, int ranks) {
  if (ranks <= 1 || whole.bytes == 0) return whole;
  return {whole.bytes / static_cast<size_t>(ranks), fmt::format("this node's {} ranks share {}", ranks, whole.why)};
}

}  // namespace srunway::trainer
