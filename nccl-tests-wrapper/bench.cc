// The collbench sweep: buffers, warmup, timed iterations, result checks, and the ranks' agreement on each row.
#include "nccl-tests-wrapper/bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "common/env.h"
#include "common/half.h"
#include "common/json.h"
#include "common/parse.h"

namespace srunway::nccltests {
namespace {

using launcher::DataType;
using launcher::ReduceOp;
using Clock = std::chrono::steady_clock;

// Small integers are exact in every supported type (bfloat16 holds integers up to 256 exactly): element i of
// rank r starts as (r + i) % 4 + 1, so a sum over up to 64 ranks stays exact.
float InitialValue(int rank, size_t i) { return static_cast<float>((rank + static_cast<int>(i % 4)) % 4 + 1); }

void Store(void* buffer, DataType type, size_t i, float value) {
  switch (type) {
    case DataType::kFloat32: static_cast<float*>(buffer)[i] = value; break;
    case DataType::kFloat16: static_cast<uint16_t*>(buffer)[i] = common::FloatToHalf(value); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(buffer)[i] = common::FloatToBFloat16(value); break;
    case DataType::kInt32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(value); break;
    case DataType::kInt64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(value); break;
    case DataType::kUInt8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(value); break;
  }
}

float Load(const void* buffer, DataType type, size_t i) {
  switch (type) {
    case DataType::kFloat32: return static_cast<const float*>(buffer)[i];
    case DataType::kFloat16: return common::HalfToFloat(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::kBFloat16: return common::BFloat16ToFloat(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::kInt32: return static_cast<float>(static_cast<const int32_t*>(buffer)[i]);
    case DataType::kInt64: return static_cast<float>(static_cast<const int64_t*>(buffer)[i]);
    case DataType::kUInt8: return static_cast<float>(static_cast<const uint8_t*>(buffer)[i]);
  }
  return 0;
}

float Reduce(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kMin: return std::min(a, b);
  }
  return a;
}

// Element i of the reduction over all ranks' initial values.
float Reduced(ReduceOp op, int nranks, size_t i) {
  float value = InitialValue(0, i);
  for (int r = 1; r < nranks; ++r) value = Reduce(op, value, InitialValue(r, i));
  return value;
}

class Sweep {
 public:
  Sweep(const BenchOptions& o, launcher::Bootstrap& boot, launcher::Comm& comm, DataType type, ReduceOp op)
      : o_(o), boot_(boot), comm_(comm), type_(type), op_(op), rank_(comm.rank()), n_(comm.size()),
        bytes_(launcher::DataTypeBytes(type)) {}

  // One size: per-rank element count `count` (the whole buffer for all_reduce, one rank's block for all_gather).
  common::StatusOr<Row> Measure(size_t count) {
    const CollectiveInfo& info = *o_.collective;
    const size_t total = info.per_rank_count ? count * n_ : count;
    // The buffers live where the communicator works: GPU memory for NCCL, host memory otherwise.
    SRUNWAY_ASSIGN_OR_RETURN(send_, comm_.Allocate(total * bytes_));
    SRUNWAY_ASSIGN_OR_RETURN(recv_, comm_.Allocate(total * bytes_));
    host_.assign(total * bytes_, 0);
    Row row;
    row.size_bytes = static_cast<int64_t>(total * bytes_);
    row.count = static_cast<int64_t>(count);
    row.type = o_.type;
    row.redop = info.has_op ? o_.op : "none";
    row.root = info.has_root ? o_.root : -1;
    MisbehaveOnce();
    SRUNWAY_ASSIGN_OR_RETURN(row.out_of_place, MeasureHalf(count, /*in_place=*/false, row.size_bytes));
    if (SupportsInPlace(info.id)) {
      SRUNWAY_ASSIGN_OR_RETURN(row.in_place, MeasureHalf(count, /*in_place=*/true, row.size_bytes));
    }
    // Otherwise the in-place half was not run: every cell of it N/A (#wrong too), so no reader takes it for a
    // checked, correct result.
    return row;
  }

 private:
  // In place as nccl-tests defines it: the output overwrites the input (all_gather: the input is this rank's
  // block of the output). The Comm has no in-place form of the other collectives.
  static bool SupportsInPlace(Collective c) {
    return c == Collective::kAllReduce || c == Collective::kBroadcast || c == Collective::kReduce ||
           c == Collective::kAllGather;
  }

  // The input of this rank in the send buffer (or, in place, where the collective reads it), the output zeroed.
  common::Status Fill(size_t count, bool in_place) {
    const CollectiveInfo& info = *o_.collective;
    const size_t total = info.per_rank_count ? count * n_ : count;
    for (size_t i = 0; i < total; ++i) Store(host_.data(), type_, i, InitialValue(rank_, i));
    if (OnThisNode(o_.faults.corrupt) && total > 0) Store(host_.data(), type_, 0, InitialValue(rank_, 0) + 1);
    std::vector<uint8_t> zeros(recv_.bytes(), 0);
    SRUNWAY_RETURN_IF_ERROR(comm_.Upload(recv_.data(), zeros.data(), zeros.size()));
    if (in_place && info.id == Collective::kAllGather) {
      const size_t block = count * bytes_;
      return comm_.Upload(recv_.data() + rank_ * block, host_.data() + rank_ * block, block);
    }
    return comm_.Upload(send_.data(), host_.data(), total * bytes_);
  }

  // One run of the collective: started (a handle to wait for), or with `blocking` run to the end through the
  // Comm's blocking form (no handle), which MPI runs with faster algorithms than its non-blocking one.
  common::StatusOr<launcher::Handle> Issue(size_t count, bool in_place, bool blocking) {
    uint8_t* send = send_.data();
    uint8_t* recv = in_place ? send : recv_.data();
    const size_t block = count * bytes_;
    using C = launcher::Comm;
    switch (o_.collective->id) {
      case Collective::kAllReduce:
        return Call(blocking, &C::AllReduce, &C::IAllReduce, send, recv, count, type_, op_);
      case Collective::kBroadcast:
        return Call(blocking, &C::Broadcast, &C::IBroadcast, send, recv, count, type_, o_.root);
      case Collective::kReduce:
        return Call(blocking, &C::Reduce, &C::IReduce, send, recv, count, type_, op_, o_.root);
      case Collective::kAllGather:
        send = in_place ? recv_.data() + rank_ * block : send + rank_ * block;
        return Call(blocking, &C::AllGather, &C::IAllGather, send, recv_.data(), count, type_);
      case Collective::kReduceScatter:
        return Call(blocking, &C::ReduceScatter, &C::IReduceScatter, send, recv + rank_ * block, count, type_, op_);
      case Collective::kSendRecv:
        return Call(blocking, &C::SendRecv, &C::ISendRecv, send, (rank_ + 1) % n_, recv, (rank_ + n_ - 1) % n_,
                    count, type_);
      case Collective::kAllToAll: return Call(blocking, &C::AllToAll, &C::IAllToAll, send, recv, count, type_);
    }
    return common::Internal("unknown collective");
  }

  // The blocking or the non-blocking member of a pair taking the same arguments (deduced from the second).
  template <typename... Args>
  common::StatusOr<launcher::Handle> Call(bool blocking,
                                          common::Status (launcher::Comm::*run)(std::type_identity_t<Args>...),
                                          common::StatusOr<launcher::Handle> (launcher::Comm::*start)(Args...),
                                          std::type_identity_t<Args>... args) {
    if (!blocking) return (comm_.*start)(args...);
    SRUNWAY_RETURN_IF_ERROR((comm_.*run)(args...));
    return launcher::Handle();
  }

  common::Status RunOnce(size_t count, bool in_place) { return Issue(count, in_place, /*blocking=*/true).status(); }

  // Wrong elements on this rank after one fresh run.
  common::StatusOr<int64_t> CountWrong(size_t count, bool in_place) {
    const bool gathered_in_recv = in_place && o_.collective->id == Collective::kAllGather;
    const launcher::Buffer& out = in_place && !gathered_in_recv ? send_ : recv_;
    SRUNWAY_RETURN_IF_ERROR(comm_.Download(host_.data(), out.data(), host_.size()));
    const uint8_t* got = host_.data();
    int64_t wrong = 0;
    auto expect = [&](size_t at, float want) { wrong += Load(got, type_, at) != want; };
    switch (o_.collective->id) {
      case Collective::kAllReduce:
        for (size_t i = 0; i < count; ++i) expect(i, Reduced(op_, n_, i));
        break;
      case Collective::kBroadcast:
        for (size_t i = 0; i < count; ++i) expect(i, InitialValue(o_.root, i));
        break;
      case Collective::kAllGather:
        for (int p = 0; p < n_; ++p) {
          for (size_t i = 0; i < count; ++i) expect(p * count + i, InitialValue(p, p * count + i));
        }
        break;
      case Collective::kReduceScatter:
        for (size_t i = 0; i < count; ++i) expect(rank_ * count + i, Reduced(op_, n_, rank_ * count + i));
        break;
      case Collective::kSendRecv: {
        const int from = (rank_ + n_ - 1) % n_;
        for (size_t i = 0; i < count; ++i) expect(i, InitialValue(from, i));
        break;
      }
      case Collective::kAllToAll:
        for (int p = 0; p < n_; ++p) {
          for (size_t i = 0; i < count; ++i) expect(p * count + i, InitialValue(p, rank_ * count + i));
        }
        break;
      case Collective::kReduce:
        if (rank_ == o_.root) {
          for (size_t i = 0; i < count; ++i) expect(i, Reduced(op_, n_, i));
        }
        break;
    }
    return wrong;
  }

  void Throttle(int64_t bytes) {
    if (!OnThisNode(o_.faults.slow)) return;
    // 5 MB/s: far below any healthy link, so the slow node stands out at every size.
    std::this_thread::sleep_for(std::chrono::microseconds(50 + bytes / 5));
  }

  bool OnThisNode(const std::string& node) const { return !node.empty() && boot_.identity().host == node; }

  // The hang and crash faults, before this rank's first collective.
  void MisbehaveOnce() {
    if (misbehaved_) return;
    misbehaved_ = true;
    if (OnThisNode(o_.faults.hang)) {
      while (true) ::pause();  // until Slurm's signal ends the step
    }
    if (OnThisNode(o_.faults.crash)) {
      const rlimit no_core{0, 0};
      ::setrlimit(RLIMIT_CORE, &no_core);
      std::raise(SIGSEGV);
    }
  }

  // Every rank's value of `mine`, through the bootstrap: small control messages stay off the communicator, whose
  // buffers may be on a GPU.
  common::StatusOr<std::vector<int64_t>> Gather(int64_t mine, std::string_view phase) {
    SRUNWAY_ASSIGN_OR_RETURN(auto all, boot_.AllGather(std::to_string(mine), phase));
    std::vector<int64_t> values;
    for (const std::string& text : all) {
      SRUNWAY_ASSIGN_OR_RETURN(int64_t value, common::ParseInt(text, phase, INT64_MIN, INT64_MAX));
      values.push_back(value);
    }
    return values;
  }

  common::StatusOr<Half> MeasureHalf(size_t count, bool in_place, int64_t size_bytes) {
    Half half;
    SRUNWAY_RETURN_IF_ERROR(Fill(count, in_place));
    for (int i = 0; i < o_.warmup; ++i) SRUNWAY_RETURN_IF_ERROR(RunOnce(count, in_place));
    SRUNWAY_RETURN_IF_ERROR(comm_.Barrier());
    // As nccl-tests does on a GPU: every iteration queued on the stream, one wait at the end (unless -z). On CPU
    // ranks each collective runs to the end (blocking) before the next starts on the same buffers.
    const bool queue = comm_.kind() == launcher::CommKind::kNccl && !o_.blocking;
    std::vector<launcher::Handle> queued;
    const auto start = Clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      SRUNWAY_ASSIGN_OR_RETURN(launcher::Handle handle, Issue(count, in_place, /*blocking=*/!queue));
      if (queue) queued.push_back(std::move(handle));
      Throttle(size_bytes);
    }
    for (launcher::Handle& handle : queued) SRUNWAY_RETURN_IF_ERROR(handle->Wait());
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count() /
                 std::max(1, o_.iters);
    // The ranks agree on one time per -a.
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<int64_t> times, Gather(ns, "collbench timing"));
    int64_t agreed = times[0];
    if (o_.average == 1) agreed = std::accumulate(times.begin(), times.end(), int64_t{0}) / n_;
    if (o_.average == 2) agreed = *std::min_element(times.begin(), times.end());
    if (o_.average == 3) agreed = *std::max_element(times.begin(), times.end());
    half.time_us = static_cast<double>(agreed) / 1e3;
    const Bandwidth bw = ComputeBandwidth(*o_.collective, size_bytes, *half.time_us, n_);
    half.algbw_gbps = bw.algbw_gbps;
    half.busbw_gbps = bw.busbw_gbps;
    if (o_.check) {
      SRUNWAY_RETURN_IF_ERROR(Fill(count, in_place));
      SRUNWAY_RETURN_IF_ERROR(RunOnce(count, in_place));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t wrong, CountWrong(count, in_place));
      SRUNWAY_ASSIGN_OR_RETURN(std::vector<int64_t> all, Gather(wrong, "collbench check"));
      half.wrong = static_cast<double>(std::accumulate(all.begin(), all.end(), int64_t{0}));
    }
    return half;
  }

