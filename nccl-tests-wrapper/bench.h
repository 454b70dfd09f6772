// srunway-collbench's measurement: nccl-tests' size sweep, timing and checking, over the launcher's Comm.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "launcher/bootstrap.h"
#include "launcher/comm.h"
#include "nccl-tests-wrapper/collectives.h"
#include "nccl-tests-wrapper/results.h"

namespace srunway::nccltests {

struct BenchOptions {
  const CollectiveInfo* collective = nullptr;
  int64_t min_bytes = 32 << 20;  // -b
  int64_t max_bytes = 32 << 20;  // -e
  int64_t step_bytes = 1 << 20;  // -i
  int64_t step_factor = 1;       // -f (> 1: multiply instead of adding -i)
  int iters = 20;                // -n
  int warmup = 5;                // -w
  bool check = true;             // -c
  std::string op = "sum";        // -o
  std::string type = "float";    // -d
  int average = 1;               // -a: time of 0 rank 0, 1 the mean over ranks, 2 the minimum, 3 the maximum
  int root = 0;                  // -r
  bool blocking = false;         // -z: wait for each operation before the next (CPU ranks always do)
  // Faults for the tests of run-nccl-tests' isolation, each naming one node whose ranks misbehave:
  // SRUNWAY_FAULT_SLOW_NODE throttles its transfers, ..._HANG_NODE stops them before their first collective,
  // ..._CRASH_NODE has them die of SIGSEGV there, ..._CORRUPT_NODE gives wrong input to every collective.
  // (SRUNWAY_FAULT_NO_COMM_NODE, in srunway-collbench, fails its communicator set-up as a node without NCCL.)
  struct Faults {
    std::string slow, hang, crash, corrupt;
  } faults;
};

// The faults named in the environment (see BenchOptions::Faults).
BenchOptions::Faults FaultsFromEnvironment();

// nccl-tests' type names that the Comm supports: float, half, bfloat16, int32, int64, uint8.
common::StatusOr<launcher::DataType> ParseType(std::string_view name);
common::StatusOr<launcher::ReduceOp> ParseOp(std::string_view name);

// Runs the sweep. Every rank takes part; `emit` receives (on every rank) each finished row, so rank 0 can print
// it at once. The returned Run holds the devices, rows and footer values (the same on every rank).
common::StatusOr<Run> RunBenchmark(const BenchOptions& options, launcher::Bootstrap& bootstrap,
                                   launcher::Comm& comm, const std::function<void(const Run&, const Row*)>& emit);

}  // namespace srunway::nccltests
