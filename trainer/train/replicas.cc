#include "trainer/train/replicas.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#define XXH_INLINE_ALL  // xxHash's header alone (see trainer/meson.build)
#include <xxhash.h>

namespace srunway::trainer {
namespace {

// The ranks that hold one hash, in rank order.
struct Group {
  uint64_t hash = 0;
  std::vector<int> ranks;
};

// "rank 1 on node1", "rank 1 on node1 and rank 3 on node2", "rank 1 on node1, rank 2 on node1, ... and 5 more".
std::string NameRanks(const std::vector<int>& ranks, const std::function<std::string(int rank)>& name) {
  constexpr size_t kNamed = 4;
  std::vector<std::string> names;
  for (size_t i = 0; i < std::min(ranks.size(), kNamed); ++i) names.push_back(name(ranks[i]));
  if (ranks.size() > kNamed) {
    return fmt::format("{} and {} more", fmt::join(names, ", "), ranks.size() - kNamed);
  }
  if (names.size() == 1) return names[0];
  return fmt::format("{} and {}", fmt::join(names.begin(), names.end() - 1, ", "), names.back());
}

}  // namespace

common::StatusOr<uint64_t> HashDeviceBytes(Device& device, const void* data, size_t bytes, size_t block) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  if (device.kind() == DeviceKind::kCpu) {
    XXH3_64bits_update(&state, data, bytes);
    return XXH3_64bits_digest(&state);
  }
  std::vector<std::byte> host(std::min(bytes, std::max<size_t>(block, 1)));
  const auto* at = static_cast<const std::byte*>(data);
  for (size_t done = 0; done < bytes; done += host.size()) {
    const size_t count = std::min(host.size(), bytes - done);
    SRUNWAY_RETURN_IF_ERROR(device.CopyToHost(host.data(), at + done, count, device.main_stream()));
    SRUNWAY_RETURN_IF_ERROR(device.Synchronize(device.main_stream()));
    XXH3_64bits_update(&state, host.data(), count);
  }
  return XXH3_64bits_digest(&state);
}

std::string DescribeReplicas(const std::vector<uint64_t>& hashes, const std::function<std::string(int rank)>& name) {
  std::vector<Group> groups;
  for (size_t r = 0; r < hashes.size(); ++r) {
    auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.hash == hashes[r]; });
    if (group == groups.end()) group = groups.insert(groups.end(), Group{hashes[r], {}});
    group->ranks.push_back(static_cast<int>(r));
  }
  if (groups.size() <= 1) return "";
  auto most =
      std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return 2 * g.ranks.size() > hashes.size(); });
  if (most == groups.end()) {
    std::vector<std::string> held;
    for (const Group& g : groups) {
      held.push_back(fmt::format("{} {} hash {:016x}", NameRanks(g.ranks, name), g.ranks.size() == 1 ? "has" : "have",
                                 g.hash));
    }
    return fmt::format("no hash is held by more than half of the ranks: {}", fmt::join(held, "; "));
  }
  std::vector<std::string> others;
  size_t other_ranks = 0;
  for (const Group& g : groups) {
    if (&g == &*most) continue;
    others.push_back(fmt::format("{} (hash {:016x})", NameRanks(g.ranks, name), g.hash));
    other_ranks += g.ranks.size();
  }
  return fmt::format("{} {} other weights than the {} other rank{} (hash {:016x})", fmt::join(others, ", "),
                     other_ranks == 1 ? "holds" : "hold", most->ranks.size(), most->ranks.size() == 1 ? "" : "s",
                     most->hash);
}

}  // namespace srunway::trainer