  const BenchOptions& o_;
  launcher::Bootstrap& boot_;
  launcher::Comm& comm_;
  DataType type_;
  ReduceOp op_;
  int rank_, n_;
  size_t bytes_;
  bool misbehaved_ = false;
  launcher::Buffer send_, recv_;
  std::vector<uint8_t> host_;  // staging for inputs and checks
};

}  // namespace

BenchOptions::Faults FaultsFromEnvironment() {
  auto node = [](const char* name) { return common::GetEnv(name).value_or(""); };
  return {node("SRUNWAY_FAULT_SLOW_NODE"), node("SRUNWAY_FAULT_HANG_NODE"), node("SRUNWAY_FAULT_CRASH_NODE"),
          node("SRUNWAY_FAULT_CORRUPT_NODE")};
}

common::StatusOr<DataType> ParseType(std::string_view name) {
  constexpr std::pair<std::string_view, DataType> kTypes[] = {
      {"float", DataType::kFloat32}, {"half", DataType::kFloat16}, {"bfloat16", DataType::kBFloat16},
      {"int32", DataType::kInt32},   {"int64", DataType::kInt64},  {"uint8", DataType::kUInt8}};
  for (const auto& [known, type] : kTypes) {
    if (name == known) return type;
  }
  return common::InvalidArgument("-d {}: not a supported type (float, half, bfloat16, int32, int64, uint8)", name);
}

