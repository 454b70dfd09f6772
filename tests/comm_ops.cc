// Every Comm operation (all-reduce, reduce-scatter, all-gather, broadcast, reduce, all-to-all, send/recv, barrier,
// split), blocking and non-blocking, in and out of place, for fp32, fp16, bf16 and integer types. The slurm suite
// runs it over CPU ranks started by srun --mpi=pmix; on a GPU machine `comm_ops nccl` runs it over NCCL. The
// values go through the communicator's own buffers (GPU memory for NCCL). Usage: comm_ops [auto|nccl|mpi|self]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"
#include "launcher/comm_factory.h"

namespace {

using namespace srunway::launcher;

// Elements of any DataType, written and read as doubles (the test values are small integers: exact in all).
struct Values {
  DataType type;
  std::vector<uint8_t> bytes;
  Values(DataType t, size_t count) : type(t), bytes(count * DataTypeBytes(t)) {}
  size_t size() const { return bytes.size() / DataTypeBytes(type); }
  void Set(size_t i, double v) {
    uint8_t* p = bytes.data() + i * DataTypeBytes(type);
    switch (type) {
      case DataType::kFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DataType::kFloat16: { uint16_t h = srunway::common::FloatToHalf(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t h = srunway::common::FloatToBFloat16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DataType::kUInt8: { *p = static_cast<uint8_t>(v); break; }
    }
  }
  double Get(size_t i) const {
    const uint8_t* p = bytes.data() + i * DataTypeBytes(type);
    switch (type) {
      case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return f; }
      case DataType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); return srunway::common::HalfToFloat(h); }
      case DataType::kBFloat16: { uint16_t h; std::memcpy(&h, p, 2); return srunway::common::BFloat16ToFloat(h); }
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

// Host values and the communicator's buffer of the same size.
struct Staged {
  Values host;
  Buffer device;
  Staged(Comm& comm, DataType type, size_t count) : host(type, count) {
    auto made = comm.Allocate(host.bytes.size());
    Must(made.status(), "allocate");
    device = std::move(*made);
  }
  void Up(Comm& comm) { Must(comm.Upload(device.data(), host.bytes.data(), host.bytes.size()), "upload"); }
  void Down(Comm& comm) { Must(comm.Download(host.bytes.data(), device.data(), host.bytes.size()), "download"); }
  uint8_t* at(size_t element) const { return device.data() + element * DataTypeBytes(host.type); }
};

// Runs `op` blocking, or non-blocking with a handle waited on later.
template <typename Blocking, typename NonBlocking>
void Run(bool non_blocking, Blocking&& blocking, NonBlocking&& start, const std::string& what) {
  if (!non_blocking) return Must(blocking(), what);
  auto handle = start();
  Must(handle.status(), what);
  Must((*handle)->Wait(), what);
}

// Every operation on `comm` for one type, blocking or not.
void TestOps(Comm& comm, DataType type, bool nb) {
  const int rank = comm.rank(), size = comm.size();
  const size_t count = 37;
  const std::string tname(DataTypeName(type));
  const std::string mode = nb ? " non-blocking" : "";
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    const std::string oname = op == ReduceOp::kSum ? " sum " : op == ReduceOp::kMax ? " max " : " min ";
    auto expected = [&](size_t i) {
      double base = static_cast<double>(i % 3);
      return op == ReduceOp::kSum ? size * (size + 1) / 2.0 + size * base : op == ReduceOp::kMax ? size + base : 1 + base;
    };
    for (bool in_place : {true, false}) {
      Staged in(comm, type, count), out(comm, type, count);
      for (size_t i = 0; i < count; ++i) in.host.Set(i, rank + 1 + static_cast<double>(i % 3));
      in.Up(comm);
      uint8_t* result = in_place ? in.device.data() : out.device.data();
      Run(nb, [&] { return comm.AllReduce(in.device.data(), result, count, type, op); },
          [&] { return comm.IAllReduce(in.device.data(), result, count, type, op); }, "all-reduce");
      Staged& got = in_place ? in : out;
      got.Down(comm);
      bool ok = true;
      for (size_t i = 0; i < count; ++i) ok &= got.host.Get(i) == expected(i);
      Expect(ok, rank, "all-reduce" + oname + tname + mode + (in_place ? " in place" : ""));
    }

    Staged send(comm, type, count * static_cast<size_t>(size)), recv(comm, type, count);
    for (size_t j = 0; j < send.host.size(); ++j) send.host.Set(j, rank + 1 + static_cast<double>(j % 3));
    send.Up(comm);
    Run(nb, [&] { return comm.ReduceScatter(send.device.data(), recv.device.data(), count, type, op); },
        [&] { return comm.IReduceScatter(send.device.data(), recv.device.data(), count, type, op); }, "reduce-scatter");
    recv.Down(comm);
    bool ok = true;
    for (size_t i = 0; i < count; ++i) ok &= recv.host.Get(i) == expected(static_cast<size_t>(rank) * count + i);
    Expect(ok, rank, "reduce-scatter" + oname + tname + mode);

    const int root = size / 2;
    Staged mine(comm, type, count), reduced(comm, type, count);
    for (size_t i = 0; i < count; ++i) mine.host.Set(i, rank + 1 + static_cast<double>(i % 3));
    mine.Up(comm);
    Run(nb, [&] { return comm.Reduce(mine.device.data(), reduced.device.data(), count, type, op, root); },
        [&] { return comm.IReduce(mine.device.data(), reduced.device.data(), count, type, op, root); }, "reduce");
    if (rank == root) {
      reduced.Down(comm);
      ok = true;
      for (size_t i = 0; i < count; ++i) ok &= reduced.host.Get(i) == expected(i);
      Expect(ok, rank, "reduce" + oname + tname + mode);
    }
  }
  // All-gather, out of place and in place (this rank's block already in the output).
  for (bool in_place : {false, true}) {
    Staged mine(comm, type, count), all(comm, type, count * static_cast<size_t>(size));
    for (size_t i = 0; i < count; ++i) mine.host.Set(i, rank * 10 + static_cast<double>(i % 5));
    mine.Up(comm);
    const uint8_t* input = mine.device.data();
    if (in_place) {
      Must(comm.Upload(all.at(static_cast<size_t>(rank) * count), mine.host.bytes.data(), mine.host.bytes.size()), "upload");
      input = all.at(static_cast<size_t>(rank) * count);
    }
    Run(nb, [&] { return comm.AllGather(input, all.device.data(), count, type); },
        [&] { return comm.IAllGather(input, all.device.data(), count, type); }, "all-gather");
    all.Down(comm);
    bool ok = true;
    for (size_t j = 0; j < all.host.size(); ++j) ok &= all.host.Get(j) == static_cast<double>(j / count) * 10 + (j % count) % 5;
    Expect(ok, rank, "all-gather " + tname + mode + (in_place ? " in place" : ""));
  }

  for (bool in_place : {true, false}) {
    const int root = size - 1;
    Staged shared(comm, type, count), out(comm, type, count);
    for (size_t i = 0; i < count; ++i) shared.host.Set(i, rank == root ? static_cast<double>(3 * root + i % 7) : 0);
    shared.Up(comm);
    uint8_t* result = in_place ? shared.device.data() : out.device.data();
    Run(nb, [&] { return comm.Broadcast(shared.device.data(), result, count, type, root); },
        [&] { return comm.IBroadcast(shared.device.data(), result, count, type, root); }, "broadcast");
    Staged& got = in_place ? shared : out;
    got.Down(comm);
    bool ok = true;
    for (size_t i = 0; i < count; ++i) ok &= got.host.Get(i) == static_cast<double>(3 * root + i % 7);
    Expect(ok, rank, "broadcast " + tname + mode + (in_place ? " in place" : ""));
  }

  {  // all-to-all: block p of rank r holds 100 * r + p
    Staged send(comm, type, count * static_cast<size_t>(size)), recv(comm, type, count * static_cast<size_t>(size));
    for (size_t j = 0; j < send.host.size(); ++j) send.host.Set(j, (rank * 7 + static_cast<double>(j / count)) );
    send.Up(comm);
    Run(nb, [&] { return comm.AllToAll(send.device.data(), recv.device.data(), count, type); },
        [&] { return comm.IAllToAll(send.device.data(), recv.device.data(), count, type); }, "all-to-all");
    recv.Down(comm);
    bool ok = true;
    for (size_t j = 0; j < recv.host.size(); ++j) ok &= recv.host.Get(j) == static_cast<double>(j / count) * 7 + rank;
    Expect(ok, rank, "all-to-all " + tname + mode);
  }

  // A ring: send to the next rank, receive from the previous one (with one rank, itself).
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  Staged out(comm, type, count), in(comm, type, count);
  for (size_t i = 0; i < count; ++i) out.host.Set(i, rank + static_cast<double>(i % 4));
  out.Up(comm);
  Run(nb, [&] { return comm.SendRecv(out.device.data(), next, in.device.data(), previous, count, type); },
      [&] { return comm.ISendRecv(out.device.data(), next, in.device.data(), previous, count, type); }, "send/recv");
  in.Down(comm);
  bool ok = true;
  for (size_t i = 0; i < count; ++i) ok &= in.host.Get(i) == previous + static_cast<double>(i % 4);
  Expect(ok, rank, "send/recv " + tname + mode);

  // Separate send and receive calls; on a GPU stream they must come in an order that cannot deadlock.
  if (size > 1 && !nb) {
    Staged got(comm, type, count);
    if (rank % 2 == 0) {
      Must(comm.Send(out.device.data(), count, type, next), "send");
      Must(comm.Recv(got.device.data(), count, type, previous), "recv");
    } else {
      Must(comm.Recv(got.device.data(), count, type, previous), "recv");
      Must(comm.Send(out.device.data(), count, type, next), "send");
    }
    got.Down(comm);
    ok = true;
    for (size_t i = 0; i < count; ++i) ok &= got.host.Get(i) == previous + static_cast<double>(i % 4);
    Expect(ok, rank, "send then recv " + tname);
  }
}

// The sum of `value` over `comm`'s ranks, through its own buffers.
int32_t Sum(Comm& comm, int32_t value) {
  Staged one(comm, DataType::kInt32, 1);
  one.host.Set(0, value);
  one.Up(comm);
  Must(comm.AllReduce(one.device.data(), 1, DataType::kInt32, ReduceOp::kSum), "sum");
  one.Down(comm);
  return static_cast<int32_t>(one.host.Get(0));
}

}  // namespace

int main(int argc, char** argv) {
  auto kind = ParseCommKind(argc > 1 ? argv[1] : "auto");
  Must(kind.status(), "comm_ops");
  auto bootstrap = CreateBootstrap(BootstrapKind::kAuto, std::chrono::seconds(60),
                                   [](const srunway::common::Status& s) { std::fprintf(stderr, "%s\n", s.message().c_str()); });
  if (!bootstrap.ok()) return EXIT_FAILURE;
  const Identity& id = (*bootstrap)->identity();
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  auto comm_or = CreateComm(*kind, **bootstrap, options);
  Must(comm_or.status(), "CreateComm");
  Comm& comm = **comm_or;
  const int rank = comm.rank(), size = comm.size();
  for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32,
                        DataType::kInt64, DataType::kUInt8}) {
    for (bool nb : {false, true}) TestOps(comm, type, nb);
  }
  // Intra-node and inter-node communicators, as the trainer builds them.
  auto intra = comm.Split(id.node_id, id.local_rank);
  Must(intra.status(), "split by node");
  if (*intra == nullptr) Must(srunway::common::Internal("no communicator"), "split by node");
  Expect((*intra)->size() == id.local_size && (*intra)->rank() == id.local_rank, rank, "intra-node split size/rank");
  Expect(Sum(**intra, 1) == id.local_size, rank, "intra-node split all-reduce");
  auto inter = comm.Split(id.local_rank, id.node_id);
  Must(inter.status(), "split by local rank");
  if (*inter == nullptr) Must(srunway::common::Internal("no communicator"), "split by local rank");
  {  // one rank per node, ordered by node
    Comm& across = **inter;
    Staged mine(across, DataType::kInt32, 1), nodes(across, DataType::kInt32, static_cast<size_t>(across.size()));
    mine.host.Set(0, id.node_id);
    mine.Up(across);
    Must(across.AllGather(mine.device.data(), nodes.device.data(), 1, DataType::kInt32), "inter-node all-gather");
    nodes.Down(across);
    bool ok = nodes.host.Get(static_cast<size_t>(across.rank())) == id.node_id;
    for (size_t i = 1; i < nodes.host.size(); ++i) ok &= nodes.host.Get(i - 1) < nodes.host.Get(i);
    Expect(ok, rank, "inter-node split");
  }
  auto none = comm.Split(rank == 0 ? -1 : 0, rank);
  Must(none.status(), "split with no color");
  Expect((*none == nullptr) == (rank == 0), rank, "split with a negative color");
  intra->reset();
  inter->reset();
  none->reset();

  Must(comm.Barrier(), "barrier");
  int total_failures = Sum(comm, failures);
  if (rank == 0) {
    std::printf("comm ops (%s): %d ranks, %d checks per rank, %d failures\n",
                std::string(CommKindName(comm.kind())).c_str(), size, checks, total_failures);
  }
  comm_or->reset();
  return total_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
