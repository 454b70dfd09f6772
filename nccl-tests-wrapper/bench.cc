// The collbench sweep: buffers, warmup, timed iterations, result checks, and the ranks' agreement on each row.
#include "nccl-tests-wrapper/bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

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
    case DataType::kFloat16: static_cast<uint16_t*>(buffer)[i] = launcher::FloatToHalf(value); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(buffer)[i] = launcher::FloatToBFloat16(value); break;
    case DataType::kInt32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(value); break;
    case DataType::kInt64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(value); break;
    case DataType::kUInt8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(value); break;
  }
}

float Load(const void* buffer, DataType type, size_t i) {
  switch (type) {
    case DataType::kFloat32: return static_cast<const float*>(buffer)[i];
    case DataType::kFloat16: return launcher::HalfToFloat(static_cast<const uint16_t*>(buffer)[i]);
    case DataType::kBFloat16: return launcher::BFloat16ToFloat(static_cast<const uint16_t*>(buffer)[i]);
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
    send_.assign(total * bytes_, 0);
    recv_.assign(total * bytes_, 0);
    Row row;
    row.size_bytes = static_cast<int64_t>(total * bytes_);
    row.count = static_cast<int64_t>(count);
    row.type = o_.type;
    row.redop = info.has_op ? o_.op : "none";
    row.root = info.has_root ? o_.root : -1;
    SRUNWAY_ASSIGN_OR_RETURN(row.out_of_place, MeasureHalf(count, /*in_place=*/false, row.size_bytes));
    if (SupportsInPlace(info.id)) {
      SRUNWAY_ASSIGN_OR_RETURN(row.in_place, MeasureHalf(count, /*in_place=*/true, row.size_bytes));
    } else {
      row.in_place.wrong = o_.check ? std::optional<double>(0.0) : std::nullopt;
    }
    return row;
  }

 private:
  // The Comm's all-reduce and broadcast work in place; the other collectives have no in-place form here.
  static bool SupportsInPlace(Collective c) { return c == Collective::kAllReduce || c == Collective::kBroadcast; }

  void Fill(size_t count) {
    const CollectiveInfo& info = *o_.collective;
    const size_t total = info.per_rank_count ? count * n_ : count;
    for (size_t i = 0; i < total; ++i) Store(send_.data(), type_, i, InitialValue(rank_, i));
    std::fill(recv_.begin(), recv_.end(), 0);
  }

  common::Status RunOnce(size_t count, bool in_place) {
    uint8_t* send = send_.data();
    uint8_t* recv = recv_.data();
    switch (o_.collective->id) {
      case Collective::kAllReduce:
        if (!in_place) std::memcpy(recv, send, count * bytes_);  // the Comm reduces in place
        return comm_.AllReduce(in_place ? send : recv, count, type_, op_);
      case Collective::kBroadcast:
        if (!in_place) std::memcpy(recv, send, count * bytes_);
        return comm_.Broadcast(in_place ? send : recv, count, type_, o_.root);
      case Collective::kAllGather:
        return comm_.AllGather(send + rank_ * count * bytes_, recv, count, type_);
      case Collective::kReduceScatter:
        return comm_.ReduceScatter(send, recv + rank_ * count * bytes_, count, type_, op_);
      case Collective::kSendRecv: {
        SRUNWAY_ASSIGN_OR_RETURN(auto r, comm_.IRecv(recv, count, type_, (rank_ + n_ - 1) % n_));
        SRUNWAY_ASSIGN_OR_RETURN(auto s, comm_.ISend(send, count, type_, (rank_ + 1) % n_));
        SRUNWAY_RETURN_IF_ERROR(s->Wait());
        return r->Wait();
      }
      case Collective::kAllToAll: {
        // Pairwise exchange: block p of my send buffer goes to rank p, block p of my receive buffer comes from p.
        std::vector<launcher::Handle> handles;
        for (int p = 0; p < n_; ++p) {
          SRUNWAY_ASSIGN_OR_RETURN(auto r, comm_.IRecv(recv + p * count * bytes_, count, type_, p));
          handles.push_back(std::move(r));
        }
        for (int p = 0; p < n_; ++p) {
          SRUNWAY_ASSIGN_OR_RETURN(auto s, comm_.ISend(send + p * count * bytes_, count, type_, p));
          handles.push_back(std::move(s));
        }
        for (auto& h : handles) SRUNWAY_RETURN_IF_ERROR(h->Wait());
        return common::Status::Ok();
      }
      case Collective::kReduce: {
        // Linear: the root receives every rank's buffer and reduces them in rank order.
        if (rank_ != o_.root) return comm_.Send(send, count, type_, o_.root);
        std::memcpy(recv, send, count * bytes_);
        std::vector<uint8_t> incoming(count * bytes_);
        for (int p = 0; p < n_; ++p) {
          if (p == o_.root) continue;
          SRUNWAY_RETURN_IF_ERROR(comm_.Recv(incoming.data(), count, type_, p));
          for (size_t i = 0; i < count; ++i) Store(recv, type_, i, Reduce(op_, Load(recv, type_, i), Load(incoming.data(), type_, i)));
        }
        return common::Status::Ok();
      }
    }
    return common::Internal("unknown collective");
  }

  // Wrong elements on this rank after one fresh run.
  int64_t CountWrong(size_t count, bool in_place) {
    const uint8_t* out = in_place ? send_.data() : recv_.data();
    int64_t wrong = 0;
    auto expect = [&](size_t at, float want) { wrong += Load(out, type_, at) != want; };
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
    if (o_.slow_node.empty() || boot_.identity().host != o_.slow_node) return;
    // 5 MB/s: far below any healthy link, so the slow node stands out at every size.
    std::this_thread::sleep_for(std::chrono::microseconds(50 + bytes / 5));
  }

  common::StatusOr<Half> MeasureHalf(size_t count, bool in_place, int64_t size_bytes) {
    Half half;
    Fill(count);
    for (int i = 0; i < o_.warmup; ++i) SRUNWAY_RETURN_IF_ERROR(RunOnce(count, in_place));
    SRUNWAY_RETURN_IF_ERROR(comm_.Barrier());
    const auto start = Clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      SRUNWAY_RETURN_IF_ERROR(RunOnce(count, in_place));
      Throttle(size_bytes);
    }
    int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count() /
                 std::max(1, o_.iters);
    // The ranks agree on one time per -a.
    int64_t agreed = ns;
    if (o_.average == 0) {
      SRUNWAY_RETURN_IF_ERROR(comm_.Broadcast(&agreed, 1, DataType::kInt64, 0));
    } else {
      const ReduceOp op = o_.average == 2 ? ReduceOp::kMin : o_.average == 3 ? ReduceOp::kMax : ReduceOp::kSum;
      SRUNWAY_RETURN_IF_ERROR(comm_.AllReduce(&agreed, 1, DataType::kInt64, op));
      if (o_.average == 1) agreed /= n_;
    }
    half.time_us = static_cast<double>(agreed) / 1e3;
    const Bandwidth bw = ComputeBandwidth(*o_.collective, size_bytes, *half.time_us, n_);
    half.algbw_gbps = bw.algbw_gbps;
    half.busbw_gbps = bw.busbw_gbps;
    if (o_.check) {
      Fill(count);
      SRUNWAY_RETURN_IF_ERROR(RunOnce(count, in_place));
      int64_t wrong = CountWrong(count, in_place);
      SRUNWAY_RETURN_IF_ERROR(comm_.AllReduce(&wrong, 1, DataType::kInt64, ReduceOp::kSum));
      half.wrong = static_cast<double>(wrong);
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
  std::vector<uint8_t> send_, recv_;
};

}  // namespace

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
  run.config = {{"nThread", "1"}, {"nGpus", "1"}, {"minBytes", std::to_string(o.min_bytes)},
                {"maxBytes", std::to_string(o.max_bytes)},
                {"step:", o.step_factor > 1 ? fmt::format("{}(factor)", o.step_factor)
                                            : fmt::format("{}(bytes)", o.step_bytes)},
                {"warmup iters:", std::to_string(o.warmup)}, {"iters:", std::to_string(o.iters)},
                {"agg iters:", "1"}, {"validation:", o.check ? "1" : "0"}, {"graph:", "0"}};
  const std::string mine = fmt::format("{} {} {}", ::getpid(), boot.identity().local_rank, boot.identity().host);
  SRUNWAY_ASSIGN_OR_RETURN(auto all, boot.AllGather(mine, "collbench devices"));
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    Device d;
    d.rank = r;
    char host[256] = {};
    long long pid = 0;
    if (std::sscanf(all[r].c_str(), "%lld %d %255s", &pid, &d.device, host) != 3) {
      return common::Internal("rank {} sent a malformed device line '{}'", r, all[r]);
    }
    d.pid = pid;
    d.host = host;
    d.bus_id = "cpu";
    d.name = fmt::format("CPU ({} communicator)", launcher::CommKindName(comm.kind()));
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
    const int64_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
    if (next <= size) break;
    size = next;
  }
  run.out_of_bounds = 0;
  run.avg_busbw_gbps = run.MeanBusbw();
  run.complete = true;
  return run;
}

}  // namespace srunway::nccltests