common::StatusOr<ReduceOp> ParseOp(std::string_view name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  return common::InvalidArgument("-o {}: not a supported reduction (sum, max, min)", name);
}

common::StatusOr<Run> RunBenchmark(const BenchOptions& o, launcher::Bootstrap& boot, launcher::Comm& comm,
                                   const std::function<void(const Run&, const Row*)>& emit) {
  SRUNWAY_ASSIGN_OR_RETURN(DataType type, ParseType(o.type));
  SRUNWAY_ASSIGN_OR_RETURN(ReduceOp op, ParseOp(o.op));
  if (o.root < 0 || o.root >= comm.size()) {
    return common::InvalidArgument("-r {}: no such rank (the job has {})", o.root, comm.size());
  }
  Run run;
  run.collective = std::string(o.collective->name);
  run.comm = std::string(launcher::CommKindName(comm.kind()));
  run.nccl_version = NcclVersionName(comm.device().nccl_version);
  run.config = {{"nThread", "1"}, {"nGpus", "1"}, {"minBytes", std::to_string(o.min_bytes)},
                {"maxBytes", std::to_string(o.max_bytes)},
                {"step:", o.step_factor > 1 ? fmt::format("{}(factor)", o.step_factor)
                                            : fmt::format("{}(bytes)", o.step_bytes)},
                {"warmup iters:", std::to_string(o.warmup)}, {"iters:", std::to_string(o.iters)},
                {"agg iters:", "1"}, {"validation:", o.check ? "1" : "0"}, {"graph:", "0"}};
  // Each rank's device line, as JSON: a peer's answer is parsed with range checks, never trusted.
  const launcher::DeviceInfo device = comm.device();
  const bool gpu = device.ordinal >= 0;
  const common::Json mine = {
      {"pid", static_cast<int64_t>(::getpid())}, {"device", gpu ? device.ordinal : boot.identity().local_rank},
      {"host", boot.identity().host}, {"bus_id", device.bus_id},
      {"name", gpu ? device.name : fmt::format("CPU ({} communicator)", launcher::CommKindName(comm.kind()))}};
  SRUNWAY_ASSIGN_OR_RETURN(auto all, boot.AllGather(mine.dump(), "collbench devices"));
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::string where = fmt::format("rank {}'s device line", r);
    SRUNWAY_ASSIGN_OR_RETURN(common::Json line, common::ParseJson(all[static_cast<size_t>(r)], where));
    Device d;
    d.rank = r;
    SRUNWAY_ASSIGN_OR_RETURN(d.pid, common::JsonField<int64_t>(line, "pid", where));
    SRUNWAY_ASSIGN_OR_RETURN(d.device, common::JsonField<int>(line, "device", where));
    SRUNWAY_ASSIGN_OR_RETURN(d.host, common::JsonField<std::string>(line, "host", where));
    SRUNWAY_ASSIGN_OR_RETURN(d.bus_id, common::JsonField<std::string>(line, "bus_id", where));
    SRUNWAY_ASSIGN_OR_RETURN(d.name, common::JsonField<std::string>(line, "name", where));
    run.devices.push_back(d);
  }
  emit(run, nullptr);

  Sweep sweep(o, boot, comm, type, op);
  const size_t bytes = launcher::DataTypeBytes(type);
  const size_t divisor = o.collective->per_rank_count ? bytes * comm.size() : bytes;
  for (int64_t size = o.min_bytes; size <= o.max_bytes;) {
    const size_t count = static_cast<size_t>(size) / divisor;
    SRUNWAY_ASSIGN_OR_RETURN(Row row, sweep.Measure(count));
    run.rows.push_back(row);
    emit(run, &run.rows.back());
    const std::optional<int64_t> next = NextSize(size, o.step_factor, o.step_bytes);
    if (!next.has_value()) break;
    size = *next;
  }
  run.out_of_bounds = 0;
  run.avg_busbw_gbps = run.MeanBusbw();
  run.complete = true;
  return run;
}

}  // namespace srunway::nccltests
