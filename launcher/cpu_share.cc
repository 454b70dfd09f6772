// The ranks' affinity masks and a rank's share of its CPUs.
#include "launcher/cpu_share.h"

#include <fmt/format.h>
#include <sched.h>

#include <charconv>
#include <cstdint>
#include <optional>

namespace srunway::launcher {
namespace {

std::optional<cpu_set_t> ParseMask(const std::string& text) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (text.empty() || text.size() % 2 != 0 || text.size() > 2 * sizeof set) return std::nullopt;
  auto* bytes = reinterpret_cast<uint8_t*>(&set);
  for (size_t i = 0; i < text.size() / 2; ++i) {
    const char* first = text.data() + 2 * i;
    auto [end, error] = std::from_chars(first, first + 2, bytes[i], 16);
    if (error != std::errc() || end != first + 2) return std::nullopt;
  }
  return set;
}

}  // namespace

std::string AffinityMaskText() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) CPU_SET(0, &set);
  std::string text;
  for (size_t i = 0; i < sizeof set; ++i) text += fmt::format("{:02x}", reinterpret_cast<const uint8_t*>(&set)[i]);
  while (text.size() > 2 && text.ends_with("00")) text.resize(text.size() - 2);  // a node's CPUs, not 1024
  return text;
}

common::StatusOr<CpuShare> ShareOf(int rank, std::span<const std::string> hosts, std::span<const std::string> masks) {
  if (rank < 0 || static_cast<size_t>(rank) >= masks.size() || hosts.size() != masks.size()) {
    return common::InvalidArgument("rank {} of {} masks and {} hosts", rank, masks.size(), hosts.size());
  }
  const std::optional<cpu_set_t> mine = ParseMask(masks[static_cast<size_t>(rank)]);
  if (!mine || CPU_COUNT(&*mine) == 0) return common::InvalidArgument("rank {}'s CPU mask does not parse", rank);
  CpuShare share;
  share.cpus = CPU_COUNT(&*mine);
  share.ranks = 0;
  for (size_t r = 0; r < masks.size(); ++r) {
    std::optional<cpu_set_t> other = ParseMask(masks[r]);
    if (!other || hosts[r] != hosts[static_cast<size_t>(rank)]) continue;
    cpu_set_t both;
    CPU_AND(&both, &*other, &*mine);
    if (CPU_COUNT(&both) > 0) ++share.ranks;
  }
  return share;
}

}  // namespace srunway::launcher
