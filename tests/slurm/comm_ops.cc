// Slurm suite: every Comm operation (all-reduce, reduce-scatter, all-gather, broadcast, send/recv, barrier),
// blocking and non-blocking, for fp32, fp16, bf16 and integer types, over ranks started by srun --mpi=pmix.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "launcher/bootstrap.h"
#include "launcher/comm.h"

namespace {

using namespace srunway::launcher;

// Elements of any DataType, written and read as doubles (the test values are small integers: exact in all).
struct Buffer {
  DataType type;
  std::vector<uint8_t> bytes;
  Buffer(DataType t, size_t count) : type(t), bytes(count * DataTypeBytes(t)) {}
  size_t size() const { return bytes.size() / DataTypeBytes(type); }
  void Set(size_t i, double v) {
    uint8_t* p = bytes.data() + i * DataTypeBytes(type);
    switch (type) {
      case DataType::kFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DataType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = FloatToBFloat16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DataType::kUInt8: { *p = static_cast<uint8_t>(v); break; }
    }
  }
  double Get(size_t i) const {
    const uint8_t* p = bytes.data() + i * DataTypeBytes(type);
    switch (type) {
      case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
      case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return HalfToFloat(h); }
      case DataType::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); return BFloat16ToFloat(h); }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
      case DataType::kUInt8: return *p;
    }
    return 0;
  }
};

int failures = 0;
int checks = 0;

void Expect(bool ok, int rank, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "comm_ops: rank %d: %s is wrong\n", rank, what.c_str());
  }
}

void Must(const srunway::common::Status& status, const std::string& what) {
  if (status.ok()) return;
  std::fprintf(stderr, "comm_ops: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(EXIT_FAILURE);
}

// Runs `op` blocking, or non-blocking with a handle waited on later.
template <typename Blocking, typename NonBlocking>
void Run(bool non_blocking, Blocking&& blocking, NonBlocking&& start, const std::string& what) {
  if (!non_blocking) return Must(blocking(), what);
  auto handle = start();
  Must(handle.status(), what);
  Must((*handle)->Wait(), what);
}

}  // namespace

int main() {
  auto bootstrap = CreateBootstrap(BootstrapKind::kAuto, std::chrono::seconds(60),
                                   [](const srunway::common::Status& s) { std::fprintf(stderr, "%s\n", s.message().c_str()); });
  if (!bootstrap.ok()) return EXIT_FAILURE;
  auto comm_or = CreateComm(CommKind::kAuto, **bootstrap);
  Must(comm_or.status(), "CreateComm");
  Comm& comm = **comm_or;
  const int rank = comm.rank(), size = comm.size();
  const size_t count = 37;
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32,
                        DataType::kInt64, DataType::kUInt8}) {
    const std::string tname(DataTypeName(type));
    for (bool nb : {false, true}) {
      const std::string mode = nb ? " non-blocking" : "";
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        const char* oname = op == ReduceOp::kSum ? "sum" : op == ReduceOp::kMax ? "max" : "min";
        auto expected = [&](size_t i) {
          double base = static_cast<double>(i % 3);
          return op == ReduceOp::kSum ? size * (size + 1) / 2.0 + size * base : op == ReduceOp::kMax ? size + base : 1 + base;
        };
        Buffer data(type, count);
        for (size_t i = 0; i < count; ++i) data.Set(i, rank + 1 + static_cast<double>(i % 3));
        Run(nb, [&] { return comm.AllReduce(data.bytes.data(), count, type, op); },
            [&] { return comm.IAllReduce(data.bytes.data(), count, type, op); }, "all-reduce");
        bool ok = true;
        for (size_t i = 0; i < count; ++i) ok &= data.Get(i) == expected(i);
        Expect(ok, rank, "all-reduce " + std::string(oname) + " " + tname + mode);

        Buffer send(type, count * static_cast<size_t>(size)), recv(type, count);
        for (size_t j = 0; j < send.size(); ++j) send.Set(j, rank + 1 + static_cast<double>(j % 3));
        Run(nb, [&] { return comm.ReduceScatter(send.bytes.data(), recv.bytes.data(), count, type, op); },
            [&] { return comm.IReduceScatter(send.bytes.data(), recv.bytes.data(), count, type, op); }, "reduce-scatter");
        ok = true;
        for (size_t i = 0; i < count; ++i) ok &= recv.Get(i) == expected(static_cast<size_t>(rank) * count + i);
        Expect(ok, rank, "reduce-scatter " + std::string(oname) + " " + tname + mode);
      }
      Buffer mine(type, count), all(type, count * static_cast<size_t>(size));
      for (size_t i = 0; i < count; ++i) mine.Set(i, rank * 10 + static_cast<double>(i % 5));
      Run(nb, [&] { return comm.AllGather(mine.bytes.data(), all.bytes.data(), count, type); },
          [&] { return comm.IAllGather(mine.bytes.data(), all.bytes.data(), count, type); }, "all-gather");
      bool ok = true;
      for (size_t j = 0; j < all.size(); ++j) ok &= all.Get(j) == static_cast<double>(j / count) * 10 + (j % count) % 5;
      Expect(ok, rank, "all-gather " + tname + mode);

      const int root = size - 1;
      Buffer shared(type, count);
      for (size_t i = 0; i < count; ++i) shared.Set(i, rank == root ? static_cast<double>(3 * root + i % 7) : 0);
      Run(nb, [&] { return comm.Broadcast(shared.bytes.data(), count, type, root); },
          [&] { return comm.IBroadcast(shared.bytes.data(), count, type, root); }, "broadcast");
      ok = true;
      for (size_t i = 0; i < count; ++i) ok &= shared.Get(i) == static_cast<double>(3 * root + i % 7);
      Expect(ok, rank, "broadcast " + tname + mode);

      if (size > 1) {  // a ring: send to the next rank, receive from the previous one
        const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
        Buffer out(type, count), in(type, count);
        for (size_t i = 0; i < count; ++i) out.Set(i, rank + static_cast<double>(i % 4));
        if (nb) {
          auto r = comm.IRecv(in.bytes.data(), count, type, previous);
          auto s = comm.ISend(out.bytes.data(), count, type, next);
          Must(r.status(), "irecv");
          Must(s.status(), "isend");
          Must((*s)->Wait(), "isend");
          Must((*r)->Wait(), "irecv");
        } else if (rank % 2 == 0) {
          Must(comm.Send(out.bytes.data(), count, type, next), "send");
          Must(comm.Recv(in.bytes.data(), count, type, previous), "recv");
        } else {
          Must(comm.Recv(in.bytes.data(), count, type, previous), "recv");
          Must(comm.Send(out.bytes.data(), count, type, next), "send");
        }
        ok = true;
        for (size_t i = 0; i < count; ++i) ok &= in.Get(i) == previous + static_cast<double>(i % 4);
        Expect(ok, rank, "send/recv " + tname + mode);
      }
    }
  }
  Must(comm.Barrier(), "barrier");
  int total_failures = failures;
  Must(comm.AllReduce(&total_failures, 1, DataType::kInt32, ReduceOp::kSum), "failure count");
  if (rank == 0) std::printf("comm ops: %d ranks, %d checks per rank, %d failures\n", size, checks, total_failures);
  comm_or->reset();
  return total_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
