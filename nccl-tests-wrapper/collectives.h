// The collectives nccl-tests measures, in one table: names, what the size and count columns mean, and the
// bus-bandwidth factor (nccl-tests' doc/PERFORMANCE.md). Everything else loops over this table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace srunway::nccltests {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll, kSendRecv };

struct CollectiveInfo {
  Collective id;
  std::string_view name;    // "all_gather"
  std::string_view binary;  // "all_gather_perf"
  bool has_op;              // prints a reduction op (else "none")
  bool has_root;            // prints a root rank (else -1)
  // The size column is the whole buffer; per_rank_count says the count column is that divided by the ranks
  // (all_gather, reduce_scatter, alltoall).
  bool per_rank_count;
  // busbw = algbw * factor(n): 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and alltoall, 1
  // otherwise. algbw = size / time for all of them.
  double (*bus_factor)(int nranks);
};

std::span<const CollectiveInfo> Collectives();
const CollectiveInfo& Info(Collective collective);
// "all_gather", "all_gather_perf" or "allgather": NotFound names the known ones.
common::StatusOr<const CollectiveInfo*> FindCollective(std::string_view name);

// nccl-tests' size syntax: a number with an optional K, M, G or T suffix (powers of 1024), case-insensitive.
common::StatusOr<int64_t> ParseSize(std::string_view text, std::string_view what);
// 8589934592 -> "8G"; sizes that are no whole multiple print in bytes.
std::string FormatSize(int64_t bytes);
// The size after `size` in a sweep from -b to -e: times `factor` where it is above 1, else plus `step`; nullopt
// where that would not grow or would pass INT64_MAX (the sweep ends there).
std::optional<int64_t> NextSize(int64_t size, int64_t factor, int64_t step);

// GB/s as nccl-tests computes them (1e9 bytes per second).
struct Bandwidth {
  double algbw_gbps;
  double busbw_gbps;
};
Bandwidth ComputeBandwidth(const CollectiveInfo& info, int64_t size_bytes, double time_us, int nranks);

}  // namespace srunway::nccltests
