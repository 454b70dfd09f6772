// The collectives table and size parsing.
#include "nccl-tests-wrapper/collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/parse.h"

namespace srunway::nccltests {
namespace {

double AllReduceFactor(int n) { return 2.0 * (n - 1) / n; }
double GatherFactor(int n) { return static_cast<double>(n - 1) / n; }
double One(int) { return 1.0; }

constexpr CollectiveInfo kCollectives[] = {
    {Collective::kAllReduce, "all_reduce", "all_reduce_perf", true, false, false, AllReduceFactor},
    {Collective::kAllGather, "all_gather", "all_gather_perf", false, false, true, GatherFactor},
    {Collective::kReduceScatter, "reduce_scatter", "reduce_scatter_perf", true, false, true, GatherFactor},
    {Collective::kBroadcast, "broadcast", "broadcast_perf", false, true, false, One},
    {Collective::kReduce, "reduce", "reduce_perf", true, true, false, One},
    {Collective::kAllToAll, "alltoall", "alltoall_perf", false, false, true, GatherFactor},
    {Collective::kSendRecv, "sendrecv", "sendrecv_perf", false, false, false, One},
};

std::string Squash(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

std::span<const CollectiveInfo> Collectives() { return kCollectives; }

const CollectiveInfo& Info(Collective collective) {
  for (const CollectiveInfo& info : kCollectives) {
    if (info.id == collective) return info;
  }
  return kCollectives[0];
}

common::StatusOr<const CollectiveInfo*> FindCollective(std::string_view name) {
  std::string wanted = Squash(name);
  if (wanted.ends_with("perf")) wanted.resize(wanted.size() - 4);
  std::vector<std::string_view> known;
  for (const CollectiveInfo& info : kCollectives) {
    if (Squash(info.name) == wanted) return &info;
    known.push_back(info.name);
  }
  return common::NotFound("unknown test '{}' (known: {})", name, fmt::join(known, ", "));
}

common::StatusOr<int64_t> ParseSize(std::string_view text, std::string_view what) {
  std::string_view number = common::Trim(text);
  int shift = 0;
  if (!number.empty() && std::isalpha(static_cast<unsigned char>(number.back()))) {
    switch (std::toupper(static_cast<unsigned char>(number.back()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: {
        // "8Q" has a unit no one knows; "abc" or "-1x" are no number at all.
        const std::string_view digits = number.substr(0, number.size() - 1);
        if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(c); })) {
          return common::InvalidArgument("{} '{}': not a size (a number with K, M, G or T)", what,
                                         common::Printable(text));
        }
        return common::InvalidArgument("{} '{}': unknown size suffix '{}' (use K, M, G or T)", what,
                                       common::Printable(text), number.back());
      }
    }
    number.remove_suffix(1);
  }
  auto value = common::ParseInt(number, what, 0, (int64_t{1} << (62 - shift)));
  if (!value.ok()) {
    return common::InvalidArgument("{} '{}': not a size (a number with K, M, G or T)", what, common::Printable(text));
  }
  return *value << shift;
}

std::optional<int64_t> NextSize(int64_t size, int64_t factor, int64_t step) {
  int64_t next = 0;
  const bool overflow = factor > 1 ? __builtin_mul_overflow(size, factor, &next) : __builtin_add_overflow(size, step, &next);
  if (overflow || next <= size) return std::nullopt;
  return next;
}

std::string FormatSize(int64_t bytes) {
  constexpr std::pair<int, char> kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (const auto& [shift, unit] : kUnits) {
    if (bytes >= (int64_t{1} << shift) && bytes % (int64_t{1} << shift) == 0) {
      return fmt::format("{}{}", bytes >> shift, unit);
    }
  }
  return fmt::format("{}", bytes);
}

Bandwidth ComputeBandwidth(const CollectiveInfo& info, int64_t size_bytes, double time_us, int nranks) {
  if (time_us <= 0) return {0, 0};
  const double algbw = static_cast<double>(size_bytes) / 1e9 / (time_us / 1e6);
  return {algbw, algbw * info.bus_factor(nranks)};
}

}  // namespace srunway::nccltests
