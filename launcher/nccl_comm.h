// The NCCL backend of Comm: libnccl and the CUDA driver are opened at run time, so one build runs on GPU nodes and
// CPU-only nodes alike. Depends on comm.h alone: which ranks use it, and the exchange of unique ids, are the
// factory's (comm_factory.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/comm.h"

namespace srunway::launcher {

struct NcclRuntime;  // the CUDA driver, NCCL and this rank's GPU, opened once per process

// This rank's NCCL: what it offers the others in the factory's exchange.
struct NcclLocal {
  std::shared_ptr<NcclRuntime> runtime;  // null when this rank cannot use NCCL
  std::string why_not;                   // then, why (no driver, no GPU, NCCL missing or too old)
  std::string bus_id;                    // the PCI bus id of the GPU it took
  bool scalable = false;                 // its NCCL has ncclCommInitRankScalable (2.23 and later)
};

// Opens the driver and NCCL (SRUNWAY_NCCL_LIBRARY or the linker's path) and takes GPU `local_rank` % visible.
NcclLocal OpenNccl(int local_rank);
// One ncclUniqueId, as its raw bytes.
common::StatusOr<std::string> MakeNcclUniqueId(const NcclLocal& local);
// Rank `rank` of `size` from the unique ids every rank has in the same order: one id, ncclCommInitRankConfig;
// several, ncclCommInitRankScalable. Non-blocking, polled against `timeout`, aborted past it.
common::StatusOr<std::unique_ptr<Comm>> CreateNcclComm(const NcclLocal& local, const std::vector<std::string>& ids,
                                                       int rank, int size, std::chrono::milliseconds timeout);

}  // namespace srunway::launcher
